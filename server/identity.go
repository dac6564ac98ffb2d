package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/internal/subid"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// subordinates holds the subordinate uid ranges of SetSubordinateUIDs.
type subordinates struct{ m atomic.Pointer[subid.Map] }

// SetSubordinateUIDs makes a unix caller whose uid lies in a range of m
// that range owner's identity, UnixIdentity(owner), from the next
// connection on: the processes of a user namespace an account made with
// newuidmap are that account, with its buckets, its policy and its
// registrations. The reported uid is kept as the connection's diagnostic:
// the debug line "unix peer identified as the owner of its subordinate
// uid range", and the requests' CallerSubuid for the audit records. A uid
// the administrative policy admits (Options.AdminAllowed) is never
// mapped, and no uid is mapped to one: a subordinate uid never becomes an
// operator, nor an operator an account. nil (the default) maps nothing. A
// connection keeps the identity it was accepted with. Safe for concurrent
// use.
func (s *Server) SetSubordinateUIDs(m *subid.Map) { s.subuids.m.Store(m) }

// identityKey is the context key of a connection's caller identity.
type identityKey struct{}

// connIdentity is a connection's identity, or why it has none.
type connIdentity struct {
	id      string
	problem string
	// peerUID is the uid the kernel reported, when subordinate says it is
	// not id's: a diagnostic, never a key.
	peerUID     uint32
	subordinate bool
	// caller is id prepared for the limiter (Server.prepare), when the
	// verbs offer RateLimits.
	caller limiter.Caller
}

// WithIdentity returns ctx carrying the caller identity the handler passes
// to the verbs, for a transport the server does not know (and for tests of
// Handler). The server's own connections set it from the peer credentials;
// a TLS request's certificate identity takes precedence over it.
func WithIdentity(ctx context.Context, identity string) context.Context {
	return context.WithValue(ctx, identityKey{}, connIdentity{id: identity})
}

// unixIdentityPrefix starts every UnixIdentity; a certificate identity
// starts with "registrar-client:" (certidentity.go), so the two never meet.
const unixIdentityPrefix = "unix-peer:uid="

// UnixIdentity is the identity of a unix-socket caller with user id uid.
func UnixIdentity(uid uint32) string {
	return unixIdentityPrefix + strconv.FormatUint(uint64(uid), 10)
}

// IsUnixIdentity reports whether identity is a unix-socket caller's (a
// UnixIdentity): the daemon's limiter keeps those in its local pool
// (limiter.Config.Local), apart from the certificate identities.
func IsUnixIdentity(identity string) bool { return strings.HasPrefix(identity, unixIdentityPrefix) }

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
	return s.unixIdentity(uid)
}

// unixIdentity is the identity of a unix caller with user id uid: its
// subordinate range's owner's (SetSubordinateUIDs), else its own.
func (s *Server) unixIdentity(uid uint32) connIdentity {
	admin := s.opts.AdminAllowed
	owner, ok := s.subuids.m.Load().Owner(uid)
	if !ok || admin(uid) || admin(owner) {
		return connIdentity{id: UnixIdentity(uid)}
	}
	ci := connIdentity{id: UnixIdentity(owner), peerUID: uid, subordinate: true}
	// Debug: a caller makes one per connection at will.
	s.logger.LogAttrs(context.Background(), slog.LevelDebug, "unix peer identified as the owner of its subordinate uid range",
		slog.String("identity", ci.id), slog.Uint64("peer_uid", uint64(uid)))
	return ci
}

// subordinateUID is the uid the kernel reported for the request's unix
// connection when it was identified as its range owner
// (SetSubordinateUIDs), else 0: the diagnostic the call's audit records
// carry.
func subordinateUID(r *http.Request) uint32 {
	if ci, ok := r.Context().Value(identityKey{}).(connIdentity); ok && r.TLS == nil && ci.subordinate {
		return ci.peerUID
	}
	return 0
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
