package telemetry

import (
	"context"
	"fmt"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/deferredcount"
	"github.com/registrar-otel/registrar-otel/internal/exacthist"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// OTel instrument names of the verbs.
const (
	// registrar_invocations_total{verb,result}
	RegistrarInvocations = "registrar.invocations"
	// registrar_invocation_duration_seconds{verb,result} (histogram)
	RegistrarInvocationDuration = "registrar.invocation.duration"
	// registrar_outcome_unrecordable_total{verb}
	RegistrarOutcomeUnrecordable = "registrar.outcome.unrecordable"
	// registrar_backend_partial_total{verb}
	RegistrarBackendPartial = "registrar.backend.partial"

	// registrarInvocationsFlush hangs the collection-time flush of the
	// deferred invocation increments (internal/deferredcount); it is
	// never observed, so it is in no exposition.
	registrarInvocationsFlush = "registrar.invocations.deferred_flush"
)

const attrResult = "result"

// registrarDurationBuckets are in seconds: an admitted invocation costs
// two fsynced appends plus backend work, so the interesting range is
// 100 µs to a few s.
var registrarDurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// verbObserver is the registrar.Observer NewVerbObserver returns.
type verbObserver struct {
	invocations metric.Int64Counter
	// invocationsDeferred is invocations for the calls: an unsampled
	// call's increment is added at the next collection.
	invocationsDeferred *deferredcount.Counter
	// duration is an exact histogram (Histograms) with one series per
	// verb and result, index verb*NumResults+result.
	duration     *exacthist.Histogram
	unrecordable metric.Int64Counter
	partial      metric.Int64Counter
	// The option slices handed to the variadic SDK calls, hoisted: an
	// existing slice passed on costs nothing, a fresh one is an allocation
	// per call.
	addByVerb [vocab.NumVerbs][]metric.AddOption
}

var _ registrar.Observer = (*verbObserver)(nil)

// NewVerbObserver returns the registrar.Observer recording the verbs'
// metrics on mp (nil means a no-op provider) and hs (nil means no reader
// sees the duration histogram), in the instrumentation scope
// registrar.ScopeName (the verbs' spans' scope):
//
//   - registrar.invocations{verb,result} (counter, {invocation}): every
//     invocation, by its registrar.Result;
//   - registrar.invocation.duration{verb,result} (histogram, s): arrival at
//     the verb layer to answer;
//   - registrar.outcome.unrecordable{verb} (counter, {invocation}):
//     registry changed, outcome record not written;
//   - registrar.backend.partial{verb} (counter, {invocation}): the backend
//     failed after changing, or possibly changing, the registry.
//
// Every attribute set is precomputed, and the increments of invocations
// whose span is not sampled are summed and added at each collection
// (internal/deferredcount), so a throttled answer costs no SDK Add. The
// duration histogram is no SDK instrument either but one of hs's
// (Histograms): an observation is an atomic add, and one made in a
// sampled span is kept as its bucket's exemplar, as the SDK's histogram
// did under the daemon's trace-based exemplar filter. Every
// counter series the verbs can produce exists from the first scrape, at
// zero. The observer is safe for concurrent use and does not allocate.
func NewVerbObserver(mp metric.MeterProvider, hs *Histograms) (registrar.Observer, error) {
	m := scopedMeter(mp, registrar.ScopeName)
	r := newRegistration(m, "NewVerbObserver")
	o := &verbObserver{
		invocations: r.syncCounter(RegistrarInvocations, "{invocation}",
			"Verb invocations by verb and result (first_mint, idempotent_remint, identity_removed, idempotent_already_absent, refused, throttled, unavailable)."),
		unrecordable: r.syncCounter(RegistrarOutcomeUnrecordable, "{invocation}",
			"Invocations that changed the registry but whose outcome record could not be written (answered PostMintUnrecordable)."),
		partial: r.syncCounter(RegistrarBackendPartial, "{invocation}",
			"Invocations whose backend failed after changing, or possibly changing, the registry (answered BackendUnavailable; a retry of the same request converges)."),
	}
	if err := r.err(); err != nil {
		return nil, err
	}
	series := make([][]metric.AddOption, 0, vocab.NumVerbs*registrar.NumResults)
	sets := make([]attribute.Set, 0, vocab.NumVerbs*registrar.NumResults)
	for v := range vocab.NumVerbs {
		verb := attribute.String(attrVerb, vocab.Verb(v).String())
		o.addByVerb[v] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(verb))}
		for r := range registrar.NumResults {
			set := attribute.NewSet(verb, attribute.String(attrResult, registrar.Result(r).String()))
			series = append(series, []metric.AddOption{metric.WithAttributeSet(set)})
			sets = append(sets, set)
		}
	}
	var err error
	if o.invocationsDeferred, err = deferredcount.New(m, o.invocations, registrarInvocationsFlush, series); err != nil {
		return nil, fmt.Errorf("telemetry: NewVerbObserver: %w", err)
	}
	if o.duration, err = hs.add(registrar.ScopeName, RegistrarInvocationDuration, "s",
		"Time from an invocation's arrival at the verb layer to its answer, by verb and result.", registrarDurationBuckets, sets); err != nil {
		return nil, fmt.Errorf("telemetry: NewVerbObserver: %w", err)
	}
	// Every counter series exists from the first scrape, at zero: rate()
	// and increase() then see the first event, and a throttle ratio has
	// its denominator from the start.
	ctx := context.Background()
	for v := range vocab.NumVerbs {
		o.unrecordable.Add(ctx, 0, o.addByVerb[v]...)
		for r := range registrar.NumResults {
			if registrar.Possible(vocab.Verb(v), registrar.Result(r)) {
				o.invocations.Add(ctx, 0, series[v*registrar.NumResults+r]...)
			}
		}
	}
	for v := range vocab.NumVerbs {
		o.partial.Add(ctx, 0, o.addByVerb[v]...)
	}
	return o, nil
}

// Finished implements registrar.Observer.
func (o *verbObserver) Finished(ctx context.Context, verb vocab.Verb, result registrar.Result, elapsed time.Duration) {
	if uint(verb) >= uint(vocab.NumVerbs) || uint(result) >= uint(registrar.NumResults) {
		return
	}
	i := int(verb)*registrar.NumResults + int(result)
	o.invocationsDeferred.Add(ctx, i, 1)
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		o.duration.ObserveExemplar(i, elapsed, sc, time.Now())
		return
	}
	o.duration.Observe(i, elapsed)
}

// Unrecordable implements registrar.Observer.
func (o *verbObserver) Unrecordable(ctx context.Context, verb vocab.Verb) {
	if uint(verb) < uint(vocab.NumVerbs) {
		o.unrecordable.Add(ctx, 1, o.addByVerb[verb]...)
	}
}

// Partial implements registrar.Observer.
func (o *verbObserver) Partial(ctx context.Context, verb vocab.Verb) {
	if uint(verb) < uint(vocab.NumVerbs) {
		o.partial.Add(ctx, 1, o.addByVerb[verb]...)
	}
}
