package otelsink_test

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// newReader returns a MeterProvider with a ManualReader attached.
func newReader(t testing.TB) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	// The daemon's limit (telemetry.New): every series the sink may make.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r), sdkmetric.WithCardinalityLimit(otelsink.MaxSeriesPerCounter+1))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, r
}

// collect returns name → series → value for every int64 sum in r, and the
// collected metrics themselves. A limited counter's series is
// "policy/verb"; the shadow counter's "policy/verb/bucket".
func collect(t *testing.T, r *sdkmetric.ManualReader) (map[string]map[string]int64, []metricdata.Metrics) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	got := map[string]map[string]int64{}
	var all []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			all = append(all, m)
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s: data is %T, want metricdata.Sum[int64]", m.Name, m.Data)
			}
			if !sum.IsMonotonic {
				t.Errorf("%s: not monotonic, want a counter", m.Name)
			}
			keys := []attribute.Key{otelsink.LabelPolicy, otelsink.LabelVerb}
			if m.Name == otelsink.ShadowCounter {
				keys = append(keys, otelsink.LabelBucket)
			}
			got[m.Name] = map[string]int64{}
			for _, dp := range sum.DataPoints {
				if dp.Attributes.Len() != len(keys) {
					t.Errorf("%s: attributes %v, want exactly %v", m.Name, dp.Attributes.ToSlice(), keys)
				}
				var series []string
				for _, k := range keys {
					v, ok := dp.Attributes.Value(k)
					if !ok {
						t.Fatalf("%s: data point without a %s attribute: %v", m.Name, k, dp.Attributes.ToSlice())
					}
					series = append(series, v.AsString())
				}
				got[m.Name][strings.Join(series, "/")] = dp.Value
			}
		}
	}
	return got, all
}

var counterOf = [vocab.NumBuckets]string{
	vocab.PredecisionRefusal: otelsink.PredecisionRefusalCounter,
	vocab.Admission:          otelsink.AdmissionCounter,
}

func TestLimitedEventsMoveOnlyTheirBucketsCounterPerVerb(t *testing.T) {
	for b := range vocab.NumBuckets {
		bucket := vocab.Bucket(b)
		t.Run(bucket.String(), func(t *testing.T) {
			mp, r := newReader(t)
			counts := counting.New()
			s, err := otelsink.New(counts, mp)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx := context.Background()
			for range 3 {
				s.Limited(ctx, limiter.Event{Identity: "spiffe://a", Verb: vocab.Mint, Bucket: bucket, RetryAfterSeconds: 2})
			}
			s.Limited(ctx, limiter.Event{Identity: "spiffe://b", Verb: vocab.Deregister, Bucket: bucket, RetryAfterSeconds: 1})

			got, _ := collect(t, r)
			other := counterOf[1-b]
			want := map[string]map[string]int64{
				counterOf[b]: {"default/mint": 3, "default/deregister": 1},
				other:        {"default/mint": 0, "default/deregister": 0},
			}
			for name, byVerb := range want {
				for verb, n := range byVerb {
					if g := got[name][verb]; g != n {
						t.Errorf("%s{verb=%q} = %d, want %d", name, verb, g, n)
					}
				}
			}
			if len(got) != 2 || len(got[counterOf[b]]) != 2 || len(got[other]) != 2 {
				t.Errorf("got counters %v, want exactly the two per-bucket counters, the default policy's two verbs each", got)
			}
			if n := counts.Count(bucket); n != 4 {
				t.Errorf("counting sink saw %d events on %s, want 4 (every event forwarded)", n, bucket)
			}
			if n := counts.Count(vocab.Bucket(1 - b)); n != 0 {
				t.Errorf("counting sink saw %d events on the other bucket, want 0", n)
			}
		})
	}
}

func TestNewExportsEveryVerbSeriesAtZero(t *testing.T) {
	mp, r := newReader(t)
	if _, err := otelsink.New(nil, mp); err != nil {
		t.Fatalf("New: %v", err)
	}
	got, _ := collect(t, r)
	for _, name := range counterOf {
		for _, verb := range []string{"default/mint", "default/deregister"} {
			v, ok := got[name][verb]
			if !ok || v != 0 {
				t.Errorf("%s{verb=%q} = %d (present %v), want 0 and present", name, verb, v, ok)
			}
		}
	}
}

func TestCountersHaveUnitAndDescription(t *testing.T) {
	mp, r := newReader(t)
	s, err := otelsink.New(nil, mp)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.DeclarePolicy("agents", true); err != nil {
		t.Fatalf("DeclarePolicy: %v", err)
	}
	_, all := collect(t, r)
	seen := map[string]bool{}
	for _, m := range all {
		seen[m.Name] = true
		if m.Unit != "{invocation}" {
			t.Errorf("%s: unit %q, want {invocation}", m.Name, m.Unit)
		}
		if m.Description == "" {
			t.Errorf("%s: empty description", m.Name)
		}
	}
	for _, name := range append(counterOf[:], otelsink.ShadowCounter) {
		if !seen[name] {
			t.Errorf("instrument %s not collected", name)
		}
	}
}

func TestInvalidEventsAreForwardedButNotCounted(t *testing.T) {
	mp, r := newReader(t)
	var fwd recordingSink
	s, err := otelsink.New(&fwd, mp)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.Limited(context.Background(), limiter.Event{Verb: vocab.Mint, Bucket: vocab.Bucket(7)})
	s.Limited(context.Background(), limiter.Event{Verb: vocab.Verb(9), Bucket: vocab.Admission})
	if fwd.n != 2 {
		t.Errorf("forwarded %d events, want 2", fwd.n)
	}
	got, _ := collect(t, r)
	for name, byVerb := range got {
		for verb, v := range byVerb {
			if v != 0 {
				t.Errorf("%s{verb=%q} = %d, want 0", name, verb, v)
			}
		}
	}
}

func TestNilNextAndNilProviderWork(t *testing.T) {
	s, err := otelsink.New(nil, nil)
	if err != nil {
		t.Fatalf("New(nil, nil): %v", err)
	}
	s.Limited(context.Background(), limiter.Event{Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 1})
}

type recordingSink struct{ n int }

func (r *recordingSink) Limited(context.Context, limiter.Event) { r.n++ }

func TestSpanEvent(t *testing.T) {
	tests := []struct {
		name      string
		ev        limiter.Event
		wantEvent string // "" means otelsink.EventName
		wantAttrs map[attribute.Key]attribute.Value
	}{
		{
			name: "admission carries bucket, verb and retry-after",
			ev:   limiter.Event{Identity: "spiffe://a", Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 7},
			wantAttrs: map[attribute.Key]attribute.Value{
				otelsink.AttrLimitedBucket: attribute.StringValue("admission"),
				otelsink.AttrVerb:          attribute.StringValue("mint"),
				otelsink.AttrPolicy:        attribute.StringValue("default"),
				otelsink.AttrRetryAfter:    attribute.Int64Value(7),
			},
		},
		{
			name: "admission names its policy",
			ev:   limiter.Event{Identity: "spiffe://a", Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 2, Policy: "control-plane"},
			wantAttrs: map[attribute.Key]attribute.Value{
				otelsink.AttrLimitedBucket: attribute.StringValue("admission"),
				otelsink.AttrVerb:          attribute.StringValue("mint"),
				otelsink.AttrPolicy:        attribute.StringValue("control-plane"),
				otelsink.AttrRetryAfter:    attribute.Int64Value(2),
			},
		},
		{
			name:      "a shadow charge is its own event, with bucket, verb and policy",
			ev:        limiter.Event{Identity: "spiffe://a", Verb: vocab.Deregister, Bucket: vocab.Admission, RetryAfterSeconds: 4, Policy: "agents", Shadow: true},
			wantEvent: otelsink.ShadowEventName,
			wantAttrs: map[attribute.Key]attribute.Value{
				otelsink.AttrLimitedBucket: attribute.StringValue("admission"),
				otelsink.AttrVerb:          attribute.StringValue("deregister"),
				otelsink.AttrPolicy:        attribute.StringValue("agents"),
			},
		},
		{
			name: "predecision_refusal carries no retry-after",
			ev:   limiter.Event{Identity: "spiffe://a", Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, RetryAfterSeconds: 3},
			wantAttrs: map[attribute.Key]attribute.Value{
				otelsink.AttrLimitedBucket: attribute.StringValue("predecision_refusal"),
				otelsink.AttrVerb:          attribute.StringValue("deregister"),
				otelsink.AttrPolicy:        attribute.StringValue("default"),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			s, err := otelsink.New(nil, nil)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx, span := tp.Tracer("test").Start(context.Background(), "registrar.mint")
			s.Limited(ctx, tc.ev)
			span.End()

			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("got %d ended spans, want 1", len(ended))
			}
			events := ended[0].Events()
			if len(events) != 1 {
				t.Fatalf("got %d span events, want 1", len(events))
			}
			wantEvent := cmp.Or(tc.wantEvent, otelsink.EventName)
			if events[0].Name != wantEvent {
				t.Errorf("event name %q, want %q", events[0].Name, wantEvent)
			}
			got := map[attribute.Key]attribute.Value{}
			for _, kv := range events[0].Attributes {
				got[kv.Key] = kv.Value
			}
			if len(got) != len(tc.wantAttrs) {
				t.Errorf("event attributes %v, want %v", got, tc.wantAttrs)
			}
			for k, want := range tc.wantAttrs {
				if g, ok := got[k]; !ok || g != want {
					t.Errorf("attribute %s = %v (present %v), want %v", k, g.String(), ok, want.String())
				}
			}
		})
	}
}

// spySpan is a non-recording span that counts the events added to it.
type spySpan struct {
	trace.Span
	events int
}

func (s *spySpan) IsRecording() bool                     { return false }
func (s *spySpan) AddEvent(string, ...trace.EventOption) { s.events++ }

func TestNonRecordingSpanGetsNoEvent(t *testing.T) {
	s, err := otelsink.New(nil, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	spy := &spySpan{Span: tracenoop.Span{}}
	ctx := trace.ContextWithSpan(context.Background(), spy)
	for b := range vocab.NumBuckets {
		s.Limited(ctx, limiter.Event{Verb: vocab.Mint, Bucket: vocab.Bucket(b), RetryAfterSeconds: 1})
	}
	if spy.events != 0 {
		t.Errorf("non-recording span got %d events, want 0", spy.events)
	}

	// And a real SDK span that is not sampled records nothing either.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.NeverSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "registrar.mint")
	s.Limited(ctx, limiter.Event{Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 1})
	span.End()
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("unsampled span was recorded (%d spans), want none", n)
	}
}

// TestAdmissionEventCacheFollowsRetryAfter: the hoisted admission event is
// reused only for the same verb and retry-after; each event carries its own
// values whatever came before (a countdown, a change of verb, back again).
func TestAdmissionEventCacheFollowsRetryAfter(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s, err := otelsink.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		verb  vocab.Verb
		retry uint64
	}
	seq := []want{{vocab.Mint, 3}, {vocab.Mint, 3}, {vocab.Mint, 2}, {vocab.Deregister, 2}, {vocab.Mint, 3}, {vocab.Mint, 1 << 63}, {vocab.Mint, 1}}
	for _, w := range seq {
		ctx, span := tp.Tracer("test").Start(context.Background(), "registrar.mint")
		s.Limited(ctx, limiter.Event{Verb: w.verb, Bucket: vocab.Admission, RetryAfterSeconds: w.retry})
		span.End()
	}
	ended := rec.Ended()
	if len(ended) != len(seq) {
		t.Fatalf("%d spans, want %d", len(ended), len(seq))
	}
	for i, sp := range ended {
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Events()[0].Attributes {
			got[kv.Key] = kv.Value
		}
		retry := int64(min(seq[i].retry, 1<<63-1))
		if got[otelsink.AttrRetryAfter] != attribute.Int64Value(retry) || got[otelsink.AttrVerb] != attribute.StringValue(seq[i].verb.String()) {
			t.Errorf("event %d: %v, want verb %s retry %d", i, got, seq[i].verb, retry)
		}
	}
}

// benchSink builds the sink on a real SDK MeterProvider (ManualReader),
// so the figures include the SDK's aggregation, not a no-op.
func benchSink(b *testing.B, next limiter.Sink) *otelsink.Sink {
	b.Helper()
	mp, _ := newReader(b)
	s, err := otelsink.New(next, mp)
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	return s
}

// spanContext returns a context carrying a span from a tracer provider with
// the given sampler.
func spanContext(b *testing.B, sampler sdktrace.Sampler) context.Context {
	b.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("bench").Start(context.Background(), "registrar.mint")
	b.Cleanup(func() { span.End() })
	return ctx
}

var benchEvent = limiter.Event{Identity: "spiffe://bench", Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 2}

// BenchmarkCountingPeer is the peer the others are read against: the
// counting sink alone.
func BenchmarkCountingPeer(b *testing.B) {
	s := counting.New()
	ctx := spanContext(b, sdktrace.NeverSample())
	limitedLoop(b, s, ctx, benchEvent)
}

func BenchmarkLimitedNonRecordingSpan(b *testing.B) {
	s := benchSink(b, nil)
	ctx := spanContext(b, sdktrace.NeverSample())
	limitedLoop(b, s, ctx, benchEvent)
}

func BenchmarkLimitedNonRecordingSpanParallel(b *testing.B) {
	s := benchSink(b, nil)
	ctx := spanContext(b, sdktrace.NeverSample())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Limited(ctx, benchEvent)
		}
	})
}

// BenchmarkLimitedRecordingSpan adds the span event and, the span being
// sampled, offers the measurement to the exemplar reservoir. The span keeps
// at most the SDK's event limit (128) events; the rest are counted as
// dropped, which is the steady state of a long benchmark.
func BenchmarkLimitedRecordingSpan(b *testing.B) {
	s := benchSink(b, nil)
	ctx := spanContext(b, sdktrace.AlwaysSample())
	limitedLoop(b, s, ctx, benchEvent)
}

// BenchmarkLimitedRecordingSpanRefusal is a predecision_refusal event on a
// recording span: its event option is hoisted whole, so the allocations
// left are the SDK's own (the event and exemplar storage).
func BenchmarkLimitedRecordingSpanRefusal(b *testing.B) {
	s := benchSink(b, nil)
	ctx := spanContext(b, sdktrace.AlwaysSample())
	ev := benchEvent
	ev.Bucket, ev.RetryAfterSeconds = vocab.PredecisionRefusal, 0
	limitedLoop(b, s, ctx, ev)
}

func BenchmarkChainOtelsinkCounting(b *testing.B) {
	s := benchSink(b, counting.New())
	ctx := spanContext(b, sdktrace.NeverSample())
	limitedLoop(b, s, ctx, benchEvent)
}

func TestLimitedDoesNotAllocateWithANonRecordingSpan(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count in -short mode skipped")
	}
	mp, _ := newReader(t)
	s, err := otelsink.New(counting.New(), mp)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "registrar.mint")
	defer span.End()
	for _, ev := range []limiter.Event{
		benchEvent,
		{Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, RetryAfterSeconds: 1},
		{Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 1, Policy: "control-plane"},
		{Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 1, Policy: "agents", Shadow: true},
	} {
		s.Limited(ctx, ev) // a policy's series are built at its first event
		if n := testing.AllocsPerRun(1000, func() { s.Limited(ctx, ev) }); n != 0 {
			t.Errorf("Limited(%s, %s) allocates %v times per call, want 0", ev.Verb, ev.Bucket, n)
		}
	}
}

// limitedLoop times s.Limited(ctx, ev), allocations reported.
func limitedLoop(b *testing.B, s limiter.Sink, ctx context.Context, ev limiter.Event) {
	b.ReportAllocs()
	for b.Loop() {
		s.Limited(ctx, ev)
	}
}

// TestPolicyLabelsTheLimitedCounters: each policy counts in its own
// series; an event naming no policy is the default policy's.
func TestPolicyLabelsTheLimitedCounters(t *testing.T) {
	mp, r := newReader(t)
	s, err := otelsink.New(nil, mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ev := range []limiter.Event{
		{Identity: "a", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "control-plane"},
		{Identity: "b", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "control-plane"},
		{Identity: "c", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "default"},
		{Identity: "d", Verb: vocab.Mint, Bucket: vocab.Admission},
		{Identity: "e", Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, Policy: "agents"},
	} {
		s.Limited(ctx, ev)
	}
	got, _ := collect(t, r)
	want := map[string]map[string]int64{
		otelsink.AdmissionCounter: {
			"default/mint": 2, "default/deregister": 0,
			"control-plane/mint": 2, "control-plane/deregister": 0,
			"agents/mint": 0, "agents/deregister": 0,
		},
		otelsink.PredecisionRefusalCounter: {
			"default/mint": 0, "default/deregister": 0,
			"control-plane/mint": 0, "control-plane/deregister": 0,
			"agents/mint": 0, "agents/deregister": 1,
		},
	}
	for name, series := range want {
		if len(got[name]) != len(series) {
			t.Errorf("%s: series %v, want %v", name, got[name], series)
		}
		for k, n := range series {
			if g, ok := got[name][k]; !ok || g != n {
				t.Errorf("%s{%s} = %d (present %v), want %d", name, k, g, ok, n)
			}
		}
	}
	if _, ok := got[otelsink.ShadowCounter]; ok {
		t.Errorf("shadow counter has series %v without a shadow event or declaration", got[otelsink.ShadowCounter])
	}
}

// TestShadowEventsCountOnlyInTheShadowCounter: a shadow charge moves the
// shadow counter of its (policy, verb, bucket) and no limited counter, and
// still reaches the wrapped sink (which, being the counting sink, ignores
// it).
func TestShadowEventsCountOnlyInTheShadowCounter(t *testing.T) {
	mp, r := newReader(t)
	counts := counting.New()
	var fwd recordingSink
	s, err := otelsink.New(limiterFanout{counts, &fwd}, mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		s.Limited(ctx, limiter.Event{Identity: "a", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "agents", Shadow: true})
	}
	s.Limited(ctx, limiter.Event{Identity: "a", Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, Policy: "agents", Shadow: true})
	got, _ := collect(t, r)
	wantShadow := map[string]int64{
		"agents/mint/admission": 3, "agents/deregister/predecision_refusal": 1,
		"agents/mint/predecision_refusal": 0, "agents/deregister/admission": 0,
	}
	if len(got[otelsink.ShadowCounter]) != len(wantShadow) {
		t.Errorf("shadow series %v, want %v", got[otelsink.ShadowCounter], wantShadow)
	}
	for k, n := range wantShadow {
		if g := got[otelsink.ShadowCounter][k]; g != n {
			t.Errorf("%s{%s} = %d, want %d", otelsink.ShadowCounter, k, g, n)
		}
	}
	for _, name := range counterOf {
		for k, v := range got[name] {
			if v != 0 {
				t.Errorf("%s{%s} = %d after shadow events only, want 0", name, k, v)
			}
		}
	}
	if fwd.n != 4 {
		t.Errorf("forwarded %d events, want 4", fwd.n)
	}
	if c := counts.Counts(); c.Admission != 0 || c.PredecisionRefusal != 0 {
		t.Errorf("counting sink %+v after shadow events only, want zeros", c)
	}
}

type limiterFanout []limiter.Sink

func (f limiterFanout) Limited(ctx context.Context, ev limiter.Event) {
	for _, s := range f {
		s.Limited(ctx, ev)
	}
}

// TestDeclarePolicyCreatesItsSeriesAtZero: a declared policy's limited
// series, and its shadow series when it has a shadow, exist before its
// first event; declaring twice changes nothing.
func TestDeclarePolicyCreatesItsSeriesAtZero(t *testing.T) {
	mp, r := newReader(t)
	s, err := otelsink.New(nil, mp)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.DeclarePolicy("control-plane", false); err != nil {
			t.Fatal(err)
		}
		if err := s.DeclarePolicy("agents", true); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := collect(t, r)
	for _, name := range counterOf {
		if n := len(got[name]); n != 6 {
			t.Errorf("%s: %d series %v, want 6 (three policies, two verbs)", name, n, got[name])
		}
		for _, k := range []string{"default/mint", "control-plane/deregister", "agents/mint"} {
			if v, ok := got[name][k]; !ok || v != 0 {
				t.Errorf("%s{%s} = %d (present %v), want 0", name, k, v, ok)
			}
		}
	}
	if n := len(got[otelsink.ShadowCounter]); n != 4 {
		t.Errorf("shadow series %v, want the four of agents only", got[otelsink.ShadowCounter])
	}
	for k := range got[otelsink.ShadowCounter] {
		if !strings.HasPrefix(k, "agents/") {
			t.Errorf("shadow series %s of a policy declared without a shadow", k)
		}
	}
}

// TestPolicyLabelsAreBounded: however many distinct names reach the sink,
// it creates at most MaxPolicies policy label values, and counts the rest
// under OtherPolicy.
func TestPolicyLabelsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds MaxPolicies policies' series")
	}
	mp, r := newReader(t)
	s, err := otelsink.New(nil, mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const extra = 10
	for i := range otelsink.MaxPolicies + extra {
		s.Limited(ctx, limiter.Event{Verb: vocab.Mint, Bucket: vocab.Admission, Policy: fmt.Sprintf("p%05d", i)})
	}
	got, _ := collect(t, r)
	policies := map[string]bool{}
	for k := range got[otelsink.AdmissionCounter] {
		policy, _, _ := strings.Cut(k, "/")
		policies[policy] = true
	}
	if len(policies) != otelsink.MaxPolicies {
		t.Errorf("%d policy label values, want MaxPolicies = %d", len(policies), otelsink.MaxPolicies)
	}
	// default and OtherPolicy take two slots: the first MaxPolicies-2
	// names have their own series, the remaining 12 share OtherPolicy's.
	if v := got[otelsink.AdmissionCounter][otelsink.OtherPolicy+"/mint"]; v != extra+2 {
		t.Errorf("%s{%s/mint} = %d, want %d", otelsink.AdmissionCounter, otelsink.OtherPolicy, v, extra+2)
	}
	if v := got[otelsink.AdmissionCounter]["p00000/mint"]; v != 1 {
		t.Errorf("the first policy's series = %d, want 1", v)
	}
}
