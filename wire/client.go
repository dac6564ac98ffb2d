package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"go.opentelemetry.io/otel/propagation"
)

// MaxResponseBytes bounds a response body the client reads (1 MiB).
const MaxResponseBytes = 1 << 20

// Client speaks the protocol to a registrar over its unix socket or over
// TCP with mutual TLS. A refusal is not an error: it is a Response with
// Class set. The error is for what kept the client from getting a
// protocol answer (dialling, TLS, a body that is not the protocol's). A
// Client is safe for concurrent use.
type Client struct {
	base       string
	endpoint   string // what messages name: "unix socket PATH" or "ADDR (TLS)"
	hc         *http.Client
	propagator propagation.TextMapPropagator
}

type clientConfig struct {
	propagator  propagation.TextMapPropagator
	noKeepAlive bool
	timeout     time.Duration
	// serverUIDs are the uids besides root a unix socket's server may run
	// as; nil: the owner of the socket's directory.
	serverUIDs []uint32
}

// ClientOption configures a Client.
type ClientOption func(*clientConfig)

// WithPropagator sets how the client propagates the trace context of each
// call's ctx into the request headers. The default is
// propagation.TraceContext{} (traceparent, tracestate): a caller with a
// span in ctx makes the registrar's span its child. nil propagates
// nothing.
func WithPropagator(p propagation.TextMapPropagator) ClientOption {
	return func(c *clientConfig) { c.propagator = p }
}

// WithoutKeepAlive makes every call use a connection of its own, closed
// after the answer.
func WithoutKeepAlive() ClientOption {
	return func(c *clientConfig) { c.noKeepAlive = true }
}

// WithTimeout bounds each call, from dialling to the end of the body
// (default: none besides the call's ctx).
func WithTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.timeout = d }
}

// WithServerUIDs names the uids, besides root, that the server on a unix
// socket may run as (the daemon's user: the owner of its
// registrar.state_dir). Without it, the owner of the socket's directory is
// trusted besides root. Over TLS the server's certificate is checked
// instead, and the option is not used.
func WithServerUIDs(uids ...uint32) ClientOption {
	return func(c *clientConfig) { c.serverUIDs = append([]uint32{}, uids...) }
}

// ServerNotTrustedError is a unix socket whose server runs as a user the
// client does not trust: neither root nor one of the trusted uids
// (WithServerUIDs, or the owner of the socket's directory). Whoever can
// create a socket where the client looks can answer in the registrar's
// place (a forged backup, a forged limits answer), so the client speaks
// to it no further: nothing was sent but the connection itself.
type ServerNotTrustedError struct {
	// Socket is the socket's path.
	Socket string
	// UID is the server's uid, from SO_PEERCRED.
	UID uint32
	// Trusted are the uids trusted besides root.
	Trusted []uint32
	// Unmapped: UID is the kernel's overflow uid, standing for a uid not
	// mapped into the client's user namespace, and the socket's directory
	// may be written by others than its owner: who the server is cannot be
	// told from there (the daemon and a stranger read alike).
	Unmapped bool
}

func (e *ServerNotTrustedError) Error() string {
	if e.Unmapped {
		return fmt.Sprintf("wire: the server on unix socket %s runs as a uid this client's user namespace does not map (the kernel reports it as %d), in a directory others may write: "+
			"it cannot be told from another user's process answering in the registrar's place, so the client refuses it; run the command outside the user namespace",
			e.Socket, e.UID)
	}
	want := "root"
	for _, u := range e.Trusted {
		want += " or uid " + strconv.FormatUint(uint64(u), 10)
	}
	return fmt.Sprintf("wire: the server on unix socket %s runs as uid %d, not as %s (the daemon's user): refusing to talk to it, another user's process may be answering in the registrar's place",
		e.Socket, e.UID, want)
}

// checkServer refuses c unless its server runs as root or a trusted uid
// (see ServerNotTrustedError). Off Linux the uid cannot be read, and
// nothing is checked.
func checkServer(c net.Conn, socketPath string, trusted []uint32) error {
	uc, ok := c.(*net.UnixConn)
	if !peerCredentials || !ok {
		return nil
	}
	uid, err := PeerUID(uc)
	if err != nil {
		return fmt.Errorf("wire: unix socket %s: checking who the server is: %w", socketPath, err)
	}
	if uid == 0 {
		return nil
	}
	dir := filepath.Dir(socketPath)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("wire: unix socket %s: checking who the server is: %w", socketPath, err)
	}
	// Inside a user namespace every unmapped uid reads as the overflow
	// uid: the daemon, the directories' owners (root among them) and a
	// stranger alike. The owner rule below then holds for anyone who could
	// put a socket there, so a directory others may write (a shared one,
	// such as /tmp) leaves nothing to tell them apart by: refused. A
	// directory only its owner writes (the daemon's /run/registrar-otel)
	// is judged as outside the namespace.
	if unmappedUID(uid) && fi.Mode().Perm()&0o022 != 0 {
		return &ServerNotTrustedError{Socket: socketPath, UID: uid, Trusted: trusted, Unmapped: true}
	}
	if trusted == nil {
		if owner, ok := FileOwner(fi); ok {
			trusted = []uint32{owner}
		}
	}
	if slices.Contains(trusted, uid) {
		return nil
	}
	return &ServerNotTrustedError{Socket: socketPath, UID: uid, Trusted: trusted}
}

// NewUnixClient returns a client of the registrar listening on the unix
// socket at socketPath. Each connection's server must run as root or a
// trusted uid (WithServerUIDs); another is refused with a
// *ServerNotTrustedError before anything is sent.
func NewUnixClient(socketPath string, opts ...ClientOption) *Client {
	cfg := clientOptions(opts)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", socketPath)
			if err != nil {
				return nil, err
			}
			if err := checkServer(c, socketPath, cfg.serverUIDs); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
		DisableKeepAlives: cfg.noKeepAlive,
		IdleConnTimeout:   DefaultIdleTimeout / 2, // before the server drops it
	}
	// The host is a placeholder: the dialer ignores it, and errors name
	// the socket instead of the placeholder URL.
	c := newClient("http://registrar", tr, cfg)
	c.endpoint = "unix socket " + socketPath
	return c
}

// NewTLSClient returns a client of the registrar listening on addr
// (host:port) with mutual TLS. tlsConfig carries the client certificate
// and the roots that verify the server; it is cloned.
func NewTLSClient(addr string, tlsConfig *tls.Config, opts ...ClientOption) *Client {
	cfg := clientOptions(opts)
	var tc *tls.Config
	if tlsConfig != nil {
		tc = tlsConfig.Clone()
	} else {
		tc = &tls.Config{}
	}
	if tc.MinVersion == 0 {
		tc.MinVersion = tls.VersionTLS13
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: DefaultReadHeaderTimeout,
		DisableKeepAlives:   cfg.noKeepAlive,
		IdleConnTimeout:     DefaultIdleTimeout / 2,
	}
	c := newClient("https://"+addr, tr, cfg)
	c.endpoint = addr + " (TLS)"
	return c
}

func clientOptions(opts []ClientOption) clientConfig {
	cfg := clientConfig{propagator: propagation.TraceContext{}}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

func newClient(base string, tr *http.Transport, cfg clientConfig) *Client {
	return &Client{
		base:       base,
		hc:         &http.Client{Transport: tr, Timeout: cfg.timeout},
		propagator: cfg.propagator,
	}
}

// CloseIdleConnections closes the client's kept-alive connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Response is a decoded answer. The members that do not apply to the
// answer's shape are zero.
type Response struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// ProtocolVersion is the answer's protocol_version (1).
	ProtocolVersion int
	// RequestID names the invocation (the verbs' id, or a "wire." id for a
	// request no verb saw).
	RequestID string
	// RegistrationID is set on success, and on a refusal that came after
	// derivation.
	RegistrationID string
	// Outcome is set on success: first_mint, idempotent_remint, removed,
	// already_absent.
	Outcome string
	// Material is set on a mint success.
	Material *Material
	// Class, ErrorID are set on a refusal; Class is the identifier's.
	Class   Class
	ErrorID ErrorID
	// Reason is RegistrarUnavailable's and CallerNotPermitted's reason.
	Reason string
	// Scope is CallerNotPermitted's scope, for out_of_scope.
	Scope string
	// Ceiling and Limit are InstanceCeilingReached's ceiling and its value.
	Ceiling string
	Limit   uint32
	// Detail is RequestMalformed's detail.
	Detail string
	// RetryAfter is RegistrarBusy's retry_after, whole seconds.
	RetryAfter uint64
	// RetryAfterHeader is the Retry-After header as received ("" if none).
	RetryAfterHeader string
	// RateLimitPolicy and RateLimit are the answer's RateLimit-Policy and
	// RateLimit fields, parsed (each field's lines joined); nil when the
	// field is absent or malformed. The registrar sends both on every mint
	// and deregister answer, describing the caller's own admission bucket
	// for the verb called (docs/en/wire.md#ratelimit).
	RateLimitPolicy *RateLimitPolicy
	RateLimit       *RateLimit
	// RateLimitError says why a RateLimit-Policy or RateLimit field that
	// was present is nil: a *RateLimitFieldError, or both joined
	// (errors.Join). A malformed field never fails the call: the draft
	// (section 7) requires it be ignored, and the answer is still the
	// verb's.
	RateLimitError error
	// Health is registrar_health decoded; members this client does not
	// know are kept (json.Marshal of Health gives them back unchanged).
	// RawHealth is it as received.
	Health    health.Container
	RawHealth json.RawMessage
	// Body is the response body as received.
	Body []byte
}

// OK reports a success (200 with an outcome, or a health answer).
func (r *Response) OK() bool { return r.StatusCode == http.StatusOK && r.ErrorID == "" }

// Retryable reports a retryable refusal (RegistrarBusy): retry after
// RetryAfter seconds.
func (r *Response) Retryable() bool { return r.Class == Retryable }

// Mint calls POST /v1/mint. A zero ProtocolVersion is sent as 1.
func (c *Client) Mint(ctx context.Context, req MintRequest) (*Response, error) {
	if req.ProtocolVersion == 0 {
		req.ProtocolVersion = ProtocolVersion
	}
	return c.post(ctx, PathMint, &req)
}

// Deregister calls POST /v1/deregister. A zero ProtocolVersion is sent as 1.
func (c *Client) Deregister(ctx context.Context, req DeregisterRequest) (*Response, error) {
	if req.ProtocolVersion == 0 {
		req.ProtocolVersion = ProtocolVersion
	}
	return c.post(ctx, PathDeregister, &req)
}

// Health calls GET /v1/health.
func (c *Client) Health(ctx context.Context) (*Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+PathHealth, nil)
	if err != nil {
		return nil, fmt.Errorf("wire: health request: %w", err)
	}
	return c.do(ctx, hreq)
}

func (c *Client) post(ctx context.Context, path string, v any) (*Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("wire: encode %s request: %w", path, err)
	}
	for attempt := 0; ; attempt++ {
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("wire: %s request: %w", path, err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		// Both verbs are idempotent by contract (a repeated mint is a
		// remint, a repeated deregister already_absent), so a request that
		// met a keep-alive connection the server had just closed as idle
		// (evicted at a connection cap to admit a newcomer, or past its
		// idle timeout) may be sent again on a fresh one: net/http does so
		// only on a reused connection and only when no byte of an answer
		// came back. A nil value marks the request so without sending the
		// header.
		hreq.Header["Idempotency-Key"] = nil
		res, err := c.do(ctx, hreq)
		// net/http's own resend covers connections it had used before; a
		// connection it had just opened (or dialled ahead and kept) that
		// the server closed before answering gets one more try here, for
		// the same reason. Never after any byte of an answer.
		var se *sendError
		if err == nil || attempt > 0 || ctx.Err() != nil || !errors.As(err, &se) || !connectionLost(se.err) {
			return res, err
		}
	}
}

// sendError is a request that got no answer at all: the connection failed
// before any byte of a response came back.
type sendError struct{ err error }

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// connectionLost reports whether err is a connection the server closed
// (or reset) under a request, as it does to an idle connection it evicts.
func connectionLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "server closed idle connection")
}

func (c *Client) do(ctx context.Context, hreq *http.Request) (*Response, error) {
	if c.propagator != nil {
		c.propagator.Inject(ctx, propagation.HeaderCarrier(hreq.Header))
	}
	hres, err := c.send(hreq)
	if err != nil {
		return nil, &sendError{err}
	}
	defer hres.Body.Close()
	body, err := io.ReadAll(io.LimitReader(hres.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("wire: %s %s: reading the response: %w", hreq.Method, hreq.URL.Path, err)
	}
	resp := &Response{StatusCode: hres.StatusCode, RetryAfterHeader: hres.Header.Get("Retry-After"), Body: body}
	resp.readRateLimit(hres.Header)
	if len(body) > MaxResponseBytes {
		return resp, fmt.Errorf("wire: %s %s: response exceeds %d bytes", hreq.Method, hreq.URL.Path, MaxResponseBytes)
	}
	if err := resp.decode(); err != nil {
		return resp, fmt.Errorf("wire: %s %s: HTTP %d: %w", hreq.Method, hreq.URL.Path, hres.StatusCode, err)
	}
	return resp, nil
}

// send sends hreq. net/http wraps a failure's cause in a *url.Error naming
// the request URL, which for the unix socket is a placeholder; send's error
// names the method, the path and the endpoint instead.
func (c *Client) send(hreq *http.Request) (*http.Response, error) {
	hres, err := c.hc.Do(hreq)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("wire: %s %s on %s: %w", hreq.Method, hreq.URL.Path, c.endpoint, err)
	}
	return hres, nil
}

// readRateLimit parses the RateLimit-Policy and RateLimit fields of h,
// each from all its field lines joined with ", " (RFC 9110 section 5.3).
func (r *Response) readRateLimit(h http.Header) {
	var errs [2]error
	if lines := h.Values(HeaderRateLimitPolicy); len(lines) > 0 {
		f, err := ParseRateLimitPolicy(strings.Join(lines, ", "))
		if err == nil {
			r.RateLimitPolicy = &f
		}
		errs[0] = err
	}
	if lines := h.Values(HeaderRateLimit); len(lines) > 0 {
		f, err := ParseRateLimit(strings.Join(lines, ", "))
		if err == nil {
			r.RateLimit = &f
		}
		errs[1] = err
	}
	switch {
	case errs[0] != nil && errs[1] != nil:
		r.RateLimitError = errors.Join(errs[0], errs[1])
	case errs[0] != nil:
		r.RateLimitError = errs[0]
	default:
		r.RateLimitError = errs[1]
	}
}

// anyResponse is the union of the response shapes.
type anyResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RequestID       string          `json:"request_id"`
	RegistrationID  string          `json:"registration_id"`
	Outcome         string          `json:"outcome"`
	Material        *Material       `json:"material"`
	Class           Class           `json:"class"`
	Error           *ErrorBody      `json:"error"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

func (r *Response) decode() error {
	var u anyResponse
	if err := json.Unmarshal(r.Body, &u); err != nil {
		return fmt.Errorf("not a protocol response: %w", err)
	}
	r.ProtocolVersion = u.ProtocolVersion
	r.RequestID, r.RegistrationID, r.Outcome, r.Material = u.RequestID, u.RegistrationID, u.Outcome, u.Material
	r.Class = u.Class
	if u.Error != nil {
		r.ErrorID, r.Reason, r.Detail, r.RetryAfter = u.Error.ID, u.Error.Reason, u.Error.Detail, u.Error.RetryAfter
		r.Scope, r.Ceiling, r.Limit = u.Error.Scope, u.Error.Ceiling, u.Error.Limit
	}
	r.RawHealth = u.RegistrarHealth
	if len(u.RegistrarHealth) > 0 {
		if err := json.Unmarshal(u.RegistrarHealth, &r.Health); err != nil {
			return fmt.Errorf("registrar_health: %w", err)
		}
	}
	switch {
	case u.ProtocolVersion != ProtocolVersion:
		return fmt.Errorf("protocol_version %d, want %d", u.ProtocolVersion, ProtocolVersion)
	case r.StatusCode != http.StatusOK && u.Error == nil:
		return errors.New("a refusal without an error member")
	case len(u.RegistrarHealth) == 0:
		return errors.New("no registrar_health")
	}
	return nil
}
