// Package registrar implements the registrar's two verbs, mint and
// deregister, over a rate limiter, an audit log and a backend. Verbs (built
// by New) is the whole of it; the wire package turns HTTP requests into
// MintRequest and DeregisterRequest and the verbs' answers back into
// status codes.
//
// # Check order
//
// Every invocation runs the same steps, in this order, and stops at the
// first that answers:
//
//  1. The pure pre-derivation checks (no I/O, no lock), first failure
//     wins: service name is a DNS label (invalid_service_name), host is a
//     DNS label (invalid_host), service name lacks the reserved prefix
//     "registrar-" (reserved_service_name), a mint's spec names the same
//     service (spec_identity_disagreement), the component is configured
//     (component_not_configured), the instance fits the component's
//     multiplicity and MaxInstance (service_instance_mismatch), a mint's
//     wrap TTL is within 1 s and Config.MaxWrapTTLSeconds
//     (invalid_wrap_ttl).
//  2. Check point 1 or check point 2 (below): one limiter charge, before
//     any record is written.
//  3. The intent record (audit phase "intent"), written with a context the
//     caller hanging up does not cancel: from here the work finishes.
//  4. Derivation of the registration id from (multiplicity, host,
//     component, instance) (derived_key_invalid if it fails).
//  5. Under that id's lock (shared by both verbs): the backend's Mint or
//     Deregister, then the outcome record, written before the lock is
//     released. When the registration exists, the backend's first check
//     is ownership: the invocation's Authority.MayAct on the caller and
//     the registration's recorded owner (not_owner). When it does not and
//     the mint is about to create it, the backend asks the reservation
//     (MintOp.Reserve) for a slot under the instance ceilings
//     (instance_ceiling).
//
// The limiter's lock is never held across backend work or a record write.
//
// # The two charge points
//
// An invocation is charged exactly once, in one of two token buckets per
// (caller identity, verb):
//
//   - Check point 1, predecision_refusal: an invocation that failed a
//     pre-derivation check is charged here. With a token it writes its
//     intent and its refused outcome as usual; without one it writes
//     nothing, and gets the same real refusal, marked RefusedError.Limited
//     (the limiter publishes one limited event, which the coalescer turns
//     into a counted "limited" record). A flood of malformed requests costs
//     no disk.
//   - Check point 2, admission: every invocation that passed the checks is
//     charged here. Without a token it is answered *ThrottledError with a
//     retry-after of at least one second: no record, no backend work.
//
// # Refusal taxonomy
//
// Every answer is a result, or exactly one of three error types (see
// ResultOf, and Result for the metrics' spelling):
//
//   - *RefusedError: permanent, retrying the same request cannot succeed.
//     Reason is an vocab.Reason: the seven pre-derivation reasons above,
//     derived_key_invalid, and the backend's determined answers not_owner
//     (both verbs), instance_ceiling, registration_id_collision and
//     stored_spec_conflict (mint) and host_mismatch (deregister). An
//     instance_ceiling refusal names its ceiling and value
//     (RefusedError.Ceiling and Limit, and the record's detail, e.g.
//     "max_instances_per_host 8").
//   - *ThrottledError: the admission throttle, the only retryable answer.
//   - *UnavailableError: the registrar could not do or record the work.
//     Reason is AuditUnwritable (a record could not be written, nothing was
//     changed), PostMintUnrecordable (the registry changed, its outcome
//     record could not be written) or BackendUnavailable (the backend
//     failed; its refusal, reason backend_unavailable, was recorded).
//
// # The backend contract
//
// A Backend answers every determined case with a status (MintStatus,
// DeregisterStatus) and returns an error only when it failed. It is called
// only after the admission charge and the intent write, under the
// registration id's lock, and must be safe for concurrent use across ids.
// Mint is atomic: MintCreated and MintReissued issue Material,
// MintNotOwner, MintCeilingReached, MintCollision and MintSpecConflict
// change nothing.
// Deregister answers DeregisterRemoved, DeregisterAbsent, or
// DeregisterNotOwner or DeregisterHostMismatch (nothing changed). A
// binding records its owner, MintOp.Owner of the mint that created it (the
// verbs pass the caller identity), and whenever a binding exists the
// backend asks the op's MayAct about that owner before any other check, so
// a caller refused not_owner learns nothing else of the registration. A
// mint about to create a binding asks the op's Reserve first, inside the
// same atomicity; never for an existing binding. A failure after the
// registry was, or may have been, changed is a *PartialError, and a retry
// of the same request must converge. A backend that is a Lister lists its
// bindings, for Rebuild. The shared suite backend/backendtest.Run checks
// all of this for any implementation, and backendtest.RunCeilings the
// ceilings through the verbs over it; backend/embedded, backend/openbao
// and the test fake in internal/testing/registrartest run both.
//
// # Instance ceilings
//
// A mint that would create a registration beyond a ceiling is refused
// instance_ceiling: a component's max_instances_per_host (SetCeilings; the
// live registrations of that component on that host) or the caller
// policy's max_registrations (Authority.MaxRegistrations; the live
// registrations whose recorded owner takes that policy under the authority
// in force; an unowned registration and an operator's count for none), the
// host's checked first. A remint is never refused by a ceiling, even one
// lowered below the count; a deregister that removes frees its slot at
// once.
//
// The counts are the verbs', in memory, one entry per registration id
// with its spec's component, host and owner (so a deregister knows whose
// slot it frees without asking the backend). The refusal is decided where
// the backend knows the mint creates: MintOp.Reserve, called inside the
// backend's atomicity, takes the slot under the count lock (two mints
// racing for the last slot: exactly one gets it), and the mint's answer
// settles it, under the registration's lock: MintCreated keeps it, an
// answer that did not create releases it, and a *PartialError after a
// reservation keeps it (the backend may have created the binding: the
// counts err high, never past a ceiling) until the retry, a deregister of
// the id or the next Rebuild settles it. A *PartialError of a deregister
// likewise keeps the registration counted.
//
// Rebuild recounts the registry (a Lister), at start and whenever the
// daemon wants, while the verbs keep serving: the changes they make
// meanwhile are journalled and applied over the listing, and reservations
// still in flight are carried over. Stock reports the counts for the
// gauges. The counts are exact for one daemon per registry; two daemons on
// one OpenBao server each count their own mints until their next Rebuild.
//
// # Telemetry
//
// Each invocation is one server span (ScopeName, "registrar.mint" or
// "registrar.deregister"), a child of any trace context the transport
// extracted, with the attributes AttrVerb, AttrRequestID, AttrResult and,
// when known, AttrRegistrationID, AttrRefusalReason and AttrBackendPartial.
// The metrics go to Deps.Observer; the package registers no metric
// instrument (telemetry.NewVerbObserver does, see package telemetry).
//
// # Concurrency
//
// Verbs is safe for concurrent use. Calls for one registration id are
// serialised; calls for different ids run in parallel.
package registrar
