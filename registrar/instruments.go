package registrar

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the verbs' spans, and of
// the metrics telemetry.NewVerbObserver records for them.
const ScopeName = "github.com/registrar-otel/registrar-otel/registrar"

// Result is an invocation's result as the metrics and spans spell it.
type Result uint8

// The seven results. Every invocation ends in exactly one.
const (
	ResultFirstMint Result = iota
	ResultIdempotentRemint
	ResultIdentityRemoved
	ResultIdempotentAlreadyAbsent
	ResultRefused
	ResultThrottled
	ResultUnavailable

	numResults = 7
)

// String returns the label value, e.g. "first_mint" or "throttled".
var resultNames = [...]string{
	ResultFirstMint:               "first_mint",
	ResultIdempotentRemint:        "idempotent_remint",
	ResultIdentityRemoved:         "identity_removed",
	ResultIdempotentAlreadyAbsent: "idempotent_already_absent",
	ResultRefused:                 "refused",
	ResultThrottled:               "throttled",
	ResultUnavailable:             "unavailable",
}

func (r Result) String() string {
	if int(r) < len(resultNames) && resultNames[r] != "" {
		return resultNames[r]
	}
	return "unknown"
}

// ResultOf classifies a verb's error (nil, *RefusedError, *ThrottledError,
// *UnavailableError); ok is the result when err is nil.
func ResultOf(ok Result, err error) Result {
	// The verbs' own errors, unwrapped: no errors.As (whose targets would
	// cost an allocation each on every throttled call).
	switch err.(type) {
	case nil:
		return ok
	case *ThrottledError:
		return ResultThrottled
	case *RefusedError:
		return ResultRefused
	case *UnavailableError:
		return ResultUnavailable
	}
	var (
		r *RefusedError
		t *ThrottledError
	)
	switch {
	case errors.As(err, &t):
		return ResultThrottled
	case errors.As(err, &r):
		return ResultRefused
	}
	return ResultUnavailable
}

func mintResult(o MintOutcome) Result {
	if o == IdempotentRemint {
		return ResultIdempotentRemint
	}
	return ResultFirstMint
}

func deregisterResult(o DeregisterOutcome) Result {
	if o == AlreadyAbsent {
		return ResultIdempotentAlreadyAbsent
	}
	return ResultIdentityRemoved
}

// Observer receives the verbs' measurements. The verbs declare and
// register no metric instrument themselves: telemetry.NewVerbObserver is
// the OpenTelemetry implementation the daemon passes (see the "where
// metrics live" convention in package telemetry's doc). An Observer must
// be safe for concurrent use and should not allocate: Finished runs on
// every invocation, each throttled answer of a flood included.
type Observer interface {
	// Finished is called once per invocation, after its answer is
	// decided: verb ended in result, elapsed after it reached the verb
	// layer. ctx carries the invocation's span (sampled or not).
	Finished(ctx context.Context, verb vocab.Verb, result Result, elapsed time.Duration)
	// Unrecordable is called when an invocation changed the registry but
	// its outcome record could not be written (PostMintUnrecordable).
	Unrecordable(ctx context.Context, verb vocab.Verb)
	// Partial is called when the backend failed after changing, or
	// possibly changing, the registry (a *PartialError).
	Partial(ctx context.Context, verb vocab.Verb)
}

// NumResults is the number of results: Result values are 0 to
// NumResults-1.
const NumResults = numResults

// Possible reports whether verb can end in r (a mint never removes, a
// deregister never mints), so that an observer creates only real series.
func Possible(verb vocab.Verb, r Result) bool { return possible(verb, r) }

// nopObserver is the Observer of Deps without one.
type nopObserver struct{}

func (nopObserver) Finished(context.Context, vocab.Verb, Result, time.Duration) {}
func (nopObserver) Unrecordable(context.Context, vocab.Verb)                    {}
func (nopObserver) Partial(context.Context, vocab.Verb)                         {}

// instruments holds the verbs' tracer, with every span name and attribute
// precomputed, and the observer their measurements go to. Spans stay here:
// a span is the invocation's own, opened and closed around it, while the
// metric instruments are telemetry's.
type instruments struct {
	tracer trace.Tracer
	obs    Observer
	// refused counts the authorization refusals by verb and reason
	// (AuthorizationReasons' order), for AuthorizationRefusals.
	refused    [vocab.NumVerbs][len(AuthorizationReasons)]atomic.Uint64
	spanNames  [vocab.NumVerbs]string
	verbAttr   [vocab.NumVerbs]attribute.KeyValue
	startOpts  []trace.SpanStartOption
	resultAttr [numResults]attribute.KeyValue
}

// numSpanAttrs is the most attributes finish sets: verb, request id,
// result, registration id, refusal reason.
const numSpanAttrs = 5

// Span attribute keys.
const (
	AttrVerb           = attribute.Key("registrar.verb")
	AttrRequestID      = attribute.Key("registrar.request_id")
	AttrResult         = attribute.Key("registrar.result")
	AttrRegistrationID = attribute.Key("registrar.registration_id")
	AttrRefusalReason  = attribute.Key("registrar.refusal_reason")
)

func newInstruments(tp trace.TracerProvider, obs Observer) *instruments {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if obs == nil {
		obs = nopObserver{}
	}
	in := &instruments{tracer: tp.Tracer(ScopeName), obs: obs}
	in.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	for r := range numResults {
		in.resultAttr[r] = AttrResult.String(Result(r).String())
	}
	for v := range vocab.NumVerbs {
		verb := vocab.Verb(v)
		in.spanNames[v] = "registrar." + verb.String()
		in.verbAttr[v] = AttrVerb.String(verb.String())
	}
	return in
}

// possible reports whether verb can end in result (a mint never removes,
// a deregister never mints).
func possible(verb vocab.Verb, r Result) bool {
	switch r {
	case ResultFirstMint, ResultIdempotentRemint:
		return verb == vocab.Mint
	case ResultIdentityRemoved, ResultIdempotentAlreadyAbsent:
		return verb == vocab.Deregister
	}
	return true
}

// start opens the invocation's server span, a child of any trace context
// the transport extracted into ctx. Its attributes are all set at finish,
// in one call: each SetAttributes on a recording span grows its attribute
// slice, and a sampler or processor has no use for them at start.
func (in *instruments) start(ctx context.Context, verb vocab.Verb, _ string) (context.Context, trace.Span) {
	return in.tracer.Start(ctx, in.spanNames[verb], in.startOpts...)
}

// finish records the invocation's result on its span and in the metrics,
// and ends the span. A span that is not recording costs no attribute.
func (in *instruments) finish(ctx context.Context, inv *invocation, start time.Time, registrationID string, ok Result, err error) {
	result := ResultOf(ok, err)
	in.obs.Finished(ctx, inv.verb, result, time.Since(start))
	if result == ResultRefused {
		if r, ok := refusedError(err); ok {
			if i := authorizationIndex(r.Reason); i >= 0 {
				in.refused[inv.verb][i].Add(1)
			}
		}
	}
	span := inv.span
	if span.IsRecording() {
		buf := spanAttrPool.Get().(*[numSpanAttrs]attribute.KeyValue)
		a := append(buf[:0], in.verbAttr[inv.verb], AttrRequestID.String(inv.requestID), in.resultAttr[result])
		if registrationID != "" {
			a = append(a, AttrRegistrationID.String(registrationID))
		}
		if r, ok := refusedError(err); ok {
			a = append(a, AttrRefusalReason.String(r.Reason.String()))
		}
		span.SetAttributes(a...) // the span copies them
		*buf = [numSpanAttrs]attribute.KeyValue{}
		spanAttrPool.Put(buf)
		if result == ResultUnavailable {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// spanAttrPool holds the buffers finish builds a recording span's
// attributes in: passed to the span through an interface, a buffer on the
// stack would escape, one per call.
var spanAttrPool = sync.Pool{New: func() any { return new([numSpanAttrs]attribute.KeyValue) }}

// refusedError finds the *RefusedError in err, without errors.As on the
// verbs' own unwrapped errors.
func refusedError(err error) (*RefusedError, bool) {
	switch e := err.(type) {
	case nil, *ThrottledError, *UnavailableError:
		return nil, false
	case *RefusedError:
		return e, true
	}
	var r *RefusedError
	ok := errors.As(err, &r)
	return r, ok
}

func (in *instruments) noteUnrecordable(ctx context.Context, verb vocab.Verb) {
	in.obs.Unrecordable(ctx, verb)
}

func (in *instruments) notePartial(ctx context.Context, verb vocab.Verb) {
	in.obs.Partial(ctx, verb)
}

// AuthorizationReasons are the refusals of the caller policies, in the
// order AuthorizationRefusals counts them.
var AuthorizationReasons = [...]vocab.Reason{vocab.ReasonNoPolicy, vocab.ReasonOutOfScope, vocab.ReasonNotOwner, vocab.ReasonInstanceCeiling}

// authorizationIndex is r's index in AuthorizationReasons, or -1.
func authorizationIndex(r vocab.Reason) int {
	for i, a := range AuthorizationReasons {
		if a == r {
			return i
		}
	}
	return -1
}

// AuthorizationRefusals returns how many calls the caller policies refused
// since start, by verb and by reason (AuthorizationReasons' order): limited
// refusals, which wrote no record, included. For the
// registrar_authorization_refusals_total counter.
func (v *Verbs) AuthorizationRefusals() [vocab.NumVerbs][len(AuthorizationReasons)]uint64 {
	var out [vocab.NumVerbs][len(AuthorizationReasons)]uint64
	for verb := range out {
		for i := range out[verb] {
			out[verb][i] = v.tel.refused[verb][i].Load()
		}
	}
	return out
}
