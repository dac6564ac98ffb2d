package openbao

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openbao/openbao/api/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// RolePrefix starts the name of every AppRole role this backend manages:
// bootroot-service-<registration_id>. (Up to 0.9.0 the backend also wrote a
// policy of that name per registration; it writes none now.)
const RolePrefix = "bootroot-service-"

// DefaultRequestTimeout bounds each request when Options.RequestTimeout is
// not set.
const DefaultRequestTimeout = 5 * time.Second

// DefaultMaxInFlight is Options.MaxInFlight's default (openbao.max_in_flight):
// well below the listeners' connection caps (128 each by default), so a
// hanging server holds at most this many callers, goroutines and
// connections.
const DefaultMaxInFlight = 16

// DefaultSlotWait is how long a call waits for one of the MaxInFlight slots
// when Options.SlotWait is not set. It is short on purpose: with every slot
// taken the server is slow or hanging, and the caller is better answered
// BackendUnavailable now than after openbao.request_timeout_ms.
const DefaultSlotWait = 100 * time.Millisecond

var _ registrar.Backend = (*Backend)(nil)

// Options configures New. Address and Token are required; the rest have
// the [openbao] table's defaults.
type Options struct {
	// Address is the server's URL (openbao.address with one URL). Used
	// when Addresses is empty.
	Address string
	// Addresses are the cluster's nodes (openbao.address with several
	// URLs): each request goes to the last node that answered, and fails
	// over to the next (see the package doc's "Several nodes").
	Addresses []string
	// ReadinessGrace is how long the requests may fail to reach an active
	// node before Ready reports the backend not ready
	// (openbao.readiness_grace_ms); zero means DefaultReadinessGrace.
	ReadinessGrace time.Duration
	// RootCAs verifies the server's certificate; nil means the system
	// roots.
	RootCAs *x509.CertPool
	// Token authenticates every request. It is never logged and never part
	// of an error.
	Token string
	// KVMount, KVPrefix and AppRoleMount are openbao.kv_mount,
	// openbao.kv_prefix and openbao.approle_mount; "" means "secret",
	// "registrar-otel" and "approle".
	KVMount, KVPrefix, AppRoleMount string
	// RequestTimeout bounds each request; zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// SecretIDTTL is each secret id's lifetime from its creation; zero
	// means one hour. It is rounded down to whole seconds.
	SecretIDTTL time.Duration
	// SecretIDNumUses is how many logins a secret id allows; zero means 1.
	SecretIDNumUses uint32
	// MaxInFlight bounds the calls (Mint, Deregister) talking to the
	// server at once (openbao.max_in_flight); each makes its requests one
	// after the other, so it also bounds the requests in flight. Zero means
	// DefaultMaxInFlight.
	MaxInFlight uint32
	// SlotWait bounds how long a call waits for a free slot before failing
	// with a *RequestError of kind KindSaturated, changing nothing; zero
	// means DefaultSlotWait.
	SlotWait time.Duration
	// Logger receives a warning for each failed request, with its cause;
	// nil discards. No message carries the token or a secret.
	Logger *slog.Logger
	// TracerProvider traces every request; nil means no-op.
	TracerProvider trace.TracerProvider
	// ReadToken, when set, reads the token again for RereadToken and for
	// CheckToken when TokenFile changed (the daemon's reads
	// openbao.token_file or the environment, as at start).
	ReadToken func() (string, error)
	// TokenFile is the file ReadToken reads, if any: CheckToken re-reads
	// the token when its identity (device, inode, size, mtime) changes.
	TokenFile string
	// Observer receives every request's measurements (the daemon's is
	// telemetry.NewOpenBaoObserver); nil means none.
	Observer Observer
}

// Backend is the openbao registrar.Backend. It is safe for concurrent use.
type Backend struct {
	client    *api.Client
	nodes     *nodeSet
	grace     time.Duration
	probing   atomic.Bool     // a readiness probe is in flight
	transport *http.Transport // nil if the client's is not an *http.Transport
	kv        *api.KVv2
	kvMount   string
	prefix    string
	approle   string
	timeout   time.Duration
	ttl       time.Duration
	uses      uint32
	log       *slog.Logger
	tel       *instruments
	slots     chan struct{} // a token per call in flight; cap MaxInFlight
	slotWait  time.Duration
	ids       idLocks // one mint or deregister of an id at a time
	claims    claims  // the same across registrars (claim.go)

	readToken func() (string, error)
	tokenFile string
	rotMu     sync.Mutex // serialises re-reads, lookups and renewals
	tokMu     sync.Mutex // guards tok
	tok       tokenState

	mu     sync.RWMutex // held shared by operations, exclusively by Close
	closed bool
}

// New returns a backend for the server at opts.Address, or the cluster of
// opts.Addresses. It makes no request: a server that is down fails the
// first mint, not the daemon's start.
func New(opts Options) (*Backend, error) {
	addrs := opts.Addresses
	if len(addrs) == 0 && opts.Address != "" {
		addrs = []string{opts.Address}
	}
	if len(addrs) == 0 {
		return nil, errors.New("openbao: New: empty address (openbao.address)")
	}
	if opts.Token == "" {
		return nil, errors.New("openbao: New: empty token")
	}
	nodes, err := ParseAddresses(addrs)
	if err != nil {
		return nil, fmt.Errorf("openbao: New: %w", err)
	}
	u := nodes[0]
	b := &Backend{
		grace:   opts.ReadinessGrace,
		kvMount: orDefault(opts.KVMount, "secret"),
		prefix:  orDefault(opts.KVPrefix, "registrar-otel"),
		approle: orDefault(opts.AppRoleMount, "approle"),
		timeout: opts.RequestTimeout,
		ttl:     opts.SecretIDTTL,
		uses:    opts.SecretIDNumUses,
		log:     opts.Logger,
	}
	if b.timeout <= 0 {
		b.timeout = DefaultRequestTimeout
	}
	if b.ttl <= 0 {
		b.ttl = time.Hour
	}
	if b.uses == 0 {
		b.uses = 1
	}
	maxInFlight := opts.MaxInFlight
	if maxInFlight == 0 {
		maxInFlight = DefaultMaxInFlight
	}
	b.slots = make(chan struct{}, maxInFlight)
	b.slotWait = opts.SlotWait
	if b.slotWait <= 0 {
		b.slotWait = DefaultSlotWait
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.grace <= 0 {
		b.grace = DefaultReadinessGrace
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Redacted()
	}
	b.log = b.log.With("openbao", strings.Join(names, ","))

	// NewConfig, not DefaultConfig: nothing is read from BAO_* / VAULT_*
	// variables (an inherited BAO_SKIP_VERIFY must not turn verification
	// off). No client-side retries: every step converges when the caller
	// retries, and a retried write would blur what the metrics count.
	cfg := api.NewConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("openbao: New: %w", cfg.Error)
	}
	cfg.Address = u.String()
	cfg.MaxRetries = 0
	cfg.Timeout = b.timeout
	// No redirect is followed: Vault redirects only when a standby could
	// not forward a request to the active node, and the failover transport
	// decides what to send again (the client would take a second redirect
	// for a success).
	cfg.DisableRedirects = true
	t, ok := cfg.HttpClient.Transport.(*http.Transport)
	if !ok {
		return nil, errors.New("openbao: New: the client's transport is not an *http.Transport")
	}
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.RootCAs = opts.RootCAs
	t.DialContext = (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	b.transport = t
	b.nodes = newNodeSet(nodes, t, idempotentRequest(b.approle), b.log)
	cfg.HttpClient.Transport = b.nodes
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("openbao: New: %w", err)
	}
	client.SetToken(opts.Token)
	b.client = client
	b.readToken, b.tokenFile = opts.ReadToken, opts.TokenFile
	if b.tokenFile != "" {
		b.tok.fileID, _ = statFile(b.tokenFile)
	}
	b.kv = client.KVv2(b.kvMount)
	b.tel = newInstruments(opts.TracerProvider, opts.Observer, u)
	return b, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Close stops the backend: every later call returns ErrClosed. Calls in
// flight finish first. Idle connections are closed.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		if b.transport != nil {
			b.transport.CloseIdleConnections()
		}
	}
	return nil
}

// RoleName returns the AppRole role's name for a registration id: bootroot-service-<registration_id>.
func RoleName(registrationID string) string { return RolePrefix + registrationID }

// BindingPath returns the binding's path inside the KV mount:
// <kv_prefix>/bindings/<registration_id>.
func (b *Backend) BindingPath(registrationID string) string {
	return path.Join(b.prefix, "bindings", registrationID)
}

// TokenPolicy returns the policy the backend's token must hold, for its
// mounts, prefix and secret id settings: see the package function
// TokenPolicy.
func (b *Backend) TokenPolicy() string {
	return TokenPolicy(b.kvMount, b.prefix, b.approle, b.ttl, b.uses)
}

func (b *Backend) enter() error {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (b *Backend) leave() { b.mu.RUnlock() }

// acquire takes one of the MaxInFlight slots, waiting at most slotWait. A
// call that gets none fails before any request, as a *RequestError of kind
// KindSaturated on op (the request it could not make), counted like any
// failed request.
func (b *Backend) acquire(ctx context.Context, op Operation) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(b.slotWait)
	defer t.Stop()
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-t.C:
		return b.tel.saturated(ctx, op, fmt.Errorf("all %d slots (openbao.max_in_flight) busy for %s: the server is slow or hanging", cap(b.slots), b.slotWait))
	case <-ctx.Done():
		return b.tel.saturated(ctx, op, fmt.Errorf("waiting for a slot (openbao.max_in_flight): %w", ctx.Err()))
	}
}

func (b *Backend) release() { <-b.slots }

// logFailure logs a verb's failed request at WARN, with the request error's
// operation, kind and status and the steps a partial failure changed.
func (b *Backend) logFailure(ctx context.Context, verb, id string, err error) {
	attrs := []slog.Attr{slog.String("verb", verb), slog.String("registration_id", id), slog.String("error", err.Error())}
	if re, ok := errors.AsType[*RequestError](err); ok {
		attrs = append(attrs, slog.String("operation", re.Op.String()), slog.String("kind", re.Kind.String()))
		if re.Status != 0 {
			attrs = append(attrs, slog.Int("status", re.Status))
		}
	}
	if p, ok := errors.AsType[*registrar.PartialError](err); ok {
		attrs = append(attrs, slog.String("changed", strings.Join(p.Changed, ", ")))
	}
	b.log.LogAttrs(ctx, slog.LevelWarn, "openbao request failed", attrs...)
}

// isName reports whether s is 1–131 octets of [a-z0-9-]: what the verbs
// derive, and all that may appear in a role name, policy name or path.
func isName(s string) bool {
	if len(s) == 0 || len(s) > 131 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
