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
// Every mint and deregister answer a verb gave also carries the
// RateLimit-Policy and RateLimit header fields of the IETF ratelimit draft,
// describing the caller's own admission bucket for the verb called:
//
//	RateLimit-Policy: "<policy>";q=<burst>;w=<burst × refill interval, seconds, rounded up>
//	RateLimit: "<policy>";r=<tokens left>;t=<seconds to the next token, rounded up; 0 when full>
//
// ratelimit.go formats and parses them; the Client exposes them on each
// Response.
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
//	CallerNotPermitted       reason[,scope] permanent  403
//	InstanceCeilingReached   ceiling,limit permanent  409
//
// IDForReason is the one exhaustive switch from the verbs' refusal reasons
// to identifiers. A pre-derivation refusal the limiter suppressed gets the
// identifier it would have got unlimited; only the admission throttle is
// RegistrarBusy, whose retry_after (whole seconds, ≥ 1) is repeated in the
// Retry-After header. RegistrarUnavailable's reason is AuditUnwritable,
// PostMintUnrecordable or BackendUnavailable. CallerNotPermitted's reason is
// no_policy, out_of_scope (with scope: verb, service, component or host) or
// not_owner; InstanceCeilingReached names its ceiling
// (max_instances_per_host or max_registrations) and its limit.
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
// # Server
//
// The server side (listeners, connection budgets, identity from the
// connection, the handlers) is package server; this package holds what
// both ends share, and the Client. The protocol's timeouts and header bound
// (DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultWriteTimeout,
// DefaultIdleTimeout, MaxHeaderBytes) are the server's defaults and what
// the Client's transport is tuned to.
//
// Client and Encoder are safe for concurrent use; the request and response
// types are plain values.
package wire
