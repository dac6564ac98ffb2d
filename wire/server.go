package wire

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/registrar"
	"go.opentelemetry.io/otel/propagation"
)

// The endpoints.
const (
	PathMint       = "/v1/mint"
	PathDeregister = "/v1/deregister"
	PathHealth     = "/v1/health"
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
	DefaultReadHeaderTimeout   = 3 * time.Second
	DefaultReadTimeout         = 10 * time.Second
	DefaultWriteTimeout        = 30 * time.Second
	DefaultIdleTimeout         = 15 * time.Second
	// DefaultRejectionLogInterval is the least time between two WARN lines
	// of one (listener, reason).
	DefaultRejectionLogInterval = 10 * time.Second
)

// MaxHeaderBytes bounds a request's header block (16 KiB).
const MaxHeaderBytes = 16 << 10

// Verbs is what the server drives: *registrar.Verbs. The error is nil,
// *registrar.RefusedError, *registrar.ThrottledError or
// *registrar.UnavailableError; anything else is answered 500.
type Verbs interface {
	Mint(ctx context.Context, req registrar.MintRequest) (registrar.MintResult, error)
	Deregister(ctx context.Context, req registrar.DeregisterRequest) (registrar.DeregisterResult, error)
}

var _ Verbs = (*registrar.Verbs)(nil)

// Options configure a Server. Verbs and Health are required; a zero limit
// or timeout means its default.
type Options struct {
	Verbs Verbs
	// Health is the shared registrar_health snapshot, served on every
	// response as it is (never computed per request).
	Health *health.Holder
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// UnixMaxConns caps the connections of each unix listener (default
	// 128); TLSMaxConns those of each TLS listener once their handshake is
	// done (default 128). At the cap the oldest connection without a
	// request in flight is closed to admit a newcomer; the newcomer is
	// refused (closed) only when every connection has a request in flight.
	UnixMaxConns, TLSMaxConns int
	// TLSHandshakeMaxConns caps the connections of each TLS listener still
	// in their handshake (default 32), apart from TLSMaxConns: at the cap
	// the oldest is closed. TLSHandshakeTimeout bounds a handshake
	// (default 3 s).
	TLSHandshakeMaxConns int
	TLSHandshakeTimeout  time.Duration
	// MaxConnsPerIdentity caps one caller identity's connections on each
	// listener (default 64); at the cap that identity's oldest idle
	// connection is closed first.
	MaxConnsPerIdentity int
	// ReadHeaderTimeout bounds reading a request's headers, default 3 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, default 10 s.
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
}

// Server serves the protocol on any number of listeners. It is safe for
// concurrent use: Serve may run for several listeners at once, and
// Shutdown from any goroutine.
type Server struct {
	verbs   Verbs
	health  *health.Holder
	logger  *slog.Logger
	srv     *http.Server
	handler http.Handler
	// inner is what the plumbing (budgets, in-flight count) serves: the
	// protocol's handler, or a benchmark's no-op peer.
	inner http.Handler
	opts  Options // with the defaults filled in
	stats wireStats
	// rejectLog rate-limits the WARN lines of rejections.
	rejectLog rejectLog
	// identifyOther identifies the connections of a listener that is
	// neither unix nor TLS (tests); nil leaves them without an identity.
	identifyOther func(net.Conn) connIdentity
	ids           *wireIDs
	// inflight counts handlers running on the server's own connections,
	// so Shutdown can wait for every verb call to finish.
	inflight sync.WaitGroup
	// hcache is the registrar_health member prepared for the current
	// snapshot (see preparedHealth).
	hcache atomic.Pointer[healthCache]
}

// NewServer returns a server; call Serve for each listener.
func NewServer(o Options) (*Server, error) {
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
	}{{"UnixMaxConns", o.UnixMaxConns}, {"TLSMaxConns", o.TLSMaxConns}, {"TLSHandshakeMaxConns", o.TLSHandshakeMaxConns}, {"MaxConnsPerIdentity", o.MaxConnsPerIdentity}} {
		if n.n < 0 {
			errs = append(errs, fmt.Errorf("wire: NewServer: %s %d is negative", n.name, n.n))
		}
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"ReadHeaderTimeout", o.ReadHeaderTimeout}, {"ReadTimeout", o.ReadTimeout}, {"WriteTimeout", o.WriteTimeout}, {"IdleTimeout", o.IdleTimeout},
		{"TLSHandshakeTimeout", o.TLSHandshakeTimeout}, {"RejectionLogInterval", o.RejectionLogInterval}} {
		if t.d < 0 {
			errs = append(errs, fmt.Errorf("wire: NewServer: %s %v is negative", t.name, t.d))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	ids, err := newWireIDs()
	if err != nil {
		return nil, err
	}
	o.UnixMaxConns = orDefault(o.UnixMaxConns, DefaultUnixMaxConns)
	o.TLSMaxConns = orDefault(o.TLSMaxConns, DefaultTLSMaxConns)
	o.TLSHandshakeMaxConns = orDefault(o.TLSHandshakeMaxConns, DefaultTLSHandshakeMaxConns)
	o.TLSHandshakeTimeout = orDefault(o.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	o.MaxConnsPerIdentity = orDefault(o.MaxConnsPerIdentity, DefaultMaxConnsPerIdentity)
	o.ReadHeaderTimeout = orDefault(o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	o.ReadTimeout = orDefault(o.ReadTimeout, DefaultReadTimeout)
	o.WriteTimeout = orDefault(o.WriteTimeout, DefaultWriteTimeout)
	o.IdleTimeout = orDefault(o.IdleTimeout, DefaultIdleTimeout)
	o.RejectionLogInterval = orDefault(o.RejectionLogInterval, DefaultRejectionLogInterval)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		verbs:     o.Verbs,
		health:    o.Health,
		logger:    o.Logger,
		opts:      o,
		rejectLog: rejectLog{interval: o.RejectionLogInterval},
		ids:       ids,
	}
	s.handler = http.HandlerFunc(s.serveHTTP)
	s.inner = s.handler
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tc, tracked := r.Context().Value(connKey{}).(*trackedConn)
			if tracked && !tc.set.begin(tc) {
				// Evicted between its headers and its handler: the
				// connection is closed, the request must not run.
				panic(http.ErrAbortHandler)
			}
			s.inflight.Add(1)
			defer s.inflight.Done()
			s.inner.ServeHTTP(w, r)
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
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext:       s.connContext,
		ConnState:         s.connState,
		// HTTP/1.1 only: a non-nil empty map turns HTTP/2 off.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		// What net/http reports about a connection (the TLS handshakes are
		// the server's own and counted): a caller can provoke it at will,
		// so it is a debug log, never louder.
		ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
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
		raw:   raw,
		set:   newConnSet(s, kind, tlsConfig),
		ready: make(chan net.Conn),
		done:  make(chan struct{}),
		err:   make(chan error, 1),
	}
	f.wg.Add(1)
	go f.acceptLoop()
	err := s.srv.Serve(f)
	_ = f.Close()
	f.wg.Wait()
	return err
}

// Shutdown stops accepting on every listener, closes idle connections and
// waits for in-flight requests to finish. If ctx ends first, it closes
// every remaining connection and still waits for the handlers running on
// them to return, then returns ctx's error: a verb call is never abandoned
// half-way, and when Shutdown returns no verb is running and no limited
// event can arrive (the daemon flushes its coalescing windows and closes
// the store only then).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"shutdown: closing connections still busy after the grace period, waiting for their verb calls", slog.Any("error", err))
		_ = s.srv.Close()
	}
	s.inflight.Wait()
	return err
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

// identityKey is the context key of a connection's caller identity.
type identityKey struct{}

// connIdentity is a connection's identity, or why it has none.
type connIdentity struct {
	id      string
	problem string
}

// WithIdentity returns ctx carrying the caller identity the handler passes
// to the verbs, for a transport the server does not know (and for tests of
// Handler). The server's own connections set it from the peer credentials;
// a TLS request's certificate identity takes precedence over it.
func WithIdentity(ctx context.Context, identity string) context.Context {
	return context.WithValue(ctx, identityKey{}, connIdentity{id: identity})
}

// UnixIdentity is the identity of a unix-socket caller with user id uid.
func UnixIdentity(uid uint32) string { return "unix-peer:uid=" + strconv.FormatUint(uint64(uid), 10) }

// identify derives a unix connection's identity from SO_PEERCRED, read
// once per connection. Only the uid is used: a pid (or anything else per
// connection) would let a caller reset its bucket by reconnecting.
func (s *Server) identify(c net.Conn) connIdentity {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		if s.identifyOther != nil {
			return s.identifyOther(c)
		}
		return connIdentity{problem: "the connection has no caller identity (neither a unix socket nor mutual TLS)"}
	}
	uid, err := peerUID(uc)
	if err != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelWarn, "unix peer credentials unavailable", slog.Any("error", err))
		return connIdentity{problem: "the peer credentials of the connection could not be read"}
	}
	return connIdentity{id: UnixIdentity(uid)}
}

// connContext runs in the HTTP server's accept loop: it carries the
// connection's budget entry and identity into every request's context.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	tc := trackedOf(c)
	if tc == nil {
		return ctx
	}
	ctx = context.WithValue(ctx, connKey{}, tc)
	return context.WithValue(ctx, identityKey{}, tc.ident)
}

// listenerOf is the kind of listener a request came in on.
func listenerOf(r *http.Request) ListenerKind {
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		return tc.set.kind
	}
	if r.TLS != nil {
		return ListenerTLS
	}
	return ListenerUnix
}

// identity returns the request's caller identity, or the problem that left
// it unknown.
func identity(r *http.Request) (id, problem string) {
	if r.TLS != nil {
		// A TLS connection this server accepted had its identity derived
		// once, after its handshake, from the same verified state r.TLS
		// holds: a flood over one connection does not derive it again on
		// every request. The certificate takes precedence over any
		// identity a context carries (WithIdentity).
		if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok && tc.set.kind == ListenerTLS {
			return tc.ident.id, tc.ident.problem
		}
		return tlsIdentity(r.TLS)
	}
	ci, ok := r.Context().Value(identityKey{}).(connIdentity)
	switch {
	case !ok:
		return "", "the identity of the connection could not be determined"
	case ci.problem != "":
		return "", ci.problem
	case ci.id == "":
		return "", "the identity of the connection is empty"
	}
	return ci.id, ""
}

// tlsIdentity is registrar-client:<first URI SAN, else first DNS SAN> of
// the verified client certificate.
func tlsIdentity(cs *tls.ConnectionState) (id, problem string) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", "the client certificate was not verified"
	}
	leaf := cs.VerifiedChains[0][0]
	if leaf == nil {
		return "", "the client certificate was not verified"
	}
	var san string
	switch {
	case len(leaf.URIs) > 0 && leaf.URIs[0] != nil && leaf.URIs[0].String() != "":
		san = leaf.URIs[0].String()
	case len(leaf.DNSNames) > 0 && leaf.DNSNames[0] != "":
		san = leaf.DNSNames[0]
	default:
		return "", "the client certificate has no URI or DNS subject alternative name to identify the caller"
	}
	id = "registrar-client:" + san
	if problem := checkIdentity(id); problem != "" {
		return "", problem
	}
	return id, ""
}

// wireIDs issues the request ids of answers no verb produced (malformed
// requests, internal errors): "wire." + base64url of 9 random bytes drawn
// once per server + "." + a sequence number. The "wire." prefix keeps
// them apart from the verbs' ids, which name audit records; these never
// do.
type wireIDs struct {
	prefix string
	seq    atomic.Uint64
	// fixed replaces the generator in tests (golden fixtures).
	fixed func() string
}

func newWireIDs() (*wireIDs, error) {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("wire: request id prefix: %w", err)
	}
	return &wireIDs{prefix: "wire." + base64.RawURLEncoding.EncodeToString(b[:]) + "."}, nil
}

func (w *wireIDs) next() string {
	if w.fixed != nil {
		return w.fixed()
	}
	return w.prefix + strconv.FormatUint(w.seq.Add(1), 10)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case PathMint:
		if r.Method != http.MethodPost {
			s.methodNotAllowed(w, r, http.MethodPost)
			return
		}
		s.mint(w, r)
	case PathDeregister:
		if r.Method != http.MethodPost {
			s.methodNotAllowed(w, r, http.MethodPost)
			return
		}
		s.deregister(w, r)
	case PathHealth:
		if r.Method != http.MethodGet {
			s.methodNotAllowed(w, r, http.MethodGet)
			return
		}
		s.write(w, http.StatusOK, &HealthResponse{ProtocolVersion: ProtocolVersion, RegistrarHealth: s.healthJSON()}, 0)
	default:
		s.malformed(w, r, http.StatusBadRequest, "unknown path: the endpoints are POST "+PathMint+", POST "+PathDeregister+" and GET "+PathHealth)
	}
}

// methodNotAllowed answers RequestMalformed with its one status, 400 (the
// status is a property of the identifier), and says in Allow which method
// the path takes.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	s.malformed(w, r, http.StatusBadRequest, "method not allowed: "+r.URL.Path+" accepts "+allow+" only")
}

// readRequest does everything before a verb runs: identity, content type,
// body. ok false means a RequestMalformed answer was written.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) (id string, ok bool) {
	id, problem := identity(r)
	if problem != "" {
		s.malformedAs(w, r, ReasonNoIdentity, http.StatusBadRequest, problem)
		return "", false
	}
	if problem := checkContentType(r.Header.Get("Content-Type")); problem != "" {
		s.malformed(w, r, http.StatusBadRequest, problem)
		return "", false
	}
	if r.ContentLength > MaxBodyBytes {
		s.malformed(w, r, http.StatusBadRequest, fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes))
		return "", false
	}
	if r.ContentLength >= 0 {
		// The length is declared and within the bound: net/http's body
		// reader stops there, so no MaxBytesReader (an allocation) is needed.
		if err := readDeclared(buf, r.Body, int(r.ContentLength)); err != nil {
			s.malformed(w, r, http.StatusBadRequest, "request body could not be read")
			return "", false
		}
		// Once net/http's body reader has seen its end, closing it tells
		// the server there is nothing left to discard after the handler
		// (otherwise it copies the rest away through a fresh LimitReader,
		// an allocation per request). Only then: closing a body with
		// unread bytes would cost the connection its keep-alive.
		if n, err := r.Body.Read(nil); n == 0 && err == io.EOF {
			_ = r.Body.Close()
		}
		return id, true
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.malformed(w, r, http.StatusBadRequest, fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes))
		} else {
			s.malformed(w, r, http.StatusBadRequest, "request body could not be read")
		}
		return "", false
	}
	return id, true
}

// readDeclared reads a body of declared length n (≤ MaxBodyBytes) into buf.
func readDeclared(buf *bytes.Buffer, body io.Reader, n int) error {
	buf.Grow(n)
	b := buf.AvailableBuffer()[:n]
	if _, err := io.ReadFull(body, b); err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// checkContentType accepts application/json, with or without parameters;
// a charset, if given, must be utf-8.
func checkContentType(ct string) (problem string) {
	switch ct {
	case "application/json", "application/json; charset=utf-8":
		return "" // what every client sends, without parsing
	}
	if ct == "" {
		return "Content-Type: required, want application/json"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return "Content-Type: want application/json"
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "Content-Type: the charset must be utf-8"
	}
	return ""
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuf() *bytes.Buffer { return bufPool.Get().(*bytes.Buffer) }

func putBuf(b *bytes.Buffer) {
	if b.Cap() > 2*MaxBodyBytes {
		return // never keep an outsized buffer
	}
	b.Reset()
	bufPool.Put(b)
}

// verbContext is the request's context with the caller's W3C trace
// context extracted, so the verbs' server span is the caller's child.
func verbContext(r *http.Request) context.Context {
	// Most callers (every anonymous flood) send no traceparent: then there
	// is nothing to extract, and looking the lower-case name up through
	// the carrier would canonicalise it into a fresh string on every call.
	// net/http stores the request's header names canonicalised, so the
	// map lookup is exact.
	if _, ok := r.Header["Traceparent"]; !ok {
		return r.Context()
	}
	return propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
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

func (s *Server) mint(w http.ResponseWriter, r *http.Request) {
	buf := getBuf()
	defer putBuf(buf)
	caller, ok := s.readRequest(w, r, buf)
	if !ok {
		return
	}
	req, err := DecodeMint(buf.Bytes())
	if err != nil {
		s.malformedErr(w, r, err)
		return
	}
	res, err := s.verbs.Mint(verbContext(r), registrar.MintRequest{
		CallerIdentity: caller,
		ServiceName:    req.ServiceName,
		Host:           req.Host,
		Instance:       req.Instance,
		Component:      req.Component,
		Spec:           registrar.Spec(req.Spec),
		WrapTTLSeconds: req.WrapTTL,
		IdempotencyKey: req.IdempotencyKey,
	})
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	var outcome string
	switch res.Outcome {
	case registrar.FirstMint:
		outcome = "first_mint"
	case registrar.IdempotentRemint:
		outcome = "idempotent_remint"
	default:
		s.internal(w, r, res.RequestID, internalf("mint outcome %d has no spelling", uint8(res.Outcome)))
		return
	}
	s.write(w, http.StatusOK, &MintResponse{
		ProtocolVersion: ProtocolVersion,
		RequestID:       res.RequestID,
		RegistrationID:  res.RegistrationID,
		Outcome:         outcome,
		Material: Material{
			RoleID:          res.Material.RoleID,
			WrappedSecretID: res.Material.WrappedSecretID,
			ExpiresAt:       res.Material.ExpiresAt.UTC().Format(TimeLayout),
		},
		RegistrarHealth: s.healthJSON(),
	}, 0)
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request) {
	buf := getBuf()
	defer putBuf(buf)
	caller, ok := s.readRequest(w, r, buf)
	if !ok {
		return
	}
	req, err := DecodeDeregister(buf.Bytes())
	if err != nil {
		s.malformedErr(w, r, err)
		return
	}
	res, err := s.verbs.Deregister(verbContext(r), registrar.DeregisterRequest{
		CallerIdentity: caller,
		ServiceName:    req.ServiceName,
		Host:           req.Host,
		Instance:       req.Instance,
		Component:      req.Component,
		IdempotencyKey: req.IdempotencyKey,
	})
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	var outcome string
	switch res.Outcome {
	case registrar.Removed:
		outcome = "removed"
	case registrar.AlreadyAbsent:
		outcome = "already_absent"
	default:
		s.internal(w, r, res.RequestID, internalf("deregister outcome %d has no spelling", uint8(res.Outcome)))
		return
	}
	s.write(w, http.StatusOK, &DeregisterResponse{
		ProtocolVersion: ProtocolVersion,
		RequestID:       res.RequestID,
		RegistrationID:  res.RegistrationID,
		Outcome:         outcome,
		RegistrarHealth: s.healthJSON(),
	}, 0)
}

// refuse answers a verb error.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	status, body, retryAfter, ierr := refusalFor(err)
	if ierr != nil {
		s.internal(w, r, registrar.RequestIDOf(err), fmt.Errorf("%w (verb error: %v)", ierr, err))
		return
	}
	body.RegistrarHealth = s.healthJSON()
	s.write(w, status, &body, retryAfter)
}

// internal answers what the wire cannot map: 500, RegistrarUnavailable
// without a reason. Unreachable while the mapping tests pass.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, requestID string, err error) {
	if requestID == "" {
		requestID = s.ids.next()
	}
	s.logger.LogAttrs(r.Context(), slog.LevelError, "internal error: verb answer has no wire mapping",
		slog.String("request_id", requestID), slog.String("path", r.URL.Path), slog.Any("error", err))
	s.write(w, http.StatusInternalServerError, &RefusalResponse{
		ProtocolVersion: ProtocolVersion,
		RequestID:       requestID,
		Class:           Permanent,
		Error:           ErrorBody{ID: RegistrarUnavailable},
		RegistrarHealth: s.healthJSON(),
	}, 0)
}

func (s *Server) malformedErr(w http.ResponseWriter, r *http.Request, err error) {
	var me *MalformedError
	if errors.As(err, &me) {
		s.malformed(w, r, http.StatusBadRequest, me.Detail)
		return
	}
	s.malformed(w, r, http.StatusBadRequest, "request rejected by the codec")
}

// malformed answers RequestMalformed. It runs before any verb: nothing is
// charged or recorded. The log is debug-level: a caller controls how many
// of these it provokes.
func (s *Server) malformed(w http.ResponseWriter, r *http.Request, status int, detail string) {
	s.malformedAs(w, r, ReasonMalformed, status, detail)
}

// malformedAs answers RequestMalformed and counts the rejection under
// reason (malformed, or no_identity).
func (s *Server) malformedAs(w http.ResponseWriter, r *http.Request, reason Reason, status int, detail string) {
	id := s.ids.next()
	detail = boundDetail(detail)
	attrs := []slog.Attr{slog.String("path", boundDetail(r.URL.Path)), slog.String("detail", detail)}
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		attrs = append(attrs, tc.attrs()...)
	}
	s.reject(listenerOf(r), reason, attrs...)
	s.logger.LogAttrs(r.Context(), slog.LevelDebug, "request malformed",
		slog.String("request_id", id), slog.String("path", boundDetail(r.URL.Path)), slog.String("detail", detail))
	s.write(w, status, &RefusalResponse{
		ProtocolVersion: ProtocolVersion,
		RequestID:       id,
		Class:           Permanent,
		Error:           ErrorBody{ID: RequestMalformed, Detail: detail},
		RegistrarHealth: s.healthJSON(),
	}, 0)
}

// emptyHealth is served if the holder has no snapshot (it always has one:
// health.NewHolder refreshes once).
var emptyHealth = json.RawMessage(`{}`)

func (s *Server) healthJSON() json.RawMessage {
	if snap := s.health.Current(); snap != nil && len(snap.JSON) > 0 {
		return snap.JSON
	}
	return emptyHealth
}

var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

// write encodes v and answers with it. retryAfter > 0 sets Retry-After.
func (s *Server) write(w http.ResponseWriter, status int, v any, retryAfter uint64) {
	bp := respBufPool.Get().(*[]byte)
	defer respBufPool.Put(bp)
	b, err := s.appendResponse((*bp)[:0], v)
	if err != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelError, "encoding a response failed", slog.Any("error", err))
		status = http.StatusInternalServerError
		b = append(b[:0], `{"protocol_version":1,"request_id":"`+s.ids.next()+`","class":"permanent","error":{"id":"RegistrarUnavailable"},"registrar_health":{}}`...)
		retryAfter = 0
	}
	b = append(b, '\n')
	*bp = b
	h := w.Header()
	h["Content-Type"] = headerJSON
	// Material is a secret: no cache may keep any answer.
	h["Cache-Control"] = headerNoStore
	h["Content-Length"] = contentLengths.get(uint64(len(b)))
	if retryAfter > 0 {
		h["Retry-After"] = retryAfters.get(retryAfter)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b) // a caller that hung up cannot be answered
	clear(b)          // a mint's answer holds a secret: keep no copy in the pool
	if cap(b) > 2*MaxBodyBytes {
		*bp = nil // never keep an outsized buffer
	}
}
