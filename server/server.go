package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// httpHeaderSlack is what net/http reads of a header block beyond
// http.Server.MaxHeaderBytes before it answers 431 (its initial read
// limit is MaxHeaderBytes + 4096). Measured: with MaxHeaderBytes at 16 KiB
// a 20,480-byte block was served and a 20,481-byte one refused.
const httpHeaderSlack = 4096

// Verbs is what the server drives: *registrar.Verbs. The error is nil,
// *registrar.RefusedError, *registrar.ThrottledError or
// *registrar.UnavailableError; anything else is answered 500.
type Verbs interface {
	Mint(ctx context.Context, req registrar.MintRequest) (registrar.MintResult, error)
	Deregister(ctx context.Context, req registrar.DeregisterRequest) (registrar.DeregisterResult, error)
}

var _ Verbs = (*registrar.Verbs)(nil)

// Server serves the protocol on any number of listeners. It is safe for
// concurrent use: Serve may run for several listeners at once, and
// Shutdown from any goroutine.
type Server struct {
	verbs Verbs
	// rateLimits is verbs' RateLimits, if it offers them.
	rateLimits RateLimits
	health     *health.Holder
	logger     *slog.Logger
	srv        *http.Server
	handler    http.Handler
	// inner is what the plumbing (budgets, in-flight count) serves: the
	// protocol's handler, or a benchmark's no-op peer.
	inner http.Handler
	opts  Options // with the defaults filled in
	// bodyTimeout is the body-read timeout in force, in nanoseconds
	// (Options.ReadBodyTimeout, then SetReadBodyTimeout).
	bodyTimeout atomic.Int64
	stats       wireStats
	// rejectLog rate-limits the WARN lines of rejections, per (listener,
	// reason); reject writes the lines itself, listener and reason first.
	rejectLog *logthrottle.Throttle
	// identifyOther identifies the connections of a listener that is
	// neither unix nor TLS (tests); nil leaves them without an identity.
	identifyOther func(net.Conn) connIdentity
	// subuids are the subordinate uid ranges unix callers are identified
	// through (identity.go).
	subuids subordinates
	// nextID draws the request id of an answer no verb produced: a
	// wire.RequestIDs' Next, or a fixed sequence (golden fixtures).
	nextID func() string
	// inflight counts handlers running on the server's own connections,
	// so Shutdown can wait for every verb call to finish.
	inflight sync.WaitGroup
	// enc encodes the answers, with the registrar_health member prepared
	// once per snapshot.
	enc wire.Encoder
	// setsMu guards sets, the budgets of the listeners Serve was given,
	// for Shutdown to drain.
	setsMu sync.Mutex
	sets   []*connSet
	// afterDrain, if set (tests), runs once the grace period's end has
	// closed the connections without a request in flight.
	afterDrain func()
	// gate seats the requests of the server's own connections (fair.go,
	// turn.go), unless fair is false (Options.DisableFairDispatch).
	gate     *fairGate
	fair     bool
	observer Observer
	// waitTimeout is the wait timeout in force, in nanoseconds
	// (Options.WaitTimeout, then SetFairness).
	waitTimeout atomic.Int64
	// refusalPace is the refusal pace in force, in nanoseconds
	// (Options.RefusalPace, then SetFairness).
	refusalPace atomic.Int64
}

// New returns a server; call Serve for each listener.
func New(o Options) (*Server, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	ids, err := wire.NewRequestIDs()
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	s := &Server{
		verbs:      o.Verbs,
		rateLimits: rateLimitsOf(o.Verbs),
		health:     o.Health,
		logger:     o.Logger,
		opts:       o,
		rejectLog:  logthrottle.New(o.Logger, o.RejectionLogInterval, nil),
		nextID:     ids.Next,
	}
	s.bodyTimeout.Store(int64(o.ReadBodyTimeout))
	s.waitTimeout.Store(int64(o.WaitTimeout))
	s.refusalPace.Store(int64(o.RefusalPace))
	s.gate = newFairGate(fairLimits{perIdentity: o.MaxInFlightPerIdentity, shared: o.SharedInFlight}, nil)
	s.fair = !o.DisableFairDispatch
	s.observer = o.Observer
	s.handler = http.HandlerFunc(s.serveHTTP)
	s.inner = s.handler
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tc, tracked := r.Context().Value(connKey{}).(*trackedConn)
			late := false
			if tracked {
				defer tc.release()
				if s.fair {
					var abandoned bool
					late, abandoned = s.awaitTurn(tc)
					if abandoned {
						panic(http.ErrAbortHandler)
					}
					if !late {
						// Deferred: the seat is given back after the answer
						// is flushed, or as the request is abandoned.
						defer s.leaveTurn(tc)
					}
				}
				if !s.receive(tc, r) {
					// Evicted before its request was whole, or its body
					// late: the request must not run, and the connection
					// is closed without an answer. A request that waited
					// past its turn's deadline too: it is answered only
					// once it is whole, as every request is.
					panic(http.ErrAbortHandler)
				}
			}
			s.inflight.Add(1)
			defer s.inflight.Done()
			if late {
				s.busyLate(w, r, tc)
			} else {
				s.inner.ServeHTTP(w, r)
			}
			if tracked {
				tc.set.answered(tc)
				// The answer is on the wire once flushed: from then on the
				// connection holds no request in flight and may give way
				// to a newcomer, even before net/http reports it idle.
				flush(w)
				tc.set.done(tc)
			}
		}),
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		// net/http lets a header block run 4096 bytes past MaxHeaderBytes
		// (its bufio slack): this makes the enforced bound the documented
		// one, the request line and the blank line included.
		MaxHeaderBytes: wire.MaxHeaderBytes - httpHeaderSlack,
		ConnContext:    s.connContext,
		ConnState:      s.connState,
		// HTTP/1.1 only: a non-nil empty map turns HTTP/2 off.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		// What net/http reports about a connection (the TLS handshakes are
		// the server's own and counted): a caller can provoke it at will,
		// so it is a debug log, never louder.
		ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Serve accepts connections on l until Shutdown, then returns
// http.ErrServerClosed. Each listener has its own connection budget (see
// Options). A unix listener's callers are identified by their peer
// credentials; a TLS listener from ListenTLS has its handshakes run by the
// server, under their own budget and timeout, and its callers identified
// by their verified client certificate; connections of any other listener
// carry no identity and never reach the verbs.
func (s *Server) Serve(l net.Listener) error {
	if l == nil {
		return errors.New("wire: Serve: nil listener")
	}
	kind, raw, tlsConfig := ListenerUnix, l, (*tls.Config)(nil)
	if tl, ok := l.(*tlsListener); ok {
		kind, raw, tlsConfig = ListenerTLS, tl.Listener, tl.config
	}
	f := &frontListener{
		raw:              raw,
		set:              newConnSet(s, kind, s.opts.budget(kind), tlsConfig),
		identify:         s.identify,
		prepare:          s.prepare,
		turns:            s.turnsIfFair(),
		handshakeTimeout: s.opts.TLSHandshakeTimeout,
		ready:            make(chan net.Conn),
		done:             make(chan struct{}),
		err:              make(chan error, 1),
	}
	s.setsMu.Lock()
	s.sets = append(s.sets, f.set)
	s.setsMu.Unlock()
	f.wg.Add(1)
	go f.acceptLoop()
	err := s.srv.Serve(f)
	_ = f.Close()
	f.wg.Wait()
	return err
}

// Shutdown stops accepting on every listener, closes idle connections and
// waits for in-flight requests to finish and be answered. If ctx ends
// first, it closes every connection without a request in flight (idle, or
// still sending its request: the verbs saw nothing of it) and goes on
// waiting for the handlers running: each one's answer is written before its
// connection closes, within evictedFlushGrace of the handler's return for a
// caller that does not read. Then it returns ctx's error. A verb call is
// never abandoned half-way, nor its answer: the call wrote its audit
// records, and a caller left without the answer would send the call again
// (wire.Client does, once), a second invocation on record for one call.
// When Shutdown returns no verb is running and no limited event can arrive
// (the daemon flushes its coalescing windows and closes the store only
// then).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"shutdown: grace period over: closing the connections without a request in flight; those with one are answered first", slog.Any("error", err))
		s.setsMu.Lock()
		sets := slices.Clone(s.sets)
		s.setsMu.Unlock()
		for _, cs := range sets {
			cs.drain()
		}
		if s.afterDrain != nil {
			s.afterDrain()
		}
		s.inflight.Wait()
		// Every handler has returned and flushed its answer (or met its
		// flush deadline); net/http closes those connections now. Anything
		// still open after two flush graces is closed.
		fctx, cancel := context.WithTimeout(context.Background(), 2*evictedFlushGrace)
		if s.srv.Shutdown(fctx) != nil {
			_ = s.srv.Close()
		}
		cancel()
	}
	s.inflight.Wait()
	return err
}

// turnsIfFair is s, which takes its connections' turns, or nil without
// fair dispatch.
func (s *Server) turnsIfFair() *Server {
	if s.fair {
		return s
	}
	return nil
}

// Handler returns the protocol's handler, for tests and embedding. A
// request reaches the verbs only if its identity is known: from a TLS
// connection's verified certificate, from the unix peer credentials the
// server's own connections carry, or from WithIdentity on the request's
// context.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) connState(c net.Conn, st http.ConnState) {
	tc := trackedOf(c)
	if tc == nil {
		return
	}
	switch st {
	case http.StateIdle:
		tc.set.idle(tc)
	case http.StateClosed, http.StateHijacked:
		tc.set.closed(tc)
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	method, serve := route(r.URL.Path)
	switch {
	case serve == nil:
		s.malformed(w, r, http.StatusBadRequest, "unknown path: the endpoints are POST "+wire.PathMint+", POST "+wire.PathDeregister+" and GET "+wire.PathHealth)
	case r.Method != method:
		s.methodNotAllowed(w, r, method)
	default:
		serve(s, w, r)
	}
}

// route returns path's one method and its handler, or a nil handler for a
// path the server does not serve. The handlers are method expressions, so
// routing a request allocates nothing.
func route(path string) (method string, serve func(*Server, http.ResponseWriter, *http.Request)) {
	switch path {
	case wire.PathMint:
		return http.MethodPost, (*Server).mint
	case wire.PathDeregister:
		return http.MethodPost, (*Server).deregister
	case wire.PathHealth:
		return http.MethodGet, (*Server).healthAnswer
	case wire.PathBackup:
		return http.MethodGet, (*Server).backup
	case wire.PathReload:
		return http.MethodPost, (*Server).reload
	case wire.PathLimits:
		return http.MethodGet, (*Server).limits
	case wire.PathLimitsReset:
		return http.MethodPost, (*Server).limitsReset
	}
	return "", nil
}

// healthAnswer answers GET /v1/health: the registrar_health snapshot alone.
func (s *Server) healthAnswer(w http.ResponseWriter, _ *http.Request) {
	s.write(w, http.StatusOK, &wire.HealthResponse{ProtocolVersion: wire.ProtocolVersion, RegistrarHealth: s.healthJSON()}, 0)
}

// methodNotAllowed answers RequestMalformed with its one status, 400 (the
// status is a property of the identifier), and says in Allow which method
// the path takes.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	s.malformed(w, r, http.StatusBadRequest, "method not allowed: "+r.URL.Path+" accepts "+allow+" only")
}

// flush writes the buffered answer to the connection. net/http's
// response is an http.Flusher; a wrapping writer (a test's, a middleware's)
// is reached through http.ResponseController, which unwraps it.
func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
		return
	}
	_ = http.NewResponseController(w).Flush()
}
