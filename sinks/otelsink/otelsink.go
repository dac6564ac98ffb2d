package otelsink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
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

// Instrument names: one counter per bucket for limited invocations, and one
// counter for shadow charges (see the package doc for the Prometheus names
// they produce).
const (
	// PredecisionRefusalCounter is
	// registrar_limited_predecision_refusal_total{policy,verb}.
	PredecisionRefusalCounter = "registrar.limited.predecision_refusal"
	// AdmissionCounter is registrar_limited_admission_total{policy,verb}.
	AdmissionCounter = "registrar.limited.admission"
	// ShadowCounter is registrar_shadow_limited_total{policy,verb,bucket}.
	ShadowCounter = "registrar.shadow_limited"
)

// Metric attribute keys. The identity is never one.
const (
	LabelPolicy = "policy"
	LabelVerb   = "verb"
	LabelBucket = "bucket"
)

// EventName is the span event added for a limited invocation.
const EventName = "registrar.limited"

// ShadowEventName is the span event added for a shadow charge. It is a name
// of its own, never EventName: the call it is added to was answered as if
// the shadow did not exist.
const ShadowEventName = "registrar.shadow_limited"

// Span event attribute keys.
const (
	AttrLimitedBucket = attribute.Key("registrar.limited_bucket")
	AttrVerb          = attribute.Key("registrar.verb")
	AttrRetryAfter    = attribute.Key("registrar.retry_after_s")
	AttrPolicy        = attribute.Key("registrar.policy")
)

// DefaultPolicy is the policy label of an event whose Policy is "" or
// "default": the [registrar] sizes.
const DefaultPolicy = "default"

// MaxPolicies bounds the distinct policy label values the sink creates
// series for in a process's life, default and OtherPolicy included: twice
// the 1,024 policies issue 35 sizes the limiter for. The configuration
// bounds the policies in force at one time; reloads that rename policies
// can add names, and a series, once exported, is kept (a counter). Past the
// bound, events are counted under OtherPolicy, so a bug that put an
// unbounded value in Event.Policy costs a bounded number of series.
const MaxPolicies = 2048

// MaxSeriesPerCounter is the most series one of the sink's counters can
// have: the shadow counter's MaxPolicies × verbs × buckets (a limited
// counter has half). The OTel SDK folds the series past its cardinality
// limit (2,000 per instrument by default) into one overflow series, so the
// MeterProvider must allow at least this many (sdkmetric.WithCardinalityLimit;
// telemetry.New does).
const MaxSeriesPerCounter = MaxPolicies * int(vocab.NumVerbs) * int(vocab.NumBuckets)

// OtherPolicy is the policy label of the events of every policy name past
// MaxPolicies. Its parentheses keep it apart from any configured name.
const OtherPolicy = "(other)"

// counterSpec names and describes each bucket's counter, indexed by
// vocab.Bucket.
var counterSpec = [vocab.NumBuckets]struct{ name, description string }{
	vocab.PredecisionRefusal: {
		PredecisionRefusalCounter,
		"Invocations that failed a pre-derivation check while their caller's predecision_refusal bucket was empty: " +
			"no audit records were written, the caller still got its real, permanent refusal. " +
			"Counted per caller policy and verb; never summed with registrar.limited.admission.",
	},
	vocab.Admission: {
		AdmissionCounter,
		"Invocations that passed every pre-derivation check while their caller's admission bucket was empty: " +
			"throttled, answered RegistrarBusy with a retry-after, no audit records and no backend work. " +
			"Counted per caller policy and verb; never summed with registrar.limited.predecision_refusal.",
	},
}

const shadowDescription = "Shadow charges: calls that their caller policy's shadow (candidate) sizes would have limited, " +
	"per policy, verb and bucket. None of them was limited for that reason: their answers and records are what they " +
	"would be without the shadow. Never counted in registrar.limited.*."

// Sink counts limited invocations per bucket, caller policy and verb, and
// shadow charges per policy, verb and bucket, in OpenTelemetry counters,
// adds a span event to the invocation's recording span, and forwards
// every event to the sink it wraps.
//
// A Sink is safe for concurrent use. Its zero value is not usable; build it
// with New.
type Sink struct {
	next    limiter.Sink
	meter   metric.Meter
	limited [vocab.NumBuckets]metric.Int64Counter
	shadow  metric.Int64Counter

	// def is the default policy's series, the common case, looked up
	// without the map.
	def *policySeries
	// policies maps a policy label to its series. It is copied on write
	// under mu (a policy is added once in the process's life), so Limited
	// reads it without a lock.
	policies atomic.Pointer[map[string]*policySeries]
	mu       sync.Mutex
}

// policySeries is everything hoisted for one policy label: measurement
// options, deferred counters and span event options. Every field but
// shadowOn and lastAdmission is written once, before the series is
// published in Sink.policies.
type policySeries struct {
	name string
	// limited is the two limited counters' deferred increments; series
	// index: the verb.
	limited [vocab.NumBuckets]*deferredcount.Counter
	// shadow is the shadow counter's; series index: bucket*NumVerbs+verb.
	shadow *deferredcount.Counter
	// shadowOn: the shadow counter's series of this policy were created
	// at zero (DeclarePolicy with shadow, or the first shadow event).
	shadowOn atomic.Bool
	// limitedOpts and shadowOpts hold one hoisted option slice per
	// series: passing an existing slice to a variadic parameter allocates
	// nothing.
	limitedOpts [vocab.NumBuckets][vocab.NumVerbs][]metric.AddOption
	shadowOpts  [vocab.NumBuckets][vocab.NumVerbs][]metric.AddOption
	// eventAttrs holds a span event's constant attributes per (bucket,
	// verb); an admission event appends the retry-after.
	eventAttrs [vocab.NumBuckets][vocab.NumVerbs][3]attribute.KeyValue
	// refusalEvent and shadowEvent are whole, hoisted event option slices:
	// they have no per-event value.
	refusalEvent [vocab.NumVerbs][]trace.EventOption
	shadowEvent  [vocab.NumBuckets][vocab.NumVerbs][]trace.EventOption
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
// records through mp (nil means a no-op provider). It creates the three
// counters and adds zero to each series of the default policy's limited
// counters, so that they exist from the first collection; DeclarePolicy
// does the same for the configured policies.
func New(next limiter.Sink, mp metric.MeterProvider) (*Sink, error) {
	if next == nil {
		next = limiter.Discard
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(ScopeName)
	s := &Sink{next: next, meter: m}
	var errs []error
	for b := range vocab.NumBuckets {
		c, err := m.Int64Counter(counterSpec[b].name,
			metric.WithUnit("{invocation}"),
			metric.WithDescription(counterSpec[b].description))
		if err != nil {
			errs = append(errs, fmt.Errorf("otelsink: counter %s: %w", counterSpec[b].name, err))
			continue
		}
		s.limited[b] = c
	}
	c, err := m.Int64Counter(ShadowCounter, metric.WithUnit("{invocation}"), metric.WithDescription(shadowDescription))
	if err != nil {
		errs = append(errs, fmt.Errorf("otelsink: counter %s: %w", ShadowCounter, err))
	}
	s.shadow = c
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	empty := map[string]*policySeries{}
	s.policies.Store(&empty)
	if s.def, err = s.series(DefaultPolicy); err != nil {
		return nil, err
	}
	return s, nil
}

// DeclarePolicy creates the series of the caller policy name at zero, the
// shadow counter's too when shadow is set, so that a rate or increase over
// the policy's first limited invocation or shadow charge is not lost to a
// series appearing mid-window. The daemon declares every configured policy
// at start and on each reload; a policy never declared gets its series at
// its first event. Declaring again is harmless; a policy removed by a
// reload keeps its series (counters). It returns an error only if the
// meter refuses an instrument.
func (s *Sink) DeclarePolicy(name string, shadow bool) error {
	p, err := s.series(name)
	if err != nil {
		return err
	}
	if shadow {
		s.shadowSeries(p)
	}
	return nil
}

// label is the policy label of an event's policy name.
func label(name string) string {
	if name == "" {
		return DefaultPolicy
	}
	return name
}

// lookup returns the series of policy name, or nil when it has none yet.
func (s *Sink) lookup(name string) *policySeries {
	if name == "" || name == DefaultPolicy {
		return s.def
	}
	return (*s.policies.Load())[name]
}

// series returns the series of policy name, creating them (limited series
// at zero) on first use; past MaxPolicies, OtherPolicy's.
func (s *Sink) series(name string) (*policySeries, error) {
	name = label(name)
	if p := (*s.policies.Load())[name]; p != nil {
		return p, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.policies.Load()
	if p := old[name]; p != nil {
		return p, nil
	}
	if len(old) >= MaxPolicies-1 && name != OtherPolicy {
		// One slot is kept for OtherPolicy itself.
		if p := old[OtherPolicy]; p != nil {
			return p, nil
		}
		name = OtherPolicy
	}
	p, err := s.newSeries(name)
	if err != nil {
		return nil, err
	}
	next := make(map[string]*policySeries, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = p
	s.policies.Store(&next)
	return p, nil
}

// newSeries builds one policy's series and adds zero to its limited
// series. s.mu is held.
func (s *Sink) newSeries(name string) (*policySeries, error) {
	p := &policySeries{name: name}
	policy := attribute.String(LabelPolicy, name)
	var shadowOpts [][]metric.AddOption
	for b := range vocab.NumBuckets {
		bucket := vocab.Bucket(b).String()
		for v := range vocab.NumVerbs {
			verb := vocab.Verb(v).String()
			p.limitedOpts[b][v] = []metric.AddOption{
				metric.WithAttributeSet(attribute.NewSet(policy, attribute.String(LabelVerb, verb))),
			}
			p.shadowOpts[b][v] = []metric.AddOption{
				metric.WithAttributeSet(attribute.NewSet(policy, attribute.String(LabelVerb, verb), attribute.String(LabelBucket, bucket))),
			}
			shadowOpts = append(shadowOpts, p.shadowOpts[b][v])
			p.eventAttrs[b][v] = [3]attribute.KeyValue{AttrLimitedBucket.String(bucket), AttrVerb.String(verb), AttrPolicy.String(name)}
			p.shadowEvent[b][v] = []trace.EventOption{trace.WithAttributes(p.eventAttrs[b][v][:]...)}
			if vocab.Bucket(b) == vocab.PredecisionRefusal {
				p.refusalEvent[v] = []trace.EventOption{trace.WithAttributes(p.eventAttrs[b][v][:]...)}
			}
		}
		d, err := deferredcount.New(s.meter, s.limited[b], counterSpec[b].name+".deferred_flush", p.limitedOpts[b][:])
		if err != nil {
			return nil, fmt.Errorf("otelsink: counter %s: %w", counterSpec[b].name, err)
		}
		p.limited[b] = d
	}
	d, err := deferredcount.New(s.meter, s.shadow, ShadowCounter+".deferred_flush", shadowOpts)
	if err != nil {
		return nil, fmt.Errorf("otelsink: counter %s: %w", ShadowCounter, err)
	}
	p.shadow = d
	for b := range vocab.NumBuckets {
		for v := range vocab.NumVerbs {
			// Zero, without a span: creates the series, carries no exemplar.
			s.limited[b].Add(context.Background(), 0, p.limitedOpts[b][v]...)
		}
	}
	return p, nil
}

// shadowSeries creates p's shadow series at zero, once.
func (s *Sink) shadowSeries(p *policySeries) {
	if p.shadowOn.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.shadowOn.Load() {
		return
	}
	for b := range vocab.NumBuckets {
		for v := range vocab.NumVerbs {
			s.shadow.Add(context.Background(), 0, p.shadowOpts[b][v]...)
		}
	}
	p.shadowOn.Store(true)
}

// Limited counts ev, adds its span event to the span in ctx if it is
// recording, and forwards ev to the wrapped sink. A limited event counts in
// its bucket's counter under its policy; a shadow event (ev.Shadow) counts
// only in the shadow counter and adds the shadow span event, never the
// limited one. An event with an invalid bucket or verb is forwarded but
// neither counted nor annotated: it has no series to go to.
func (s *Sink) Limited(ctx context.Context, ev limiter.Event) {
	if ev.Bucket.Valid() && ev.Verb.Valid() {
		s.count(ctx, ev)
	}
	s.next.Limited(ctx, ev)
}

func (s *Sink) count(ctx context.Context, ev limiter.Event) {
	p := s.lookup(ev.Policy)
	if p == nil {
		var err error
		if p, err = s.series(ev.Policy); err != nil {
			return // the meter refused an instrument: nothing to count in
		}
	}
	if ev.Shadow {
		if !p.shadowOn.Load() {
			s.shadowSeries(p)
		}
		p.shadow.Add(ctx, int(ev.Bucket)*int(vocab.NumVerbs)+int(ev.Verb), 1)
	} else {
		p.limited[ev.Bucket].Add(ctx, int(ev.Verb), 1)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		p.annotate(span, ev)
	}
}

// annotate is kept out of Limited so that the non-recording path stays
// small. Its options are hoisted (see lastAdmission): what allocates is
// the SDK's AddEvent.
func (p *policySeries) annotate(span trace.Span, ev limiter.Event) {
	switch {
	case ev.Shadow:
		span.AddEvent(ShadowEventName, p.shadowEvent[ev.Bucket][ev.Verb]...)
	case ev.Bucket != vocab.Admission:
		span.AddEvent(EventName, p.refusalEvent[ev.Verb]...)
	default:
		span.AddEvent(EventName, p.admissionEvent(ev.Verb, ev.RetryAfterSeconds)...)
	}
}

func (p *policySeries) admissionEvent(verb vocab.Verb, retry uint64) []trace.EventOption {
	last := &p.lastAdmission[verb]
	if e := last.Load(); e != nil && e.retry == retry {
		return e.opts
	}
	value := retry
	if value > math.MaxInt64 {
		value = math.MaxInt64
	}
	base := p.eventAttrs[vocab.Admission][verb]
	e := &admissionEvent{retry: retry, opts: []trace.EventOption{
		trace.WithAttributes(base[0], base[1], base[2], AttrRetryAfter.Int64(int64(value))),
	}}
	last.Store(e)
	return e.opts
}
