package telemetry_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func fakeAuditCapacity() audit.Capacity {
	return audit.Capacity{State: audit.CapacityLow, FreeBytes: 100 << 20, StoreBytes: 40 << 20, BudgetBytes: 136 << 20, ReserveBytes: 256 << 20, HeldFiles: 3}
}

func fakeStoreStats() audit.StoreStats {
	var s audit.StoreStats
	s.Reopens[audit.ReopenFileRenamed] = 2
	s.Reopens[audit.ReopenSIGHUP] = 5
	s.RotatedRecords, s.RetentionFailures = 7, 1
	return s
}

func TestAuditStoreInstrumentsReportTheLastProbeAndEveryStateAndCause(t *testing.T) {
	reader, mp := newReader(t)
	capacity := fakeAuditCapacity()
	if err := telemetry.RegisterAuditStore(mp, func() audit.Capacity { return capacity }, fakeStoreStats); err != nil {
		t.Fatal(err)
	}
	if err := telemetry.RegisterAuditStore(mp, nil, fakeStoreStats); err == nil {
		t.Error("a nil capacity func was accepted")
	}
	got := collectAll(t, reader)
	gaugeValue := func(name string) int64 {
		t.Helper()
		g, ok := got[name].Data.(metricdata.Gauge[int64])
		if !ok || len(g.DataPoints) != 1 {
			t.Fatalf("%s: %+v, want one gauge point", name, got[name].Data)
		}
		if got[name].Description == "" || got[name].Unit != "By" {
			t.Errorf("%s: unit %q, description %q", name, got[name].Unit, got[name].Description)
		}
		return g.DataPoints[0].Value
	}
	if v := gaugeValue(telemetry.AuditStoreFreeBytes); v != 100<<20 {
		t.Errorf("free bytes %d", v)
	}
	if v := gaugeValue(telemetry.AuditStoreBytes); v != 40<<20 {
		t.Errorf("store bytes %d", v)
	}
	if v := gaugeValue(telemetry.AuditStoreBudgetBytes); v != 136<<20 {
		t.Errorf("budget bytes %d", v)
	}
	states, ok := got[telemetry.AuditStoreState].Data.(metricdata.Gauge[int64])
	if !ok || len(states.DataPoints) != audit.NumCapacityStates {
		t.Fatalf("state: %+v, want one series per state", got[telemetry.AuditStoreState].Data)
	}
	for _, dp := range states.DataPoints {
		s, _ := dp.Attributes.Value("state")
		want := int64(0)
		if s.AsString() == "low" {
			want = 1
		}
		if dp.Value != want {
			t.Errorf("state{state=%q} = %d, want %d", s.AsString(), dp.Value, want)
		}
	}
	if g, ok := got[telemetry.AuditStoreHeldFiles].Data.(metricdata.Gauge[int64]); !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 3 || got[telemetry.AuditStoreHeldFiles].Description == "" {
		t.Errorf("held files: %+v, want one point of 3", got[telemetry.AuditStoreHeldFiles].Data)
	}
	for name, want := range map[string]int64{telemetry.AuditRetentionDeleted: 7, telemetry.AuditRetentionFailures: 1} {
		if s, ok := got[name].Data.(metricdata.Sum[int64]); !ok || !s.IsMonotonic || len(s.DataPoints) != 1 || s.DataPoints[0].Value != want || got[name].Description == "" {
			t.Errorf("%s: %+v, want a counter at %d", name, got[name].Data, want)
		}
	}
	reopens, ok := got[telemetry.AuditFileReopened].Data.(metricdata.Sum[int64])
	if !ok || !reopens.IsMonotonic || len(reopens.DataPoints) != audit.NumReopenCauses {
		t.Fatalf("reopened: %+v, want a counter with every cause", got[telemetry.AuditFileReopened].Data)
	}
	for _, dp := range reopens.DataPoints {
		c, _ := dp.Attributes.Value("cause")
		want := map[string]int64{"renamed": 2, "sighup": 5}[c.AsString()]
		if dp.Value != want {
			t.Errorf("reopened{cause=%q} = %d, want %d", c.AsString(), dp.Value, want)
		}
	}
}
