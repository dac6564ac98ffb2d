// Package wire is the registrar's protocol: HTTP/1.1 with JSON bodies over
// a unix socket (and, optionally, TCP with mutual TLS), its payloads, the
// closed set of error identifiers with their classes and HTTP statuses,
// and a Go client.
//
// # Endpoints
//
//	POST /v1/mint        MintRequest        → MintResponse (200) or RefusalResponse
//	POST /v1/deregister  DeregisterRequest  → DeregisterResponse (200) or RefusalResponse
//	GET  /v1/health                         → HealthResponse (200)
//
// A mint request:
//
//	{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review",
//	 "spec":{"component":"review","service_name":"review","reload":"systemctl reload review"},
//	 "wrap_ttl":300,"idempotency_key":"k"}
//
// A deregister request has the same members without spec and wrap_ttl.
// instance and idempotency_key are optional; an explicit instance 0 is
// malformed (omit the member), because the verbs read 0 as absent and the
// "instance present exactly when many-per-host" rule must see what the
// caller sent. DecodeMint documents the codec's rules:
// one JSON object of valid UTF-8, protocol_version exactly 1, strict
// non-negative integers, explicit null rejected, duplicate member names
// rejected, unknown members ignored at every level.
//
// Every response has protocol_version 1 first and registrar_health last;
// members appear in this order:
//
//	mint success        protocol_version, request_id, registration_id, outcome
//	                    (first_mint | idempotent_remint),
//	                    material{role_id, wrapped_secret_id, expires_at}, registrar_health
//	deregister success  protocol_version, request_id, registration_id, outcome
//	                    (removed | already_absent), registrar_health
//	refusal             protocol_version, request_id, registration_id (only when
//	                    derived), class, error{id, payload…}, registrar_health
//	health              protocol_version, registrar_health
//
// expires_at is RFC 3339 UTC with milliseconds (TimeLayout).
// registrar_health is the shared snapshot (package health) embedded as it
// was last published on the daemon's tick, on every response: successes,
// refusals, 400 and 500 alike. Every response is
// Content-Type: application/json and Cache-Control: no-store.
//
// # Identifiers
//
// The closed set; the class and status are properties of the identifier:
//
//	id                       payload       class      HTTP
//	ServiceLabelInvalid      –             permanent  422
//	ServiceInstanceMismatch  –             permanent  422
//	ServiceSpecConflict      –             permanent  409
//	ServiceRequestInvalid    –             permanent  422
//	ServiceNameCollision     –             permanent  409
//	ServiceHostMismatch      –             permanent  409
//	RegistrarUnavailable     reason        permanent  503
//	RegistrarBusy            retry_after   retryable  429 + Retry-After
//	RequestMalformed         detail        permanent  400
//
// IDForReason is the one exhaustive switch from the verbs' refusal reasons
// to identifiers. A pre-derivation refusal the limiter suppressed gets the
// identifier it would have got unlimited; only the admission throttle is
// RegistrarBusy, whose retry_after (whole seconds, ≥ 1) is repeated in the
// Retry-After header. RegistrarUnavailable's reason is AuditUnwritable,
// PostMintUnrecordable or BackendUnavailable.
//
// Decisions the contract left open, pinned by the golden fixtures:
//
//   - RequestMalformed carries a request_id of its own, from a wire-level
//     generator: "wire." + 12 base64url characters drawn once per server +
//     "." + a sequence number. It names the answer in the server's debug log;
//     no verb ran, so no audit record has it, and the "wire." prefix keeps
//     it apart from the verbs' ids.
//   - An unknown path and a wrong method (with Allow) are RequestMalformed
//     like every other codec rejection, an oversize body included: 400, the
//     identifier's one status (404, 405 and 413 are not in the closed set).
//   - POST bodies must be sent as application/json (parameters allowed; a
//     charset must be utf-8); a missing or other Content-Type is
//     RequestMalformed.
//   - A verb answer the wire cannot map (an error of an unknown type, a
//     reason or outcome outside the closed sets) is logged as an internal
//     error and answered 500 with RegistrarUnavailable and no reason. The
//     mapping tests make it unreachable; it exists so that a future
//     outcome is never answered as something it is not.
//
// # Transport and identity
//
// ListenUnix makes the socket's directory 0700 and the socket 0600, and
// replaces a stale socket but never a live one. A unix caller is
// identified as unix-peer:uid=<uid> from SO_PEERCRED, read once per
// connection; never the pid, so reconnecting cannot reset a caller's
// bucket. ListenTLS requires TLS 1.3 and a client certificate verified
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
// Request bodies at most MaxBodyBytes (64 KiB), headers at most
// MaxHeaderBytes, every stored string member at most its FieldBounds
// maximum; read-header, read, write and idle timeouts (defaults 3 s, 10 s,
// 30 s, 15 s). A malformed request is rejected before any verb: it is
// never charged to the limiter and never recorded, but it is counted
// (Stats, ReasonMalformed).
//
// Each listener has its own connection budget (Options): a cap on its
// connections, a cap per caller identity, and on a TLS listener a smaller
// budget and a timeout for connections still in their handshake. At a cap
// the oldest connection without a request in flight is closed to admit
// the newcomer, which is refused only when every slot has a request in
// flight. One evicted while still flushing its answer gets at most a
// second to finish, and at most 8 per listener are finishing at once, so
// a listener's descriptors stay within its cap plus 8. Every rejection is counted by listener and Reason and logged at
// WARN, at most one line per (listener, reason) per RejectionLogInterval.
// Answers net/http gives before the handler runs (a request line or header
// it cannot parse, headers over the bound) are plain HTTP errors without a
// protocol body; a stalled connection is closed without an answer.
//
// Server and Client are safe for concurrent use; the request and response
// types are plain values.
package wire
