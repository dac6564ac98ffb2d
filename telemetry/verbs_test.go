package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// point is one collected data point: its scope, instrument and attributes,
// and its value (a histogram's count).
type point struct {
	scope, name string
	attrs       string // the attribute set, encoded: "k=v,k=v"
}

func collectPoints(t *testing.T, reader *sdkmetric.ManualReader) map[point]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[point]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch data := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					got[point{sm.Scope.Name, md.Name, dp.Attributes.Encoded(attribute.DefaultEncoder())}] = dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					got[point{sm.Scope.Name, md.Name, dp.Attributes.Encoded(attribute.DefaultEncoder())}] = int64(dp.Count)
				}
			}
		}
	}
	return got
}

func attrSet(kv ...string) string {
	var a []attribute.KeyValue
	for i := 0; i < len(kv); i += 2 {
		a = append(a, attribute.String(kv[i], kv[i+1]))
	}
	set := attribute.NewSet(a...)
	return set.Encoded(attribute.DefaultEncoder())
}

func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reader, mp
}

// newObserver is the observer build makes on mp; t fails if build does.
func newObserver[O any](t *testing.T, mp metric.MeterProvider, build func(metric.MeterProvider) (O, error)) O {
	t.Helper()
	o, err := build(mp)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The verb observer counts invocations by verb and result (the unsampled
// ones at collection, exactly), times them, and counts unrecordable and
// partial invocations by verb, in the registrar's scope; the counters'
// series exist at zero from the start.
func TestVerbObserverCountsByVerbAndResult(t *testing.T) {
	reader, mp := newReader(t)
	o := newObserver(t, mp, telemetry.NewVerbObserver)
	got := collectPoints(t, reader)
	for _, p := range []point{
		{registrar.ScopeName, telemetry.RegistrarBackendPartial, attrSet("verb", "mint")},
		{registrar.ScopeName, telemetry.RegistrarBackendPartial, attrSet("verb", "deregister")},
		{registrar.ScopeName, telemetry.RegistrarOutcomeUnrecordable, attrSet("verb", "deregister")},
		{registrar.ScopeName, telemetry.RegistrarInvocations, attrSet("verb", "mint", "result", "throttled")},
		{registrar.ScopeName, telemetry.RegistrarInvocations, attrSet("verb", "deregister", "result", "identity_removed")},
	} {
		if v, ok := got[p]; !ok || v != 0 {
			t.Errorf("before any call, %s{%s} = %d (present %v), want 0", p.name, p.attrs, v, ok)
		}
	}
	if _, ok := got[point{registrar.ScopeName, telemetry.RegistrarInvocations, attrSet("verb", "mint", "result", "identity_removed")}]; ok {
		t.Errorf("a mint identity_removed series exists: a mint never removes")
	}
	ctx := context.Background()
	for range 3 {
		o.Finished(ctx, vocab.Mint, registrar.ResultThrottled, time.Millisecond)
	}
	o.Finished(ctx, vocab.Deregister, registrar.ResultIdentityRemoved, time.Millisecond)
	o.Finished(ctx, vocab.Mint, registrar.Result(registrar.NumResults), time.Millisecond)
	o.Unrecordable(ctx, vocab.Deregister)
	o.Partial(ctx, vocab.Mint)
	o.Partial(ctx, vocab.Mint)
	got = collectPoints(t, reader)
	for _, tc := range []struct {
		p    point
		want int64
	}{
		{point{registrar.ScopeName, telemetry.RegistrarInvocations, attrSet("verb", "mint", "result", "throttled")}, 3},
		{point{registrar.ScopeName, telemetry.RegistrarInvocationDuration, attrSet("verb", "mint", "result", "throttled")}, 3},
		{point{registrar.ScopeName, telemetry.RegistrarInvocations, attrSet("verb", "deregister", "result", "identity_removed")}, 1},
		{point{registrar.ScopeName, telemetry.RegistrarOutcomeUnrecordable, attrSet("verb", "deregister")}, 1},
		{point{registrar.ScopeName, telemetry.RegistrarOutcomeUnrecordable, attrSet("verb", "mint")}, 0},
		{point{registrar.ScopeName, telemetry.RegistrarBackendPartial, attrSet("verb", "mint")}, 2},
		{point{registrar.ScopeName, telemetry.RegistrarBackendPartial, attrSet("verb", "deregister")}, 0},
	} {
		if v, ok := got[tc.p]; !ok || v != tc.want {
			t.Errorf("%s{%s} = %d (present %v), want %d", tc.p.name, tc.p.attrs, v, ok, tc.want)
		}
	}
}

// A nil provider gives observers that record nothing and do not fail.
func TestObserversOnANilProviderAreNoOps(t *testing.T) {
	v, err := telemetry.NewVerbObserver(nil)
	if err != nil {
		t.Fatal(err)
	}
	v.Finished(context.Background(), vocab.Mint, registrar.ResultFirstMint, time.Millisecond)
	b, err := telemetry.NewOpenBaoObserver(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Failed(context.Background(), openbao.OpBindingRead, openbao.KindTimeout)
}
