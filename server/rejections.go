package server

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
)

// ListenerKind is the kind of a listener, the listener label of the wire
// metrics. A plain value, safe for concurrent use.
type ListenerKind uint8

const (
	// ListenerUnix is the unix socket (and any listener the server does
	// not know, whose connections carry no identity).
	ListenerUnix ListenerKind = iota
	// ListenerTLS is the TCP listener with mutual TLS from ListenTLS.
	ListenerTLS
	// NumListenerKinds is the number of listener kinds.
	NumListenerKinds
)

var listenerNames = [NumListenerKinds]string{ListenerUnix: "unix", ListenerTLS: "tls"}

// String returns the metric label: "unix" or "tls".
func (k ListenerKind) String() string {
	if k < NumListenerKinds {
		return listenerNames[k]
	}
	return "listener(" + strconv.Itoa(int(k)) + ")"
}

// Reason is why the wire turned a connection or a request away: the closed
// set of the reason label of registrar_wire_rejected_total. A plain value,
// safe for concurrent use.
type Reason uint8

const (
	// ReasonTLSHandshake: the TLS handshake failed (no client certificate,
	// one of another CA, expired, without the client-auth usage, a client
	// that does not speak TLS 1.3).
	ReasonTLSHandshake Reason = iota
	// ReasonHandshakeTimeout: the handshake did not finish within
	// TLSHandshakeTimeout.
	ReasonHandshakeTimeout
	// ReasonHandshakeCap: a connection still in its handshake was closed
	// because the pre-handshake budget was full and a newer one arrived.
	ReasonHandshakeCap
	// ReasonNoIdentity: a request on a connection without a caller
	// identity, answered RequestMalformed.
	ReasonNoIdentity
	// ReasonMalformed: any other request answered RequestMalformed.
	ReasonMalformed
	// ReasonConnCap: a newcomer refused because the listener was at its cap
	// with a request in flight on every connection.
	ReasonConnCap
	// ReasonIdentityConnCap: a newcomer refused because its identity was at
	// its per-identity cap with a request in flight on every one of its
	// connections.
	ReasonIdentityConnCap
	// ReasonIdleEvicted: a connection without a request in flight, and
	// with no part of one received (idle between requests, or not yet
	// sending), closed to admit a newcomer.
	ReasonIdleEvicted
	// ReasonHeaderTimeout: a connection closed because its request headers
	// did not arrive within the header-read timeout.
	ReasonHeaderTimeout
	// ReasonBodyTimeout: a connection closed because its request body did
	// not arrive whole within the body-read timeout of the end of its
	// headers.
	ReasonBodyTimeout
	// ReasonPartialEvicted: a connection part-way through sending its
	// request (its headers or its body), no request of it in flight, closed
	// to admit a newcomer.
	ReasonPartialEvicted
	// NumReasons is the number of reasons.
	NumReasons
)

var reasonNames = [NumReasons]string{
	ReasonTLSHandshake:     "tls_handshake",
	ReasonHandshakeTimeout: "handshake_timeout",
	ReasonHandshakeCap:     "handshake_cap",
	ReasonNoIdentity:       "no_identity",
	ReasonMalformed:        "malformed",
	ReasonConnCap:          "conn_cap",
	ReasonIdentityConnCap:  "identity_conn_cap",
	ReasonIdleEvicted:      "idle_evicted",
	ReasonHeaderTimeout:    "header_timeout",
	ReasonBodyTimeout:      "body_timeout",
	ReasonPartialEvicted:   "partial_evicted",
}

// String returns the metric label, e.g. "idle_evicted".
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Stats is a snapshot of the wire's connection accounting, summed over the
// listeners of each kind. Counters only grow. A plain value: safe for
// concurrent reads.
type Stats struct {
	// Connections is the established connections open now (admitted, the
	// TLS handshake done).
	Connections [NumListenerKinds]int64
	// Handshaking is the TLS connections still in their handshake.
	Handshaking [NumListenerKinds]int64
	// Rejected counts rejections by listener and reason since start.
	Rejected [NumListenerKinds][NumReasons]uint64
	// InFlight is the requests holding a seat of the fair gate now: in
	// their handler, their body being read or their answer flushed.
	InFlight [NumListenerKinds]int64
	// WaitTimeouts counts the requests that waited for their turn past
	// the wait timeout and were answered RegistrarBusy, since start.
	WaitTimeouts [NumListenerKinds]uint64
	// RefusalsPaced counts the limiter's refusals held for the refusal
	// pace before they were answered (Options.RefusalPace), since start.
	RefusalsPaced [NumListenerKinds]uint64
}

// wireStats is the Server's live accounting.
type wireStats struct {
	conns       [NumListenerKinds]atomic.Int64
	handshaking [NumListenerKinds]atomic.Int64
	rejected    [NumListenerKinds][NumReasons]atomic.Uint64
	// waitTimeouts: Stats.WaitTimeouts (turn.go).
	waitTimeouts [NumListenerKinds]atomic.Uint64
	// refusalsPaced: Stats.RefusalsPaced (refusal.go).
	refusalsPaced [NumListenerKinds]atomic.Uint64
}

// Stats returns the current connection accounting. Safe for concurrent
// use; it does not allocate.
func (s *Server) Stats() Stats {
	var st Stats
	for k := range NumListenerKinds {
		st.Connections[k] = s.stats.conns[k].Load()
		st.Handshaking[k] = s.stats.handshaking[k].Load()
		st.InFlight[k] = s.gate.seatedBy(k)
		st.WaitTimeouts[k] = s.stats.waitTimeouts[k].Load()
		st.RefusalsPaced[k] = s.stats.refusalsPaced[k].Load()
		for r := range NumReasons {
			st.Rejected[k][r] = s.stats.rejected[k][r].Load()
		}
	}
	return st
}

var _ budgetEvents = (*Server)(nil)

func (s *Server) countConns(kind ListenerKind, delta int64) { s.stats.conns[kind].Add(delta) }

func (s *Server) countHandshaking(kind ListenerKind, delta int64) {
	s.stats.handshaking[kind].Add(delta)
}

// reject counts a rejection and logs it at WARN, at most one line per
// (listener, reason) per RejectionLogInterval; the line carries how many
// rejections of that kind were not logged since the previous line.
func (s *Server) reject(kind ListenerKind, reason Reason, attrs ...slog.Attr) {
	if kind >= NumListenerKinds || reason >= NumReasons {
		return
	}
	s.stats.rejected[kind][reason].Add(1)
	suppressed, ok := s.rejectLog.Allow(rejectKeys[kind][reason])
	if !ok {
		return
	}
	all := make([]slog.Attr, 0, 3+len(attrs))
	all = append(all, slog.String("listener", kind.String()), slog.String("reason", reason.String()),
		slog.Uint64(logthrottle.SuppressedKey, suppressed))
	all = append(all, attrs...)
	s.logger.LogAttrs(context.Background(), slog.LevelWarn, "wire: rejected", all...)
}

// rejectKeys are the throttle's cause keys, one per (listener, reason):
// a fixed set, built once, so a rejection builds no key.
var rejectKeys = func() (k [NumListenerKinds][NumReasons]string) {
	for kind := range NumListenerKinds {
		for reason := range NumReasons {
			k[kind][reason] = kind.String() + "/" + reason.String()
		}
	}
	return k
}()
