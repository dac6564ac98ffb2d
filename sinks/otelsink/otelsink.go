package otelsink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/internal/deferredcount"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the sink's counters.
const ScopeName = "github.com/registrar-otel/registrar-otel/sinks/otelsink"

// Instrument names, one counter per bucket (see the package doc for the
// Prometheus names they produce).
const (
	PredecisionRefusalCounter = "registrar.limited.predecision_refusal"
	AdmissionCounter          = "registrar.limited.admission"
)

// EventName is the span event added for a limited invocation.
const EventName = "registrar.limited"

// Span event attribute keys.
const (
	AttrLimitedBucket = attribute.Key("registrar.limited_bucket")
	AttrVerb          = attribute.Key("registrar.verb")
	AttrRetryAfter    = attribute.Key("registrar.retry_after_s")
)

// counterSpec names and describes each bucket's counter, indexed by
// vocab.Bucket.
var counterSpec = [vocab.NumBuckets]struct{ name, description string }{
	vocab.PredecisionRefusal: {
		PredecisionRefusalCounter,
		"Invocations that failed a pre-derivation check while their caller's predecision_refusal bucket was empty: " +
			"no audit records were written, the caller still got its real, permanent refusal. " +
			"Counted per verb; never summed with registrar.limited.admission.",
	},
	vocab.Admission: {
		AdmissionCounter,
		"Invocations that passed every pre-derivation check while their caller's admission bucket was empty: " +
			"throttled, answered RegistrarBusy with a retry-after, no audit records and no backend work. " +
			"Counted per verb; never summed with registrar.limited.predecision_refusal.",
	},
}

// Sink counts limited invocations per bucket and verb in OpenTelemetry
// counters, adds a span event to the invocation's recording span, and
// forwards every event to the sink it wraps.
//
// A Sink is safe for concurrent use. Its zero value is not usable; build it
// with New.
type Sink struct {
	next     limiter.Sink
	counters [vocab.NumBuckets]metric.Int64Counter
	// deferred is counters for Limited: an increment from a context
	// without a sampled span is added at the next collection (it carries
	// no exemplar either way), one from a sampled span at once, with its
	// exemplar. Series index: the verb.
	deferred [vocab.NumBuckets]*deferredcount.Counter
	// addOpts holds one hoisted option slice per (bucket, verb): passing an
	// existing slice to a variadic parameter allocates nothing.
	addOpts [vocab.NumBuckets][vocab.NumVerbs][]metric.AddOption
	// eventAttrs holds the span event's constant attributes per (bucket,
	// verb); admission appends the retry-after.
	eventAttrs [vocab.NumBuckets][vocab.NumVerbs][2]attribute.KeyValue
	// refusalEvent is the whole, hoisted event option slice of a
	// predecision_refusal event per verb: it has no per-event value.
	refusalEvent [vocab.NumVerbs][]trace.EventOption
	// lastAdmission caches the whole event option slice of the last
	// admission event per verb. A flood against a drained bucket sees the
	// same retry-after again and again (the refill interval rounded up, or
	// a countdown changing once a second), so the event costs only the
	// SDK's own two allocations (its copy of the attributes and the span's
	// event list).
	lastAdmission [vocab.NumVerbs]atomic.Pointer[admissionEvent]
}

type admissionEvent struct {
	retry uint64
	opts  []trace.EventOption
}

var _ limiter.Sink = (*Sink)(nil)

// New returns a Sink that forwards to next (nil means limiter.Discard) and
// records through mp (nil means a no-op provider). It creates the two
// counters and adds zero to each (counter, verb) series so that all four
// exist from the first collection.
func New(next limiter.Sink, mp metric.MeterProvider) (*Sink, error) {
	if next == nil {
		next = limiter.Discard
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(ScopeName)
	s := &Sink{next: next}
	var errs []error
	for b := range vocab.NumBuckets {
		c, err := m.Int64Counter(counterSpec[b].name,
			metric.WithUnit("{invocation}"),
			metric.WithDescription(counterSpec[b].description))
		if err != nil {
			errs = append(errs, fmt.Errorf("otelsink: counter %s: %w", counterSpec[b].name, err))
			continue
		}
		s.counters[b] = c
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for b := range vocab.NumBuckets {
		bucket := vocab.Bucket(b).String()
		for v := range vocab.NumVerbs {
			verb := vocab.Verb(v).String()
			s.addOpts[b][v] = []metric.AddOption{
				metric.WithAttributeSet(attribute.NewSet(attribute.String("verb", verb))),
			}
			s.eventAttrs[b][v] = [2]attribute.KeyValue{AttrLimitedBucket.String(bucket), AttrVerb.String(verb)}
			if vocab.Bucket(b) == vocab.PredecisionRefusal {
				s.refusalEvent[v] = []trace.EventOption{trace.WithAttributes(s.eventAttrs[b][v][:]...)}
			}
			// Zero, without a span: creates the series, carries no exemplar.
			s.counters[b].Add(context.Background(), 0, s.addOpts[b][v]...)
		}
		d, err := deferredcount.New(m, s.counters[b], counterSpec[b].name+".deferred_flush", s.addOpts[b][:])
		if err != nil {
			return nil, fmt.Errorf("otelsink: counter %s: %w", counterSpec[b].name, err)
		}
		s.deferred[b] = d
	}
	return s, nil
}

// Limited counts ev, adds the registrar.limited event to the span in ctx if
// it is recording, and forwards ev to the wrapped sink. An event with an
// invalid bucket or verb is forwarded but neither counted nor annotated:
// it has no series to go to.
func (s *Sink) Limited(ctx context.Context, ev limiter.Event) {
	if ev.Bucket.Valid() && ev.Verb.Valid() {
		s.deferred[ev.Bucket].Add(ctx, int(ev.Verb), 1)
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			s.annotate(span, ev)
		}
	}
	s.next.Limited(ctx, ev)
}

// annotate is kept out of Limited so that the non-recording path stays
// small. Its options are hoisted (see lastAdmission): what allocates is
// the SDK's AddEvent.
func (s *Sink) annotate(span trace.Span, ev limiter.Event) {
	if ev.Bucket != vocab.Admission {
		span.AddEvent(EventName, s.refusalEvent[ev.Verb]...)
		return
	}
	span.AddEvent(EventName, s.admissionEvent(ev.Verb, ev.RetryAfterSeconds)...)
}

func (s *Sink) admissionEvent(verb vocab.Verb, retry uint64) []trace.EventOption {
	last := &s.lastAdmission[verb]
	if e := last.Load(); e != nil && e.retry == retry {
		return e.opts
	}
	value := retry
	if value > math.MaxInt64 {
		value = math.MaxInt64
	}
	base := s.eventAttrs[vocab.Admission][verb]
	e := &admissionEvent{retry: retry, opts: []trace.EventOption{
		trace.WithAttributes(base[0], base[1], AttrRetryAfter.Int64(int64(value))),
	}}
	last.Store(e)
	return e.opts
}
