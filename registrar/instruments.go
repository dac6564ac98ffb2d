package registrar

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/deferredcount"
	"github.com/registrar-otel/registrar-otel/limiter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the verbs' spans and metrics.
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
func (r Result) String() string {
	switch r {
	case ResultFirstMint:
		return "first_mint"
	case ResultIdempotentRemint:
		return "idempotent_remint"
	case ResultIdentityRemoved:
		return "identity_removed"
	case ResultIdempotentAlreadyAbsent:
		return "idempotent_already_absent"
	case ResultRefused:
		return "refused"
	case ResultThrottled:
		return "throttled"
	case ResultUnavailable:
		return "unavailable"
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

// instruments holds the verbs' tracer and metric instruments, with every
// attribute set precomputed: recording costs no allocation for attributes.
type instruments struct {
	tracer      trace.Tracer
	invocations metric.Int64Counter
	// invocationsDeferred is invocations for the calls: an unsampled
	// call's increment is added at the next collection.
	invocationsDeferred *deferredcount.Counter
	duration            metric.Float64Histogram
	unrecordable        metric.Int64Counter
	byResult            [limiter.NumVerbs][numResults]metric.MeasurementOption
	byVerb              [limiter.NumVerbs]metric.MeasurementOption
	spanNames           [limiter.NumVerbs]string
	verbAttr            [limiter.NumVerbs]attribute.KeyValue
	// The option slices handed to the variadic SDK calls, hoisted: an
	// existing slice passed on costs nothing, a fresh one is an allocation
	// per call.
	addByResult    [limiter.NumVerbs][numResults][]metric.AddOption
	recordByResult [limiter.NumVerbs][numResults][]metric.RecordOption
	addByVerb      [limiter.NumVerbs][]metric.AddOption
	startOpts      []trace.SpanStartOption
	resultAttr     [numResults]attribute.KeyValue
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

// durationBuckets are in seconds: an admitted invocation costs two fsynced
// appends plus backend work, so the interesting range is 100 µs to a few s.
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) (*instruments, error) {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(ScopeName)
	in := &instruments{tracer: tp.Tracer(ScopeName)}
	var errs [3]error
	in.invocations, errs[0] = m.Int64Counter("registrar.invocations",
		metric.WithUnit("{invocation}"),
		metric.WithDescription("Verb invocations by verb and result (first_mint, idempotent_remint, identity_removed, idempotent_already_absent, refused, throttled, unavailable)."))
	in.duration, errs[1] = m.Float64Histogram("registrar.invocation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time from an invocation's arrival at the verb layer to its answer, by verb and result."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.unrecordable, errs[2] = m.Int64Counter("registrar.outcome.unrecordable",
		metric.WithUnit("{invocation}"),
		metric.WithDescription("Invocations that changed the registry but whose outcome record could not be written (answered PostMintUnrecordable)."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	in.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	for r := range numResults {
		in.resultAttr[r] = AttrResult.String(Result(r).String())
	}
	for v := range limiter.NumVerbs {
		verb := limiter.Verb(v)
		in.spanNames[v] = "registrar." + verb.String()
		in.verbAttr[v] = AttrVerb.String(verb.String())
		in.byVerb[v] = metric.WithAttributeSet(attribute.NewSet(attribute.String("verb", verb.String())))
		in.addByVerb[v] = []metric.AddOption{in.byVerb[v]}
		for r := range numResults {
			in.byResult[v][r] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("verb", verb.String()),
				attribute.String("result", Result(r).String()),
			))
			in.addByResult[v][r] = []metric.AddOption{in.byResult[v][r]}
			in.recordByResult[v][r] = []metric.RecordOption{in.byResult[v][r]}
		}
	}
	// The flood path's increments: those of unsampled calls are summed
	// and added at each collection (see internal/deferredcount).
	series := make([][]metric.AddOption, 0, limiter.NumVerbs*numResults)
	for v := range limiter.NumVerbs {
		for r := range numResults {
			series = append(series, in.addByResult[v][r])
		}
	}
	var err error
	if in.invocationsDeferred, err = deferredcount.New(m, in.invocations, "registrar.invocations.deferred_flush", series); err != nil {
		return nil, err
	}
	// Every counter series exists from the first scrape, at zero: rate()
	// and increase() then see the first event, and a throttle ratio has
	// its denominator from the start.
	ctx := context.Background()
	for v := range limiter.NumVerbs {
		in.unrecordable.Add(ctx, 0, in.addByVerb[v]...)
		for r := range numResults {
			if possible(limiter.Verb(v), Result(r)) {
				in.invocations.Add(ctx, 0, in.addByResult[v][r]...)
			}
		}
	}
	return in, nil
}

// possible reports whether verb can end in result (a mint never removes,
// a deregister never mints), so only real series are created up front.
func possible(verb limiter.Verb, r Result) bool {
	switch r {
	case ResultFirstMint, ResultIdempotentRemint:
		return verb == limiter.Mint
	case ResultIdentityRemoved, ResultIdempotentAlreadyAbsent:
		return verb == limiter.Deregister
	}
	return true
}

// start opens the invocation's server span, a child of any trace context
// the transport extracted into ctx. Its attributes are all set at finish,
// in one call: each SetAttributes on a recording span grows its attribute
// slice, and a sampler or processor has no use for them at start.
func (in *instruments) start(ctx context.Context, verb limiter.Verb, _ string) (context.Context, trace.Span) {
	return in.tracer.Start(ctx, in.spanNames[verb], in.startOpts...)
}

// finish records the invocation's result on its span and in the metrics,
// and ends the span. A span that is not recording costs no attribute.
func (in *instruments) finish(ctx context.Context, inv *invocation, start time.Time, registrationID string, ok Result, err error) {
	result := ResultOf(ok, err)
	elapsed := time.Since(start).Seconds()
	in.invocationsDeferred.Add(ctx, int(inv.verb)*numResults+int(result), 1)
	in.duration.Record(ctx, elapsed, in.recordByResult[inv.verb][result]...)
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

func (in *instruments) noteUnrecordable(ctx context.Context, verb limiter.Verb) {
	in.unrecordable.Add(ctx, 1, in.addByVerb[verb]...)
}
