package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/wire"
)

// Defaults for the zero values of Options.
const (
	// DefaultUnixMaxConns caps the unix listener's connections.
	DefaultUnixMaxConns = 128
	// DefaultTLSMaxConns caps the TLS listener's established connections.
	DefaultTLSMaxConns = 128
	// DefaultTLSHandshakeMaxConns caps the TLS connections still in their
	// handshake.
	DefaultTLSHandshakeMaxConns = 32
	// DefaultTLSHandshakeTimeout bounds a TLS handshake.
	DefaultTLSHandshakeTimeout = 3 * time.Second
	// DefaultMaxConnsPerIdentity caps one identity's connections on each
	// listener.
	DefaultMaxConnsPerIdentity = 64
	// DefaultRejectionLogInterval is the least time between two WARN lines
	// of one (listener, reason).
	DefaultRejectionLogInterval = 10 * time.Second
	// DefaultReadBodyTimeout bounds a request's body, from the end of its
	// headers to the end of the body.
	DefaultReadBodyTimeout = 3 * time.Second
	// DefaultMaxInFlightPerIdentity caps one identity's requests in
	// handlers at once: a control plane's wave at concurrency 64 alone is
	// not held back.
	DefaultMaxInFlightPerIdentity = 64
	// DefaultSharedInFlight is the requests in handlers at once, all
	// identities, beyond each identity's guaranteed share, while more
	// than one identity is calling.
	DefaultSharedInFlight = 8
	// DefaultWaitTimeout bounds a request's wait for its turn.
	DefaultWaitTimeout = 2 * time.Second
	// MaxRefusalPace is the longest a limiter's refusal may be held: the
	// least retry_after the protocol gives (1 s), so a paced answer never
	// arrives after the time it tells its caller to wait.
	MaxRefusalPace = time.Second
)

// Options configure a Server. Verbs and Health are required; a zero limit
// or timeout means its default.
type Options struct {
	Verbs Verbs
	// Health is the shared registrar_health snapshot, served on every
	// response as it is (never computed per request).
	Health *health.Holder
	// Backup writes a consistent snapshot of the registry to w (the
	// embedded backend's Backup) for GET /v1/admin/backup; nil answers
	// AdminUnsupported.
	Backup func(ctx context.Context, w io.Writer) (int64, error)
	// Reload re-reads and applies the daemon's configuration for POST
	// /v1/admin/reload; nil answers AdminUnsupported.
	Reload func(ctx context.Context) wire.ReloadResult
	// Limits answers GET /v1/admin/limits (registrar-otel limits show):
	// the limiter's state of req.Identity, or of every identity with an
	// entry in its map when req.Identity is empty (at most the map's 512
	// entries). An identity without an entry is answered with every key
	// absent (its next charge starts a full bucket), not as an error; the
	// answer must hold exactly that identity. The server sorts the
	// identities. A nil Limits answers AdminUnsupported; an error answers
	// AdminFailed with it.
	Limits func(ctx context.Context, req wire.LimitsRequest) (wire.LimitsAnswer, error)
	// LimitsReset refills the keys req selects of req.Identity to their
	// burst (POST /v1/admin/limits/reset, registrar-otel limits reset) and
	// records the reset in the audit store as caller's: the administrator's
	// identity, unix-peer:uid=N. Its context is not cancelled by the
	// caller hanging up (the reset and its record finish together); the
	// answer must name req.Identity. A nil LimitsReset answers
	// AdminUnsupported; an error answers AdminFailed with it.
	LimitsReset func(ctx context.Context, caller string, req wire.LimitsResetRequest) (wire.LimitsResetAnswer, error)
	// AdminAllowed says which unix uids may make administrative requests;
	// nil means DefaultAdminAllowed (the daemon's own uid and root).
	AdminAllowed func(uid uint32) bool
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// UnixMaxConns caps the connections of each unix listener (default
	// 128); TLSMaxConns those of each TLS listener once their handshake is
	// done (default 128). At the cap a connection without a request in
	// flight (idle, or still sending its request), of the identity that
	// holds the most connections, is closed to admit a newcomer; the
	// newcomer is refused (closed) only when every connection has a
	// request in flight.
	UnixMaxConns, TLSMaxConns int
	// TLSHandshakeMaxConns caps the connections of each TLS listener still
	// in their handshake (default 32), apart from TLSMaxConns: at the cap
	// the oldest is closed. TLSHandshakeTimeout bounds a handshake
	// (default 3 s).
	TLSHandshakeMaxConns int
	TLSHandshakeTimeout  time.Duration
	// MaxConnsPerIdentity caps one caller identity's connections on each
	// listener (default 64); at the cap one of that identity's connections
	// without a request in flight is closed first.
	MaxConnsPerIdentity int
	// ReadHeaderTimeout bounds reading a request's headers, default 3 s.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout bounds reading a request's body, from the end of its
	// headers to the end of the body, default 3 s: past it the connection
	// is closed without an answer and counted (ReasonBodyTimeout). The body
	// is read whole before the handler runs, so a connection still sending
	// one holds no request in flight and gives way to a newcomer at a cap.
	// SetReadBodyTimeout changes it while serving.
	ReadBodyTimeout time.Duration
	// ReadTimeout bounds reading a whole request, default 10 s; once the
	// headers are in, ReadBodyTimeout takes its place for the body of a
	// request that has one.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its response, default 30 s.
	WriteTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection's wait for its next
	// request, default 15 s.
	IdleTimeout time.Duration
	// RejectionLogInterval is the least time between two WARN lines of
	// one (listener, reason), default 10 s; each line says how many
	// rejections were not logged since the previous one.
	RejectionLogInterval time.Duration
	// MaxInFlightPerIdentity caps one caller identity's requests in
	// handlers at once, over every listener (default 64): all an identity
	// may have when it is the only one calling. SharedInFlight (default 8)
	// is what the identities share once more than one is calling: each is
	// guaranteed SharedInFlight divided by the number calling (at least
	// one), and a request beyond its identity's share starts only while
	// fewer than SharedInFlight are in handlers in all. A request that
	// cannot start waits, read no further than its first read (turn.go),
	// and the identities waiting are
	// seated round-robin, least recently served first (fair.go).
	// WaitTimeout bounds the wait (default 2 s): past it the request is
	// answered RegistrarBusy with retry_after 1 and counted
	// (Stats.WaitTimeouts). SetFairness changes the three while serving.
	MaxInFlightPerIdentity, SharedInFlight int
	WaitTimeout                            time.Duration
	// RefusalPace holds each answer the limiter decided (RegistrarBusy
	// from the admission throttle, a refusal past its bucket: the answers
	// a flood gets) for this long before it is written, keeping its seat,
	// while another identity is calling (refusal.go). A flood then takes
	// at most SharedInFlight seats for RefusalPace per answer, and the
	// cores its answers would have taken, from the identities it shares
	// the daemon with. Zero (the default here; the daemon's key is 25 ms)
	// answers at once; at most MaxRefusalPace. SetFairness changes it
	// while serving.
	RefusalPace time.Duration
	// Observer is told how long each seated request waited for its turn
	// (the registrar_request_wait_seconds histogram); nil tells nobody.
	Observer Observer
	// DisableFairDispatch serves every request at once, without a turn:
	// the peer the fairness benchmark compares the fair server with. The
	// daemon never sets it.
	DisableFairDispatch bool
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// check reports every option New refuses, all at once.
func (o Options) check() error {
	var errs []error
	if o.Verbs == nil {
		errs = append(errs, errors.New("wire: NewServer: nil Verbs"))
	}
	if o.Health == nil {
		errs = append(errs, errors.New("wire: NewServer: nil Health"))
	}
	for _, n := range []struct {
		name string
		n    int
	}{{"UnixMaxConns", o.UnixMaxConns}, {"TLSMaxConns", o.TLSMaxConns}, {"TLSHandshakeMaxConns", o.TLSHandshakeMaxConns}, {"MaxConnsPerIdentity", o.MaxConnsPerIdentity},
		{"MaxInFlightPerIdentity", o.MaxInFlightPerIdentity}, {"SharedInFlight", o.SharedInFlight}} {
		if n.n < 0 {
			errs = append(errs, fmt.Errorf("wire: NewServer: %s %d is negative", n.name, n.n))
		}
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"ReadHeaderTimeout", o.ReadHeaderTimeout}, {"ReadBodyTimeout", o.ReadBodyTimeout}, {"ReadTimeout", o.ReadTimeout}, {"WriteTimeout", o.WriteTimeout}, {"IdleTimeout", o.IdleTimeout},
		{"TLSHandshakeTimeout", o.TLSHandshakeTimeout}, {"RejectionLogInterval", o.RejectionLogInterval}, {"WaitTimeout", o.WaitTimeout}, {"RefusalPace", o.RefusalPace}} {
		if t.d < 0 {
			errs = append(errs, fmt.Errorf("wire: NewServer: %s %v is negative", t.name, t.d))
		}
	}
	if o.RefusalPace > MaxRefusalPace {
		errs = append(errs, fmt.Errorf("wire: NewServer: RefusalPace %v is above %v, the least retry_after", o.RefusalPace, MaxRefusalPace))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// withDefaults returns o with each zero limit or timeout (and a nil Logger)
// replaced by its default.
func (o Options) withDefaults() Options {
	o.UnixMaxConns = orDefault(o.UnixMaxConns, DefaultUnixMaxConns)
	o.TLSMaxConns = orDefault(o.TLSMaxConns, DefaultTLSMaxConns)
	o.TLSHandshakeMaxConns = orDefault(o.TLSHandshakeMaxConns, DefaultTLSHandshakeMaxConns)
	o.TLSHandshakeTimeout = orDefault(o.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	o.MaxConnsPerIdentity = orDefault(o.MaxConnsPerIdentity, DefaultMaxConnsPerIdentity)
	o.ReadHeaderTimeout = orDefault(o.ReadHeaderTimeout, wire.DefaultReadHeaderTimeout)
	o.ReadBodyTimeout = orDefault(o.ReadBodyTimeout, DefaultReadBodyTimeout)
	o.ReadTimeout = orDefault(o.ReadTimeout, wire.DefaultReadTimeout)
	o.WriteTimeout = orDefault(o.WriteTimeout, wire.DefaultWriteTimeout)
	o.IdleTimeout = orDefault(o.IdleTimeout, wire.DefaultIdleTimeout)
	o.RejectionLogInterval = orDefault(o.RejectionLogInterval, DefaultRejectionLogInterval)
	o.MaxInFlightPerIdentity = orDefault(o.MaxInFlightPerIdentity, DefaultMaxInFlightPerIdentity)
	o.SharedInFlight = orDefault(o.SharedInFlight, DefaultSharedInFlight)
	o.WaitTimeout = orDefault(o.WaitTimeout, DefaultWaitTimeout)
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.AdminAllowed == nil {
		o.AdminAllowed = DefaultAdminAllowed
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// budget returns the caps of a listener of kind (the defaults filled in).
func (o Options) budget(kind ListenerKind) budgetLimits {
	l := budgetLimits{maxConns: o.UnixMaxConns, perIdentity: o.MaxConnsPerIdentity, maxHS: o.TLSHandshakeMaxConns}
	if kind == ListenerTLS {
		l.maxConns = o.TLSMaxConns
	}
	return l
}
