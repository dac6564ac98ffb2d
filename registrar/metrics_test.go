package registrar_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// TestInvocationCountersAreExactSampledOrNot: registrar.invocations and
// registrar.limited.admission count every call, per verb and result, at
// every collection, whether the calls' spans are sampled (counted at once,
// with exemplars) or not (counted at the collection: see
// internal/deferredcount), and neither kind of call is counted twice.
func TestInvocationCountersAreExactSampledOrNot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{
		{"unsampled", sdktrace.NeverSample()},
		{"sampled", sdktrace.AlwaysSample()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			v := instrumented(t, tp, mp, limiter.Config{
				PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
				Admission:          limiter.BucketConfig{Burst: 2, RefillInterval: time.Hour},
			}, registrartest.NewBackend(t))
			type key struct{ name, verb, result string }
			collect := func() map[key]int64 {
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(context.Background(), &rm); err != nil {
					t.Fatal(err)
				}
				got := map[key]int64{}
				for _, sm := range rm.ScopeMetrics {
					for _, md := range sm.Metrics {
						switch data := md.Data.(type) {
						case metricdata.Sum[int64]:
							for _, dp := range data.DataPoints {
								verb, _ := dp.Attributes.Value("verb")
								result, _ := dp.Attributes.Value("result")
								got[key{md.Name, verb.AsString(), result.AsString()}] = dp.Value
							}
						case metricdata.Histogram[float64]:
							for _, dp := range data.DataPoints {
								verb, _ := dp.Attributes.Value("verb")
								result, _ := dp.Attributes.Value("result")
								got[key{md.Name, verb.AsString(), result.AsString()}] = int64(dp.Count)
							}
						}
					}
				}
				return got
			}
			ctx := context.Background()
			for range 7 { // first_mint, idempotent_remint, then 5 throttled
				v.Mint(ctx, goodMint())
			}
			want := map[key]int64{
				{"registrar.invocations", "mint", "first_mint"}:                1,
				{"registrar.invocations", "mint", "idempotent_remint"}:         1,
				{"registrar.invocations", "mint", "throttled"}:                 5,
				{"registrar.invocation.duration", "mint", "throttled"}:         5,
				{"registrar.limited.admission", "mint", ""}:                    5,
				{"registrar.limited.admission", "deregister", ""}:              0,
				{"registrar.invocations", "deregister", "throttled"}:           0,
				{"registrar.limited.predecision_refusal", "mint", ""}:          0,
				{"registrar.invocation.duration", "mint", "idempotent_remint"}: 1,
			}
			check := func(when string) {
				t.Helper()
				got := collect()
				for k, n := range want {
					if got[k] != n {
						t.Errorf("%s: %s{verb=%s,result=%s} = %d, want %d", when, k.name, k.verb, k.result, got[k], n)
					}
				}
			}
			check("first collection")
			check("second collection, no call between")
			v.Mint(ctx, goodMint())
			want[key{"registrar.invocations", "mint", "throttled"}]++
			want[key{"registrar.invocation.duration", "mint", "throttled"}]++
			want[key{"registrar.limited.admission", "mint", ""}]++
			check("after one more throttled call")
		})
	}
}
