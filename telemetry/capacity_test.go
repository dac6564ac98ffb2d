package telemetry_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func TestCapacityGaugesExportTheCapsOfTheRunningCode(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(t.Context()) })
	if err := telemetry.RegisterCapacity(mp, func() coalesce.Stats { return coalesce.Stats{Pending: 17, HandoffWaits: 3} }); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	for name, want := range map[string]int64{
		telemetry.LimiterCapacity:        limiter.MaxEntries,
		telemetry.CoalesceWindowCapacity: coalesce.MaxOpenWindows,
		telemetry.CoalesceHandoffPending: 17,
		telemetry.CoalesceHandoffWaits:   3,
	} {
		m, ok := got[name]
		if !ok {
			t.Fatalf("%s not collected", name)
		}
		if m.Description == "" || m.Unit == "" {
			t.Errorf("%s has no description or unit", name)
		}
		if p := points(t, m); len(p) != 1 || p[""] != want {
			t.Errorf("%s: points %v, want one of %d without attributes", name, p, want)
		}
	}
	if err := telemetry.RegisterCapacity(nil, nil); err != nil {
		t.Fatalf("RegisterCapacity on a nil provider: %v", err)
	}
}
