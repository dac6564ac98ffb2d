package otelsink_test

import (
	"context"
	"testing"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/vocab"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

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
	} {
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
