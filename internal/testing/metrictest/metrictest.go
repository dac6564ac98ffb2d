// Package metrictest reads back what an OpenTelemetry ManualReader
// collected, as one map of data points a test compares with what it wants.
// It is test support: production code never imports it
// (cmd/registrar-otel's deptest holds that).
package metrictest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Point is one collected series: its instrumentation scope, its instrument
// and its attribute set, encoded as Attrs encodes it.
type Point struct {
	Scope, Name string
	Attrs       string
}

// Collect collects once from reader and returns every int64 sum's value
// and every float64 histogram's count, by point. A collection error fails
// the test.
func Collect(t testing.TB, reader *sdkmetric.ManualReader) map[Point]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[Point]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch data := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					got[Point{sm.Scope.Name, md.Name, dp.Attributes.Encoded(attribute.DefaultEncoder())}] = dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					got[Point{sm.Scope.Name, md.Name, dp.Attributes.Encoded(attribute.DefaultEncoder())}] = int64(dp.Count)
				}
			}
		}
	}
	return got
}

// Attrs encodes the attribute set of string pairs kv ("verb", "mint", …)
// as Collect encodes a data point's, whatever their order.
func Attrs(kv ...string) string {
	a := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		a = append(a, attribute.String(kv[i], kv[i+1]))
	}
	set := attribute.NewSet(a...)
	return set.Encoded(attribute.DefaultEncoder())
}

// At is the point of instrument name in scope with the attributes kv.
func At(scope, name string, kv ...string) Point {
	return Point{Scope: scope, Name: name, Attrs: Attrs(kv...)}
}
