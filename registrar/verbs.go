package registrar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/trace"
)

// AuditLog is where the verbs write their intent and outcome records:
// *audit.Store in production. Append is the only write and it is fallible;
// the verbs handle every error.
type AuditLog interface {
	Append(ctx context.Context, r *audit.Record) error
}

// Config is the verbs' share of the [registrar] configuration.
type Config struct {
	// Components maps each configured component to its multiplicity.
	Components map[string]vocab.Multiplicity
	// Authority says what each caller may do (SetAuthority replaces it);
	// nil permits every caller everything.
	Authority Authority
	// MaxWrapTTLSeconds bounds a mint's wrap_ttl (registrar.max_wrap_ttl_seconds).
	MaxWrapTTLSeconds uint32
	// MaxInstancesPerHost is the per-host instance ceilings SetCeilings
	// replaces: component → max_instances_per_host; absent or 0, none.
	MaxInstancesPerHost map[string]uint32
}

// Deps are the verbs' collaborators.
type Deps struct {
	Limiter *limiter.Limiter
	Audit   AuditLog
	Backend Backend
	// Now is the wall clock for record timestamps and material expiry;
	// nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// TracerProvider traces every invocation; nil means no-op.
	TracerProvider trace.TracerProvider
	// Observer receives every invocation's measurements (the daemon's is
	// telemetry.NewVerbObserver); nil means none.
	Observer Observer
}

// Verbs implements mint and deregister. It is safe for concurrent use.
//
// Each invocation runs, in order: the pure pre-derivation checks; the
// limiter charge (predecision_refusal if a check failed, else admission),
// before any record is written; the intent record; derivation of the
// registration id; then, under that id's lock (shared by both verbs), the
// backend work and the outcome record, written before the lock is released.
// The limiter's lock is never held across backend work or a record write.
//
// A mint that would create a registration beyond an instance ceiling (a
// component's max_instances_per_host on the host, or the caller policy's
// max_registrations) is refused instance_ceiling, after its intent record,
// by the backend work that knows whether it creates (MintOp.Reserve); see
// SetCeilings, Rebuild and Stock.
type Verbs struct {
	lim               *limiter.Limiter
	log               AuditLog
	backend           Backend
	components        atomic.Pointer[map[string]vocab.Multiplicity] // swapped whole by SetComponents
	authority         atomic.Pointer[Authority]                     // swapped whole by SetAuthority; nil permits all
	ceilings          atomic.Pointer[map[string]uint32]             // swapped whole by SetCeilings
	tally             tally                                         // the live registrations the ceilings bound
	rebuilding        sync.Mutex                                    // one Rebuild at a time
	maxWrapTTLSeconds uint32
	now               func() time.Time
	logger            *slog.Logger
	locks             keyedMutex
	ids               *requestIDs
	tel               *instruments
}

// Caller prepares identity for the verbs' limiter: the server does it once
// per connection and passes it in each request's Caller.
func (v *Verbs) Caller(identity string) limiter.Caller { return v.lim.Caller(identity) }

// RateLimit is the state of c's admission bucket of verb now, for the
// RateLimit answer headers.
func (v *Verbs) RateLimit(c limiter.Caller, verb vocab.Verb) limiter.BucketStatus {
	return v.lim.Status(c, verb, vocab.Admission)
}

// components copies a components table, checking every multiplicity.
func components(in map[string]vocab.Multiplicity) (map[string]vocab.Multiplicity, error) {
	comps := make(map[string]vocab.Multiplicity, len(in))
	for name, m := range in {
		if !m.Valid() {
			return nil, fmt.Errorf("component %q has invalid multiplicity %d", name, m)
		}
		comps[name] = m
	}
	return comps, nil
}

// SetComponents replaces the components table (a reload of
// [registrar.components]). An invocation that has arrived keeps the table
// it started with; a component removed is refused with
// component_not_configured from the next invocation on, for both verbs,
// and its bindings stay in the backend. On error nothing changes.
func (v *Verbs) SetComponents(in map[string]vocab.Multiplicity) error {
	comps, err := components(in)
	if err != nil {
		return fmt.Errorf("registrar: SetComponents: %w", err)
	}
	v.components.Store(&comps)
	return nil
}

// New returns the verbs. Every dependency but the clock, logger and
// providers is required.
func New(cfg Config, deps Deps) (*Verbs, error) {
	switch {
	case deps.Limiter == nil:
		return nil, errors.New("registrar: New: nil limiter")
	case deps.Audit == nil:
		return nil, errors.New("registrar: New: nil audit log")
	case deps.Backend == nil:
		return nil, errors.New("registrar: New: nil backend")
	case cfg.MaxWrapTTLSeconds == 0:
		return nil, errors.New("registrar: New: max wrap TTL must be greater than 0")
	}
	comps, err := components(cfg.Components)
	if err != nil {
		return nil, fmt.Errorf("registrar: New: %w", err)
	}
	ids, err := newRequestIDs()
	if err != nil {
		return nil, err
	}
	tel := newInstruments(deps.TracerProvider, deps.Observer)
	v := &Verbs{
		lim:               deps.Limiter,
		log:               deps.Audit,
		backend:           deps.Backend,
		maxWrapTTLSeconds: cfg.MaxWrapTTLSeconds,
		now:               deps.Now,
		logger:            deps.Logger,
		ids:               ids,
		tel:               tel,
	}
	v.components.Store(&comps)
	v.SetAuthority(cfg.Authority)
	v.SetCeilings(cfg.MaxInstancesPerHost)
	v.tally.s = newTallyState(v.authority.Load())
	v.tally.pending = map[string]tallyEntry{}
	if v.now == nil {
		v.now = time.Now
	}
	if v.logger == nil {
		v.logger = slog.New(slog.DiscardHandler)
	}
	return v, nil
}

// invocation is the state one verb call threads through its steps.
type invocation struct {
	// arrived is the invocation's arrival (the start of its duration): the
	// instant both check points charge at, without a clock read of their
	// own.
	arrived   time.Time
	requestID string
	verb      vocab.Verb
	identity  string
	subuid    uint32 // the request's CallerSubuid
	caller    limiter.Caller
	requested *audit.Requested
	span      trace.Span
	// auth and policy are the authority arrive loaded and the caller's
	// policy index in it: one authority for the whole invocation, the
	// ownership check and the ceilings included. auth is nil when none is
	// in force; authp is the pointer it was loaded from, which the counts
	// of the policies are kept under.
	auth   Authority
	authp  *Authority
	policy int
	// req is what requested points to, idBuf the bytes of requestID, and
	// throttled and limited the answers of a limited call: all live in the
	// one allocation of the invocation, so a flood's calls cost one
	// allocation here, not four. (The span attributes set at finish are
	// only needed by a recording span: their buffer comes from a pool, so
	// an unsampled flood does not allocate and clear it on every call.)
	req       audit.Requested
	idBuf     [maxRequestIDBytes]byte
	throttled ThrottledError
	limited   RefusedError
}

// Mint creates (or idempotently re-issues) a service identity. The error is
// nil, *RefusedError, *ThrottledError or *UnavailableError.
func (v *Verbs) Mint(ctx context.Context, req MintRequest) (MintResult, error) {
	start := time.Now()
	inv, ctx := v.begin(ctx, start, vocab.Mint, req.CallerIdentity, req.CallerSubuid, req.Caller, audit.Requested{ServiceName: req.ServiceName, Host: req.Host, Instance: req.Instance, Reload: req.Spec.Reload})
	res, err := v.mint(ctx, inv, &req)
	res.RequestID = inv.requestID
	v.tel.finish(ctx, inv, start, res.RegistrationID, mintResult(res.Outcome), err)
	return res, err
}

// Deregister removes a service identity. The error is nil, *RefusedError,
// *ThrottledError or *UnavailableError.
func (v *Verbs) Deregister(ctx context.Context, req DeregisterRequest) (DeregisterResult, error) {
	start := time.Now()
	inv, ctx := v.begin(ctx, start, vocab.Deregister, req.CallerIdentity, req.CallerSubuid, req.Caller, audit.Requested{ServiceName: req.ServiceName, Host: req.Host, Instance: req.Instance})
	res, err := v.deregister(ctx, inv, &req)
	res.RequestID = inv.requestID
	v.tel.finish(ctx, inv, start, res.RegistrationID, deregisterResult(res.Outcome), err)
	return res, err
}

// begin starts an invocation of verb by identity (subuid, when not 0, the
// subordinate uid the kernel reported for it) asking for req: what its
// intent and outcome records say was requested (a mint's with its
// spec.reload, the command the caller asks the host to run).
func (v *Verbs) begin(ctx context.Context, start time.Time, verb vocab.Verb, identity string, subuid uint32, caller limiter.Caller, req audit.Requested) (*invocation, context.Context) {
	if caller.Identity() != identity {
		caller = v.lim.Caller(identity) // not prepared, or prepared for another identity
	}
	inv := &invocation{
		arrived:  start,
		verb:     verb,
		identity: identity,
		subuid:   subuid,
		caller:   caller,
		req:      req,
	}
	inv.requested = &inv.req
	inv.requestID = v.ids.nextIn(&inv.idBuf)
	ctx, inv.span = v.tel.start(ctx, verb, inv.requestID)
	return inv, ctx
}

// arrive runs what both verbs do before their backend work, in order: the
// pure pre-derivation checks and check point 1; check point 2 and the intent
// record; derivation of the registration id; and that id's lock. On success
// the caller does its backend work and writes its outcome record, then
// unlocks: the outcome is written under the lock. mint is nil for
// deregister.
func (v *Verbs) arrive(ctx context.Context, inv *invocation, component string, mint *MintRequest) (wctx context.Context, id string, unlock func(), err error) {
	r := inv.requested
	comps := *v.components.Load() // one table for the whole invocation
	// One authority for the whole invocation, the ownership check
	// included: a reload meanwhile does not change its answers.
	if auth := v.authority.Load(); auth != nil {
		inv.auth, inv.authp = *auth, auth
		var ok bool
		if inv.policy, ok = inv.auth.Policy(inv.identity); !ok {
			return nil, "", nil, v.refusePreDerivation(ctx, inv, vocab.ReasonNoPolicy, 0)
		}
	}
	if reason := v.preDerivation(comps, r.ServiceName, r.Host, component, r.Instance, mint); reason != 0 {
		return nil, "", nil, v.refusePreDerivation(ctx, inv, reason, 0)
	}
	if inv.auth != nil {
		if scope := inv.auth.OutOfScope(inv.policy, inv.identity, inv.verb, r.ServiceName, component, r.Host); scope != 0 {
			return nil, "", nil, v.refusePreDerivation(ctx, inv, vocab.ReasonOutOfScope, scope)
		}
	}
	if wctx, err = v.admit(ctx, inv); err != nil {
		return nil, "", nil, err
	}
	id, derived := derive(comps[component], r.Host, component, r.Instance)
	if !derived {
		return nil, "", nil, v.refuse(wctx, inv, "", vocab.ReasonDerivedKeyInvalid, "")
	}
	return wctx, id, v.locks.lock(id), nil
}

// mayAct is the ownership check the backend asks when the registration
// exists: the invocation's authority on its caller and the registration's
// recorded owner. nil (anyone may act) when no authority is in force.
func (inv *invocation) mayAct() func(owner string) bool {
	if inv.auth == nil {
		return nil
	}
	auth, policy, identity := inv.auth, inv.policy, inv.identity
	return func(owner string) bool { return auth.MayAct(policy, identity, owner) }
}

func (v *Verbs) mint(ctx context.Context, inv *invocation, req *MintRequest) (MintResult, error) {
	var res MintResult
	wctx, id, unlock, err := v.arrive(ctx, inv, req.Component, req)
	if err != nil {
		return res, err
	}
	defer unlock() // after the outcome record: it is written under the lock
	res.RegistrationID = id
	rsv := v.reservationFor(inv, id, req)
	status, mat, err := v.backend.Mint(wctx, MintOp{
		RegistrationID: id,
		Host:           req.Host,
		Spec:           req.Spec,
		Owner:          inv.identity,
		MayAct:         rsv.mayAct,
		Reserve:        rsv.reserve,
		WrapTTL:        time.Duration(req.WrapTTLSeconds) * time.Second,
		Now:            v.now(),
	})
	// Settled under the id's lock, before anything else can reserve it.
	rsv.settle(status, err)
	if err != nil {
		return res, v.backendFailed(wctx, inv, id, err)
	}
	switch status {
	case MintCeilingReached:
		if rsv.ceiling == 0 {
			return res, v.backendFailed(wctx, inv, id, errors.New("backend answered MintCeilingReached, but no reservation was refused"))
		}
		return res, v.refuseCeiling(wctx, inv, id, rsv.ceiling, rsv.limit)
	case MintNotOwner:
		return res, v.refuse(wctx, inv, id, vocab.ReasonNotOwner, "")
	case MintCollision:
		return res, v.refuse(wctx, inv, id, vocab.ReasonRegistrationIDCollision, "")
	case MintSpecConflict:
		return res, v.refuse(wctx, inv, id, vocab.ReasonStoredSpecConflict, "")
	case MintCreated, MintReissued:
		res.Outcome = FirstMint
		if status == MintReissued {
			res.Outcome = IdempotentRemint
		}
		res.Material = mat
		if err := v.writeOutcome(wctx, inv, id, &audit.Outcome{Class: res.Outcome.AuditClass()}); err != nil {
			return res, v.unrecordable(wctx, inv, id, res.Outcome.String(), err)
		}
		return res, nil
	}
	return res, v.backendFailed(wctx, inv, id, fmt.Errorf("backend returned unknown mint status %d", status))
}

func (v *Verbs) deregister(ctx context.Context, inv *invocation, req *DeregisterRequest) (DeregisterResult, error) {
	var res DeregisterResult
	wctx, id, unlock, err := v.arrive(ctx, inv, req.Component, nil)
	if err != nil {
		return res, err
	}
	defer unlock()
	res.RegistrationID = id
	status, err := v.backend.Deregister(wctx, DeregisterOp{RegistrationID: id, Host: req.Host, MayAct: inv.mayAct()})
	v.settleDeregister(id, status, err)
	if err != nil {
		return res, v.backendFailed(wctx, inv, id, err)
	}
	switch status {
	case DeregisterNotOwner:
		return res, v.refuse(wctx, inv, id, vocab.ReasonNotOwner, "")
	case DeregisterHostMismatch:
		return res, v.refuse(wctx, inv, id, vocab.ReasonHostMismatch, "")
	case DeregisterAbsent:
		res.Outcome = AlreadyAbsent
		if err := v.writeOutcome(wctx, inv, id, &audit.Outcome{Class: vocab.ClassIdempotentAlreadyAbsent}); err != nil {
			return res, &UnavailableError{RequestID: inv.requestID, RegistrationID: id, Reason: AuditUnwritable, Err: err}
		}
		return res, nil
	case DeregisterRemoved:
		res.Outcome = Removed
		if err := v.writeOutcome(wctx, inv, id, &audit.Outcome{Class: vocab.ClassIdentityRemoved}); err != nil {
			return res, v.unrecordable(wctx, inv, id, res.Outcome.String(), err)
		}
		return res, nil
	}
	return res, v.backendFailed(wctx, inv, id, fmt.Errorf("backend returned unknown deregister status %d", status))
}

// refusePreDerivation is check point 1: charge predecision_refusal before
// the intent write. No token → no records, one limited event (published by
// the limiter), and the same real permanent refusal.
//
// An out_of_scope refusal names its scope: in the answer, and as the
// refused record's detail.
func (v *Verbs) refusePreDerivation(ctx context.Context, inv *invocation, reason vocab.Reason, scope vocab.Scope) error {
	if d := v.lim.ChargeCaller(ctx, &inv.caller, inv.verb, vocab.PredecisionRefusal, inv.arrived); !d.Allowed {
		inv.limited = RefusedError{RequestID: inv.requestID, Reason: reason, Scope: scope, Limited: true}
		return &inv.limited
	}
	wctx := context.WithoutCancel(ctx)
	if err := v.writeIntent(wctx, inv); err != nil {
		return v.intentUnwritten(inv, err)
	}
	detail := ""
	if scope != 0 {
		detail = scope.String()
	}
	if err := v.writeOutcome(wctx, inv, "", &audit.Outcome{Class: vocab.ClassRefused, Reason: reason, Detail: detail}); err != nil {
		return &UnavailableError{RequestID: inv.requestID, Reason: AuditUnwritable, Err: err}
	}
	return &RefusedError{RequestID: inv.requestID, Reason: reason, Scope: scope}
}

// admit is check point 2: charge admission before the intent write and
// before any backend work. No token → the typed throttle, nothing written,
// nothing attempted. Token → the intent record; if it cannot be written the
// invocation is refused AuditUnwritable and nothing is created. The
// returned context is not cancelled by the caller hanging up: once the
// intent is written the work and its outcome record must finish.
func (v *Verbs) admit(ctx context.Context, inv *invocation) (context.Context, error) {
	if d := v.lim.ChargeCaller(ctx, &inv.caller, inv.verb, vocab.Admission, inv.arrived); !d.Allowed {
		inv.throttled = ThrottledError{RequestID: inv.requestID, RetryAfterSeconds: d.RetryAfterSeconds}
		return nil, &inv.throttled
	}
	wctx := context.WithoutCancel(ctx)
	if err := v.writeIntent(wctx, inv); err != nil {
		return nil, v.intentUnwritten(inv, err)
	}
	return wctx, nil
}

// intentUnwritten answers an invocation whose intent record was not
// written: nothing was created. The store holding generations past its
// budget for registrar.audit_min_retention_seconds refuses a mint's intent
// (audit.RetentionHeldError): that is RegistrarBusy, retryable once the
// oldest held file ages out; any other failure is AuditUnwritable.
func (v *Verbs) intentUnwritten(inv *invocation, err error) error {
	if held, ok := errors.AsType[*audit.RetentionHeldError](err); ok {
		inv.throttled = ThrottledError{RequestID: inv.requestID, RetryAfterSeconds: uint64(max(held.RetryAfter.Round(time.Second)/time.Second, 1))}
		return &inv.throttled
	}
	return &UnavailableError{RequestID: inv.requestID, Reason: AuditUnwritable, Err: err}
}

// refuse writes a refused outcome and returns the refusal; a failed write
// (nothing was changed) answers AuditUnwritable.
func (v *Verbs) refuse(ctx context.Context, inv *invocation, id string, reason vocab.Reason, detail string) error {
	if err := v.writeOutcome(ctx, inv, id, &audit.Outcome{Class: vocab.ClassRefused, Reason: reason, Detail: detail}); err != nil {
		return &UnavailableError{RequestID: inv.requestID, RegistrationID: id, Reason: AuditUnwritable, Err: err}
	}
	return &RefusedError{RequestID: inv.requestID, RegistrationID: id, Reason: reason}
}

// backendFailed records backend_unavailable and answers BackendUnavailable
// (AuditUnwritable if even that record cannot be written). A failure after
// the backend changed, or may have changed, the registry (*PartialError) is
// never recorded as a clean refusal: its detail starts "partial:" and names
// the changes, and it is logged and counted as such.
func (v *Verbs) backendFailed(ctx context.Context, inv *invocation, id string, berr error) error {
	msg, detail := "backend failed", berr.Error()
	if p, ok := errors.AsType[*PartialError](berr); ok {
		msg, detail = "backend failed after changing the registry; retrying the same request converges", p.Error()
		v.tel.notePartial(ctx, inv.verb)
		inv.span.SetAttributes(AttrBackendPartial.Bool(true))
	}
	v.logger.LogAttrs(ctx, slog.LevelError, msg,
		slog.String("request_id", inv.requestID), slog.String("registration_id", id), slog.Any("error", berr))
	if err := v.writeOutcome(ctx, inv, id, &audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonBackendUnavailable, Detail: detail}); err != nil {
		return &UnavailableError{RequestID: inv.requestID, RegistrationID: id, Reason: AuditUnwritable, Err: errors.Join(berr, err)}
	}
	return &UnavailableError{RequestID: inv.requestID, RegistrationID: id, Reason: BackendUnavailable, Err: berr}
}

// unrecordable answers a mutation whose outcome record could not be
// written. The change stands; say so loudly.
func (v *Verbs) unrecordable(ctx context.Context, inv *invocation, id, outcome string, err error) error {
	v.logger.LogAttrs(ctx, slog.LevelError, "registry changed but its outcome record could not be written",
		slog.String("request_id", inv.requestID), slog.String("registration_id", id),
		slog.String("outcome", outcome), slog.Any("error", err))
	v.tel.noteUnrecordable(ctx, inv.verb)
	return &UnavailableError{RequestID: inv.requestID, RegistrationID: id, Reason: PostMintUnrecordable, Err: err}
}

func (v *Verbs) writeIntent(ctx context.Context, inv *invocation) error {
	err := v.log.Append(ctx, &audit.Record{
		Phase:          audit.PhaseIntent,
		TS:             v.now(),
		RequestID:      inv.requestID,
		Verb:           inv.verb,
		CallerIdentity: inv.identity,
		CallerSubuid:   inv.subuid,
		Requested:      inv.requested,
	})
	if err == nil && inv.span.IsRecording() {
		inv.span.AddEvent("audit.intent_written")
	}
	return err
}

func (v *Verbs) writeOutcome(ctx context.Context, inv *invocation, id string, o *audit.Outcome) error {
	err := v.log.Append(ctx, &audit.Record{
		Phase:          audit.PhaseOutcome,
		TS:             v.now(),
		RequestID:      inv.requestID,
		Verb:           inv.verb,
		CallerIdentity: inv.identity,
		CallerSubuid:   inv.subuid,
		Requested:      inv.requested,
		RegistrationID: id,
		Outcome:        o,
	})
	if err == nil && inv.span.IsRecording() {
		inv.span.AddEvent("audit.outcome_written")
	}
	return err
}
