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
// service_name, reload, state ("claimed" or "active"), created_at (RFC
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
// # Mint
//
//  1. Read the binding. If there is none, ask op.Reserve (the verbs'
//     instance ceilings, under the id's lock): a refusal is
//     registrar.MintCeilingReached and nothing is written. Then claim it
//     with an absent-only compare-and-set (cas=0) in state "claimed",
//     recording op.Owner as its owner; a claim that loses a race reads the
//     winner's binding instead. A binding is never rolled back. A binding
//     that exists, "claimed" by a mint that failed included, is never
//     reserved again: its completion is the first mint.
//  2. Apply the rules in the verbs' order. Ownership first, for a binding
//     this mint did not claim: op.MayAct refuses its owner →
//     registrar.MintNotOwner. Then another host → registrar.MintCollision;
//     the same host with another spec → registrar.MintSpecConflict.
//     Nothing is written in any of these cases, so the secret id already
//     delivered still logs in.
//  3. Create or update the role (idempotent: each mint restates it, so
//     drift is repaired), read the role id, and generate a secret id
//     wrapped for the requested TTL.
//  4. A "claimed" binding is then made "active" with a compare-and-set on
//     the version that was read: the mint whose compare-and-set wins is the
//     first mint (registrar.MintCreated); every other mint of an active
//     binding is a remint (registrar.MintReissued) with the same role id and
//     a new wrapped secret id. Every write of the binding keeps its owner.
//  5. A remint destroys the previous secret id by the accessor in the
//     binding (one the server no longer knows counts as destroyed), then
//     records the new one's accessor with a compare-and-set: at most one
//     secret id per binding logs in.
//
// # Deregister
//
// Read the binding: none → registrar.DeregisterAbsent; op.MayAct refuses
// its owner → registrar.DeregisterNotOwner; another host →
// registrar.DeregisterHostMismatch (nothing is deleted in either). Otherwise delete the role, then the
// binding with all its versions (so a later claim with cas=0 succeeds) →
// registrar.DeregisterRemoved. The binding goes last, so a role never
// outlives it.
//
// # Listing
//
// Backend.Registrations (registrar.Lister, which the verbs' Rebuild counts
// the ceilings from) lists <kv_mount>/metadata/<kv_prefix>/bindings/ (the
// token policy's one list capability) and reads each binding, a few at a
// time within openbao.max_in_flight; "claimed" bindings are listed too.
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
// or may have changed state. Retrying the same mint after any partial
// failure finishes it: a "claimed" binding with the same host and spec is
// completed and reported as the first mint. Retrying a deregister repeats
// the deletes, which succeed on what is already gone. Either way there is
// never a role without a binding.
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
// calls for one id from several daemons are resolved by the
// compare-and-set on the binding.
package openbao
