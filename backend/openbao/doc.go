// Package openbao is the registrar.Backend that mints real OpenBao
// identities: an AppRole role per registration id, carrying the policy the
// operator wrote for the binding's service, and a response-wrapped secret
// id. It
// speaks the Vault HTTP API through the official client module
// (github.com/openbao/openbao/api/v2), so it works against OpenBao and
// against HashiCorp Vault, which the integration tests run.
//
// # What lives where
//
// For registration id ID, with the configured mounts and prefix:
//
//	<kv_mount>/data/<kv_prefix>/bindings/ID   the binding (KV version 2)
//	auth/<approle_mount>/role/bootroot-service-ID   the AppRole role
//	sys/policies/acl/registrar-otel-service-<service_name>   the service's policy (the operator's)
//
// The binding is a KV v2 secret of strings: v ("1"), host, component,
// service_name, reload, state ("claimed", "active" or "removing"),
// claim_owner and claim_expires while a call holds it (see Claims),
// created_at (RFC
// 3339, UTC), owner (the caller identity of the mint that claimed it;
// absent when that mint named none) and, once a secret id was issued,
// secret_id_accessor (the last secret id's accessor). owner came without a
// new v: a binding written before owners were recorded has none and reads
// as owner "". The service's policy grants read on
// <kv_mount>/data/<kv_prefix>/services/<service_name>/* and nothing else;
// ServicePolicy shows it. The backend writes no policy: the role carries
// that one, binds a secret id, and issues secret ids with
// openbao.secret_id_ttl_seconds and openbao.secret_id_num_uses, exactly the
// values TokenPolicy's allowed_parameters admit, so the token cannot
// escalate (Backend.CheckPolicy asks the server that it holds exactly
// TokenPolicy).
//
// # Claims: the rules across registrars
//
// Several registrars may serve one server (or raft cluster). Every call
// that writes for a registration first claims its binding: a
// compare-and-set write of the binding (cas=0 when absent, else the
// version read) carrying claim_owner, the backend's instance nonce (random
// per Backend), and claim_expires, its clock's now + ClaimTTL (30 s, or
// 2 × ClockSkew + 4 request timeouts when longer). Only the holder writes
// the role, issues or destroys the role's secret ids, or deletes anything;
// its last write (the activation, or the binding's deletion) releases the
// claim. The binding's KV version is the fence: every write of it is a
// compare-and-set on the version the writer claimed, so a holder whose
// claim was taken over cannot write the binding any more.
//
// A call that reads a claim of another registrar that has not expired by
// its own clock re-reads the binding (2 ms, doubling to 50 ms) until the
// claim is released or expires, for at most one request timeout; then it
// fails with ErrClaimHeld (a *RequestError of kind KindSaturated: nothing
// written, retryable). A claim of its own nonce is a dead call of this
// registrar (its calls of one id are serialised by the per-id lock) and is
// taken at once; an expired claim is taken by anyone. A lost
// compare-and-set re-reads and starts over, at most 8 times a call.
//
// AppRole writes cannot be fenced, so the claim must exclude: a holder
// sends no state-changing request later than ClaimTTL − request timeout −
// ClockSkew after it sent its claim (measured by its clock, checked before
// each step; past it the call fails, partial, and the retry finishes), so
// its last request is over before the others may deem the claim expired,
// provided the registrars' clocks agree within ClockSkew (5 s) and the
// server applies a request within the request timeout or not at all.
//
// # Mint
//
//  1. Read the binding. Absent: ask op.Reserve (the verbs' instance
//     ceilings, under the id's lock; a refusal is
//     registrar.MintCeilingReached and nothing is written), then claim it
//     with cas=0 in state "claimed", recording op.Owner as its owner. A
//     binding "removing" (a deregister that stopped half-way) is removed
//     first (claim, role, binding), and the mint starts over.
//  2. Otherwise apply the rules in the verbs' order, on the binding just
//     read: op.MayAct refuses its owner → registrar.MintNotOwner; another
//     host → registrar.MintCollision; the same host with another spec →
//     registrar.MintSpecConflict. Nothing is written in any of these
//     cases, so the secret id already delivered still logs in. Then claim
//     it with cas=its version.
//  3. Holding the claim: write the role (idempotent: each mint restates it,
//     so drift is repaired; AppRole creates a new role id only when the role
//     is absent, and only the holder writes it), read the role id, and
//     generate a secret id wrapped for the requested TTL; its answer names
//     the new secret id's accessor.
//  4. List the role's secret id accessors (the list answer is
//     response-wrapped, as the token policy's min_wrapping_ttl requires
//     of every operation on the path, and unwrapped with its own wrapping
//     token) and destroy every one but the new one: the previous delivered
//     one, and any a failed or dead mint issued and never delivered. One
//     the server no longer knows ("failed to find accessor entry", or
//     "invalid secret id accessor" when another destroy won the race)
//     counts as destroyed.
//  5. Activate: write the binding, state "active", the new accessor, no
//     claim, with a compare-and-set on the claimed version. The mint that
//     activates a "claimed" binding is the first mint
//     (registrar.MintCreated); every other is a remint
//     (registrar.MintReissued) with the same role id and a new wrapped
//     secret id. A lost activation means the claim was taken over: the new
//     secret id is destroyed and the mint fails (partial), answering no
//     material. Every write of the binding keeps its owner.
//
// # Deregister
//
// Read the binding. Absent: read the role id; no role →
// registrar.DeregisterAbsent; a role (an orphan: left by a registrar before
// the claims, or by hand) → claim the absent binding with cas=0 in state
// "removing", delete the role and the binding, and answer
// registrar.DeregisterAbsent (no registration was bound). Otherwise
// op.MayAct refuses its owner → registrar.DeregisterNotOwner; another host
// → registrar.DeregisterHostMismatch (nothing is deleted in either). Then
// claim it in state "removing", delete the role (and with it every secret
// id it issued), then the binding with all its versions (so a later claim
// with cas=0 succeeds) → registrar.DeregisterRemoved. The binding goes
// last, so a role never outlives it, and a call that finds it "removing"
// with the claim free finishes the removal.
//
// # Listing
//
// Backend.Registrations (registrar.Lister, which the verbs' Rebuild counts
// the ceilings from) lists <kv_mount>/metadata/<kv_prefix>/bindings/ (the
// token policy's one list capability) and reads each binding, a few at a
// time within openbao.max_in_flight; "claimed" and "removing" bindings
// are listed too (a retry completes them: a "removing" one's deregister
// answers DeregisterRemoved and releases its slot; a mint that finishes
// the removal reserves anew, so the count errs high until the next
// listing, never low).
// The listing is not a snapshot: the verbs journal their own changes
// meanwhile.
//
// # Failures, retries and restarts
//
// Every request is bounded by openbao.request_timeout_ms and is not retried
// by the client on the same node: the verbs' caller retries, and every
// step converges. (With several nodes a request may go to the next one;
// see "Several nodes".) A
// failure before any state-changing request is an ordinary backend error;
// a failure at or after one (a timeout, a 5xx or a dropped connection may
// have been applied) is a *registrar.PartialError naming the steps that did
// or may have changed state. Retrying the same call after any partial
// failure finishes it: through the same registrar at once (its own claim),
// through another once the claim expired. A "claimed" binding with the same
// host and spec is completed and reported as the first mint, and the retry
// destroys any secret id the failed attempt issued. A "removing" binding
// is removed. Either way there is never a role without a binding.
//
// Errors are *RequestError (operation, kind, HTTP status). None carries
// the token or a secret: the token travels only in a request header, and
// the wrapped secret id only in a successful response.
//
// # Several nodes
//
// Options.Addresses lists a raft cluster's nodes (openbao.address). The
// client's transport sends each request to the node that last answered and,
// when that node cannot take it, to each other node once, in order: after a
// refused connection, a 503 or a standby's 500 "local node not active but
// active cluster node not found" (nothing was applied) any request; after a
// failure that may have been applied (a standby's 307 because its forwarding
// to a dying active node failed, a broken connection, a 502 or 504) only an
// idempotent one: reads, lists, deletes, role writes, secret id destroys, the
// token's own lookup and renewal. A binding write and a secret id's
// generation are sent once. No redirect is followed (the client would take
// a second 307 for success). A request that no node takes fails at once
// with the last node's failure. The transport records since when requests
// fail to reach an active node: Ready answers a *NotReadyError once that
// exceeds Options.ReadinessGrace, and Probe, on the daemon's tick, looks the
// token up when nothing reached the cluster lately.
//
// # Observability
//
// Each request is a client span (openbao.<operation>) that is a child of
// the invocation span in the context, and is measured by
// registrar.backend.request.duration and, when it fails,
// registrar.backend.request.errors, both labelled by backend, operation and
// (for errors) kind — never by registration id. Failures are logged with
// their cause at warn level.
//
// A Backend is safe for concurrent use. The verbs serialise calls per
// registration id, and so does the backend itself (a process-local lock per
// id, held from the binding read to the call's last write), so the
// ownership check judges the binding the call then acts on; concurrent
// calls for one id from several registrars are serialised by the claims.
package openbao
