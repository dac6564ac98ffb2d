package telemetry_test

import (
	"testing"
	"time"

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
	s.Seal = audit.SealStats{Sealed: true, Chained: true, Epoch: 42, LastSeal: time.Unix(1_800_000_000, 500e6), KeyFileFailures: 2}
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

// TestSealInstrumentsAreObservedOnlyForAChainedStore: a sealed store's
// epoch, last seal and key file failures; none for a store never sealed.
func TestSealInstrumentsAreObservedOnlyForAChainedStore(t *testing.T) {
	reader, mp := newReader(t)
	if err := telemetry.RegisterAuditStore(mp, fakeAuditCapacity, fakeStoreStats); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	if g, ok := got[telemetry.AuditSealEpoch].Data.(metricdata.Gauge[int64]); !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 42 || got[telemetry.AuditSealEpoch].Description == "" {
		t.Errorf("epoch: %+v, want one point of 42", got[telemetry.AuditSealEpoch].Data)
	}
	if g, ok := got[telemetry.AuditSealLastSeal].Data.(metricdata.Gauge[float64]); !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 1_800_000_000.5 || got[telemetry.AuditSealLastSeal].Unit != "s" {
		t.Errorf("last seal: %+v, want one point of 1800000000.5 s", got[telemetry.AuditSealLastSeal].Data)
	}
	if s, ok := got[telemetry.AuditSealKeyFileFailures].Data.(metricdata.Sum[int64]); !ok || !s.IsMonotonic || len(s.DataPoints) != 1 || s.DataPoints[0].Value != 2 {
		t.Errorf("key file failures: %+v, want a counter at 2", got[telemetry.AuditSealKeyFileFailures].Data)
	}

	reader, mp = newReader(t)
	unsealed := func() audit.StoreStats { s := fakeStoreStats(); s.Seal = audit.SealStats{}; return s }
	if err := telemetry.RegisterAuditStore(mp, fakeAuditCapacity, unsealed); err != nil {
		t.Fatal(err)
	}
	got = collectAll(t, reader)
	for _, name := range []string{telemetry.AuditSealEpoch, telemetry.AuditSealLastSeal, telemetry.AuditSealKeyFileFailures} {
		if m, ok := got[name]; ok && m.Data != nil {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				ok = len(d.DataPoints) > 0
			case metricdata.Gauge[float64]:
				ok = len(d.DataPoints) > 0
			case metricdata.Sum[int64]:
				ok = len(d.DataPoints) > 0
			}
			if ok {
				t.Errorf("%s observed for a store never sealed: %+v", name, m.Data)
			}
		}
	}
}
