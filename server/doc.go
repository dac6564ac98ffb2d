// Package server serves the registrar's protocol (package wire) over a
// unix socket and, optionally, TCP with mutual TLS: the listeners, each
// listener's connection budget, the accept loop and TLS handshakes, the
// caller's identity from the connection, the handlers that decode a
// request, call the verbs and answer, and the administrative endpoints.
//
// # Transport and identity
//
// ListenUnix makes the socket's directory 0700 and the socket 0600, and
// replaces a stale socket but never a live one. A unix caller is
// identified as unix-peer:uid=<uid> from SO_PEERCRED, read once per
// connection; never the pid, so reconnecting cannot reset a caller's
// bucket. A uid inside a subordinate range (SetSubordinateUIDs) is
// identified as the range's owner instead, so one account's user
// namespace is one caller. ListenTLS requires TLS 1.3 and a client certificate verified
// against the client CA; the caller is typed by the SAN it came from and
// canonical: registrar-client:uri:<first URI SAN> (scheme and host
// required, lower-cased; no query, fragment, port or user information),
// else registrar-client:dns:<first DNS SAN, lower-cased> (certidentity.go).
// A certificate with neither, or whose first SAN is not acceptable
// (control characters included), is answered RequestMalformed and counted
// as no_identity with the reason. A connection whose identity cannot be determined never
// reaches the verbs. GET /v1/health reaches no verb and needs no identity
// (the socket's permissions and the TLS handshake still apply).
//
// Incoming W3C traceparent/tracestate headers are extracted into the
// verbs' context, so the verbs' server span is the caller's child; the
// Client injects them from its call's context.
//
// # Limits
//
// Request bodies at most wire.MaxBodyBytes (64 KiB), headers at most
// wire.MaxHeaderBytes, every stored string member at most its wire.FieldBounds
// maximum; read-header, read-body, read, write and idle timeouts (defaults
// 3 s, 3 s, 10 s, 30 s, 15 s). A request's body is read whole before its
// handler runs, within the read-body timeout of the end of its headers,
// or the connection is closed without an answer (ReasonBodyTimeout). A
// malformed request is rejected before any verb: it is never charged to
// the limiter and never recorded, but it is counted (Stats,
// ReasonMalformed).
//
// Each listener has its own connection budget (Options): a cap on its
// connections, a cap per caller identity, and on a TLS listener a smaller
// budget and a timeout for connections still in their handshake. A request
// is in flight from the end of its body to the end of its answer. At a cap
// a connection without a request in flight (idle, or still sending its
// request's headers or body) is closed to admit the newcomer: at the
// listener's cap one of the identity that holds the most connections. The
// newcomer is refused only when every slot has a request in
// flight. One evicted while still flushing its answer gets at most a
// second to finish, and at most 8 per listener are finishing at once, so
// a listener's descriptors stay within its cap plus 8. Every rejection is counted by listener and Reason and logged at
// WARN, at most one line per (listener, reason) per RejectionLogInterval.
// Answers net/http gives before the handler runs (a request line or header
// it cannot parse, headers over the bound) are plain HTTP errors without a
// protocol body; a stalled connection is closed without an answer.
//
// # Fair dispatch
//
// Every request on the server's own connections takes a seat of a gate
// shared by all listeners as its first bytes arrive, before it is parsed,
// and gives it back once its answer is flushed (fair.go, turn.go).
// An identity calling alone may hold MaxInFlightPerIdentity seats; once
// two or more identities call, they share SharedInFlight, each guaranteed
// its share (at least one), and the identities waiting for more are
// seated round-robin, least recently served first. A waiting request is
// read no further than that first read; past WaitTimeout it is answered
// RegistrarBusy (retry_after 1) and counted (Stats.WaitTimeouts). The
// Observer is told each seated request's wait, so the wait histogram
// counts the requests served. SetFairness changes the three while serving.
//
// Server is safe for concurrent use.
package server
