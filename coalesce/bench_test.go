package coalesce_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/cputime"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkProductionChain is one limited event through the production
// sink chain, coalesce → otelsink (real SDK meter provider) → counting,
// with no span in the context, counted into an open window. It is not the
// default configuration (there every invocation's span records): see
// BenchmarkProductionChainDefaultConfig.
func BenchmarkProductionChain(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	for _, tc := range []struct {
		name string
		keys int
	}{
		{"one-key", 1},
		{"64-keys", 64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o, err := otelsink.New(counting.New(), mp)
			if err != nil {
				b.Fatal(err)
			}
			s, err := coalesce.New(coalesce.Options{Next: o, Store: &audittest.AuditLog{}, Window: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			evs := make([]limiter.Event, tc.keys)
			for i := range evs {
				evs[i] = limiter.Event{Identity: "unix-peer:uid=" + strconv.Itoa(1000+i), Verb: limiter.Verb(i % 2), Bucket: limiter.Admission, RetryAfterSeconds: 1}
			}
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				s.Limited(ctx, evs[i])
				if i++; i == len(evs) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkProductionChainDefaultConfig is one limited event through the
// production sink chain at the default configuration: the daemon's own
// providers from telemetry.New with the embedded defaults
// (trace_sample_per_million 10000, parent-based; the Prometheus exporter;
// exemplars from sampled spans), coalesce → otelsink → counting into an
// open window.
//
// Each event lands on a fresh span of its own, as a throttled invocation's
// does (one event per span): the spans are started and ended in batches
// with the timer stopped, so the figure is the event alone.
//
//   - span=default-untraced: the span of a caller that sends no trace
//     context (an anonymous flood), sampled at the default ratio: what a
//     limited event costs at the default configuration;
//   - span=recording: the span of a caller that sends a sampled
//     traceparent (a bring-up wave): recorded at any ratio;
//   - span=recording-sdk-AddEvent-only: the SDK's AddEvent alone on such a
//     span, the floor of the recording case;
//   - span=non-recording: the same chain with the span never sampled.
func BenchmarkProductionChainDefaultConfig(b *testing.B) {
	ctx := context.Background()
	tel, err := telemetry.New(ctx, config.Default().Telemetry, telemetry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	// The floor of the recording case: the SDK's AddEvent alone, with the
	// same attributes hoisted, no sink chain.
	sdkOnly := []trace.EventOption{trace.WithAttributes(otelsink.AttrLimitedBucket.String("admission"),
		otelsink.AttrVerb.String("mint"), otelsink.AttrRetryAfter.Int64(1))}
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"span=default-untraced", tel.TracerProvider()},
		{"span=recording", tel.TracerProvider()},
		{"span=recording-sdk-AddEvent-only", tel.TracerProvider()},
		{"span=non-recording", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))},
	} {
		// A bring-up wave's calls carry a sampled traceparent: their spans
		// are children of a remote sampled parent.
		parent := ctx
		if strings.HasPrefix(tc.name, "span=recording") {
			parent = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
				SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
				TraceFlags: trace.FlagsSampled,
				Remote:     true,
			}))
		}
		for _, bucket := range []limiter.Bucket{limiter.Admission, limiter.PredecisionRefusal} {
			b.Run(tc.name+"/bucket="+bucket.String(), func(b *testing.B) {
				o, err := otelsink.New(counting.New(), tel.MeterProvider())
				if err != nil {
					b.Fatal(err)
				}
				s, err := coalesce.New(coalesce.Options{Next: o, Store: &audittest.AuditLog{}, Window: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				ev := limiter.Event{Identity: "unix-peer:uid=1000", Verb: limiter.Mint, Bucket: bucket, RetryAfterSeconds: 1}
				tracer := tc.tp.Tracer("bench")
				const batch = 4096
				var (
					ctxs  [batch]context.Context
					spans [batch]trace.Span
				)
				refill := func() {
					for i := range spans {
						if spans[i] != nil {
							spans[i].End()
						}
						ctxs[i], spans[i] = tracer.Start(parent, "registrar.mint", trace.WithSpanKind(trace.SpanKindServer))
					}
				}
				refill()
				recorded := 0
				for _, sp := range spans {
					if sp.IsRecording() {
						recorded++
					}
				}
				switch {
				case strings.HasPrefix(tc.name, "span=recording") && recorded != batch,
					tc.name == "span=non-recording" && recorded != 0,
					tc.name == "span=default-untraced" && recorded > batch/10: // 1 in 100 expected
					b.Fatalf("%s: %d of %d spans recording", tc.name, recorded, batch)
				}
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration // within the timed sections only
				t0 := cputime.Now()
				for i := 0; i < b.N; i++ {
					j := i % batch
					if j == 0 && i > 0 {
						b.StopTimer()
						cpu += cputime.Now() - t0
						refill()
						t0 = cputime.Now()
						b.StartTimer()
					}
					if tc.name == "span=recording-sdk-AddEvent-only" {
						spans[j].AddEvent(otelsink.EventName, sdkOnly...)
					} else {
						s.Limited(ctxs[j], ev)
					}
				}
				b.StopTimer()
				cpu += cputime.Now() - t0
				if cputime.Available() {
					b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				}
				for _, sp := range spans {
					sp.End()
				}
			})
		}
	}
}
