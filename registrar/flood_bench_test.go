package registrar_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// BenchmarkFloodThrottledMint is the verb layer's share of a flood: a mint
// from one identity whose admission bucket is drained, answered throttled,
// on the production meter (trace-based exemplar filter, a reader) and a
// tracer that samples nothing, so every increment takes the deferred path
// of internal/deferredcount. daemon.BenchmarkFlood is the same flood over
// the socket.
func BenchmarkFloodThrottledMint(b *testing.B) {
	hs := telemetry.NewHistograms()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hs))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	v := instrumented(b, tp, mp, hs, limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}, registrartest.NewBackend(b))
	ctx := context.Background()
	req := goodMint()
	v.Mint(ctx, req) // drains the admission bucket
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Mint(ctx, req); err == nil {
				b.Error("mint admitted, want throttled")
				return
			}
		}
	})
}
