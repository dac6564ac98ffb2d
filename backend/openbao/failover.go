package openbao

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultDialTimeout bounds each connection attempt to one node, so a node
// whose host is gone (no refusal, the packets just vanish) costs this much
// of a request's openbao.request_timeout_ms before the next node is tried,
// not all of it.
const DefaultDialTimeout = time.Second

// DefaultReadinessGrace is Options.ReadinessGrace's default
// (openbao.readiness_grace_ms): longer than a raft election on a healthy
// cluster, so a leader's death does not take every registrar out of its
// balancer at once, short enough that one that cannot reach the cluster
// is routed around within seconds.
const DefaultReadinessGrace = 10 * time.Second

// maxErrorBody bounds how much of a failed answer's body the transport
// reads to judge it (Vault's error lists are a few hundred bytes).
const maxErrorBody = 64 << 10

// The server's answers that say the request reached no active node and
// was not applied.
const (
	// msgNoActive is a standby's 500 when it knows of no active node (an
	// election is under way): it handled nothing.
	msgNoActive = "local node not active but active cluster node not found"
)

// verdict is what one attempt's outcome says about the request.
type verdict uint8

const (
	// answered: the cluster answered (any 2xx, 4xx, or a 5xx that is not
	// about reaching the active node). Returned to the caller as it is.
	answered verdict = iota
	// notApplied: no node applied the request (the connection was
	// refused, the node is sealed or standby without a leader): any
	// request may go to the next node.
	notApplied
	// maybeApplied: the request may have been applied (the connection
	// broke after it was sent, a 502/504, a standby whose forwarding to
	// the active node failed): only an idempotent request is sent again.
	maybeApplied
)

// nodeSet is the http.RoundTripper of the backend's client: it sends each
// request to one of the configured nodes (openbao.address), the last one
// that answered first, and fails over to the next one when a node cannot
// take the request. It sends a request again only where that is safe: to
// any node when no node applied it, and when it may have been applied
// only if idempotent says so. It records whether the cluster is reachable
// for the readiness probe. Safe for concurrent use.
type nodeSet struct {
	nodes      []*url.URL
	base       http.RoundTripper
	idempotent func(method, path string) bool
	now        func() time.Time
	log        *slog.Logger

	cur atomic.Int32 // the node tried first

	mu           sync.Mutex
	lastContact  time.Time // the last answer or failure, whichever came last
	failingSince time.Time // zero while the last attempt was answered
	lastFailure  string
}

func newNodeSet(nodes []*url.URL, base http.RoundTripper, idempotent func(method, path string) bool, log *slog.Logger) *nodeSet {
	return &nodeSet{
		nodes: nodes, base: base, idempotent: idempotent, log: log,
		now: time.Now,
	}
}

// RoundTrip sends req to the current node and, on a failure the verdict
// allows, to each other node in turn, once: until one answers. With no
// node left it returns the last failure, at once, as a single server's
// failure is: the caller's retry is the retry (a raft election takes
// seconds, and a caller held through it would hold a slot of
// openbao.max_in_flight). A request that may have been applied and is not
// idempotent is not sent again. A redirect (a standby that could not
// forward to the active node) is never returned as an answer: the client
// would take a 307 for success.
func (n *nodeSet) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := replayableBody(req)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	first := int(n.cur.Load())
	var lastResp *http.Response
	var lastErr error
	for try := range len(n.nodes) {
		if lastResp != nil {
			lastResp.Body.Close()
		}
		i := (first + try) % len(n.nodes)
		resp, err := n.base.RoundTrip(onNode(req, n.nodes[i], body))
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			// The caller gave up: that says nothing about the cluster.
			return nil, err
		}
		v, reason, resp, err := judge(resp, err)
		if v == answered {
			n.answered(i)
			return resp, err
		}
		n.failed(i, reason)
		lastResp, lastErr = resp, err
		if ctx.Err() != nil || (v == maybeApplied && !n.idempotent(req.Method, req.URL.Path)) {
			break
		}
		n.log.Debug("openbao node failed; trying the next", "node", n.nodes[i].Redacted(), "reason", reason)
	}
	return lastResp, lastErr
}

// onNode is req addressed to node, with a fresh copy of its body.
func onNode(req *http.Request, node *url.URL, body []byte) *http.Request {
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host = node.Scheme, node.Host
	r.Host = ""
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	return r
}

// replayableBody reads req's body once, so every attempt can send it (the
// backend's bodies are a few hundred bytes of JSON).
func replayableBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("openbao: reading the request body: %w", err)
	}
	return b, nil
}

// judge says what an attempt's outcome means. A failed answer's body is
// read (bounded) to tell "no active node" from other 500s, and given back
// readable; a redirect becomes an error.
func judge(resp *http.Response, err error) (verdict, string, *http.Response, error) {
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return maybeApplied, "no answer within the request's timeout", nil, err
		}
		if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
			return notApplied, "cannot connect: " + oe.Err.Error(), nil, err
		}
		return maybeApplied, "the connection failed: " + err.Error(), nil, err
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		loc := resp.Header.Get("Location")
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		// Vault redirects to the active node only when a standby's
		// forwarding failed (the active node died with the request in
		// flight, perhaps after applying it): the redirect's target is
		// that node.
		err := &RedirectError{Status: resp.StatusCode, Location: redactLocation(loc)}
		return maybeApplied, err.Error(), nil, err
	case http.StatusServiceUnavailable:
		// Sealed, standby without an active node, over capacity: Vault
		// answers 503 before handling the request.
		text := readBack(resp)
		return notApplied, fmt.Sprintf("HTTP 503: %s", oneLine(text)), resp, nil
	}
	if resp.StatusCode >= 500 {
		text := readBack(resp)
		if strings.Contains(text, msgNoActive) {
			return notApplied, "HTTP 500: " + msgNoActive, resp, nil
		}
		if resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout {
			return maybeApplied, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, oneLine(text)), resp, nil
		}
	}
	return answered, "", resp, nil
}

// readBack reads a failed answer's body (bounded) and puts it back.
func readBack(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return string(b)
}

func redactLocation(loc string) string {
	u, err := url.Parse(loc)
	if err != nil || u.Host == "" {
		return "?"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
}

// RedirectError is a node's redirect to another: a standby that could not
// forward the request to the active node it knew (which died, perhaps
// after applying it). The backend follows no redirect; the request went to
// the next node if it was safe to send again.
type RedirectError struct {
	// Status is the HTTP status (307 from Vault).
	Status int
	// Location is the redirect's target, scheme and host only.
	Location string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("a standby could not forward the request to the active node (HTTP %d to %s)", e.Status, e.Location)
}

func (n *nodeSet) answered(i int) {
	n.cur.Store(int32(i))
	n.mu.Lock()
	n.lastContact = n.now()
	n.failingSince = time.Time{}
	n.lastFailure = ""
	n.mu.Unlock()
}

func (n *nodeSet) failed(i int, reason string) {
	// The next request starts at the node after this one, unless another
	// request already moved on.
	n.cur.CompareAndSwap(int32(i), int32((i+1)%len(n.nodes)))
	now := n.now()
	n.mu.Lock()
	n.lastContact = now
	if n.failingSince.IsZero() {
		n.failingSince = now
	}
	n.lastFailure = n.nodes[i].Redacted() + ": " + reason
	n.mu.Unlock()
}

// Reachability is what the backend knows about reaching the cluster: the
// readiness probe's input.
type Reachability struct {
	// LastContact is when the last request to any node ended, answered or
	// failed; zero before the first.
	LastContact time.Time
	// FailingSince is when the requests started failing to reach an
	// active node; zero while the last one was answered.
	FailingSince time.Time
	// LastFailure says why the last failed attempt failed, naming the
	// node.
	LastFailure string
}

func (n *nodeSet) reachability() Reachability {
	n.mu.Lock()
	defer n.mu.Unlock()
	return Reachability{LastContact: n.lastContact, FailingSince: n.failingSince, LastFailure: n.lastFailure}
}

// idempotentRequest reports whether a request may be sent again after it
// may have been applied: reads and lists; deletes (of a role, of a
// binding's metadata), which succeed on what is gone; a role write, which
// restates the whole role; the destroy of a secret id by its accessor
// (one already destroyed is recognised as such); the token's own lookup
// and renewal and the capabilities query. Not a binding write (a
// compare-and-set: sent twice, the second loses to the first) and not a
// secret id's generation (each makes a new one).
func idempotentRequest(approleMount string) func(method, path string) bool {
	rolePrefix := "/v1/auth/" + approleMount + "/role/"
	return func(method, p string) bool {
		switch method {
		case http.MethodGet, http.MethodHead, "LIST", http.MethodDelete:
			return true
		case http.MethodPut, http.MethodPost:
		default:
			return false
		}
		switch p {
		case "/v1/auth/token/lookup-self", "/v1/auth/token/renew-self", "/v1/sys/capabilities-self":
			return true
		}
		rest, ok := strings.CutPrefix(p, rolePrefix)
		if !ok || rest == "" {
			return false
		}
		role, tail, _ := strings.Cut(rest, "/")
		if role == "" {
			return false
		}
		return tail == "" || tail == "secret-id-accessor/destroy"
	}
}

// ParseAddresses parses openbao.address's URLs (one or several), for New:
// each must be an http:// or https:// URL with a host; an error names the
// element's index.
func ParseAddresses(addrs []string) ([]*url.URL, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no address (openbao.address)")
	}
	out := make([]*url.URL, 0, len(addrs))
	seen := map[string]int{}
	for i, a := range addrs {
		u, err := url.Parse(strings.TrimSpace(a))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("address %d of %d %q is not an http:// or https:// URL", i+1, len(addrs), redactAddress(a))
		}
		key := u.Scheme + "://" + strings.ToLower(u.Host)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("address %d of %d %q repeats address %d", i+1, len(addrs), u.Redacted(), j+1)
		}
		seen[key] = i
		out = append(out, &url.URL{Scheme: u.Scheme, Host: u.Host})
	}
	return out, nil
}

func redactAddress(a string) string {
	if u, err := url.Parse(a); err == nil {
		return u.Redacted()
	}
	if strings.Contains(a, "@") {
		return "(redacted)"
	}
	return a
}
