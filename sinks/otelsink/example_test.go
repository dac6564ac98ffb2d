package otelsink_test

import (
	"context"
	"fmt"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The OTel sink wraps the counting sink: every event is counted in the
// bucket's own OTel counter under its caller policy and still reaches the
// counting sink; a shadow charge counts only in the shadow counter.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	counts := counting.New()
	sink, err := otelsink.New(counts, mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	sink.Limited(ctx, limiter.Event{Identity: "spiffe://example/a", Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 2})
	sink.Limited(ctx, limiter.Event{Identity: "spiffe://example/a", Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 3})
	sink.Limited(ctx, limiter.Event{Identity: "spiffe://example/b", Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, RetryAfterSeconds: 1, Policy: "agents"})
	sink.Limited(ctx, limiter.Event{Identity: "spiffe://example/b", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "agents", Shadow: true})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if dp.Value > 0 {
					fmt.Printf("%s{%s} %d\n", m.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value)
				}
			}
		}
	}
	fmt.Printf("counting sink: %+v\n", counts.Counts())
	// Unordered output:
	// registrar.limited.admission{policy=default,verb=mint} 2
	// registrar.limited.predecision_refusal{policy=agents,verb=deregister} 1
	// registrar.shadow_limited{bucket=admission,policy=agents,verb=mint} 1
	// counting sink: {PredecisionRefusal:1 Admission:2}
}
