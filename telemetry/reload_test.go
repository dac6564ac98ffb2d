package telemetry_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/telemetry"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestReloadInstrumentsExportTheReloadStats(t *testing.T) {
	reader, mp := newReader(t)
	st := telemetry.ReloadStats{LastSuccessful: false, LastSuccessUnixSeconds: 1764590400.5, Successes: 2, Failures: 3}
	if err := telemetry.RegisterReload(mp, func() telemetry.ReloadStats { return st }); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	if p := points(t, got[telemetry.ConfigLastReloadSuccessful]); len(p) != 1 || p[""] != 0 {
		t.Fatalf("last_reload_successful points %v, want 0", p)
	}
	if p := points(t, got[telemetry.ConfigReloads]); len(p) != 2 || p["result=success"] != 2 || p["result=failure"] != 3 {
		t.Fatalf("reloads points %v, want success 2 and failure 3", p)
	}
	g, ok := got[telemetry.ConfigLastReloadSuccessTimestamp].Data.(metricdata.Gauge[float64])
	if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != st.LastSuccessUnixSeconds {
		t.Fatalf("timestamp %+v, want %v", got[telemetry.ConfigLastReloadSuccessTimestamp].Data, st.LastSuccessUnixSeconds)
	}
	if got[telemetry.ConfigLastReloadSuccessful].Description == "" {
		t.Errorf("%s has no description", telemetry.ConfigLastReloadSuccessful)
	}
	for _, name := range []string{telemetry.ConfigLastReloadSuccessTimestamp, telemetry.ConfigReloads} {
		if got[name].Description == "" || got[name].Unit == "" {
			t.Errorf("%s has no description or unit", name)
		}
	}
	st.LastSuccessful = true
	if p := points(t, collectAll(t, reader)[telemetry.ConfigLastReloadSuccessful]); p[""] != 1 {
		t.Fatalf("after a success: %v, want 1", p)
	}
}
