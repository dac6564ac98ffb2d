package telemetry_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

func TestCapacityGaugesExportTheCapsOfTheRunningCode(t *testing.T) {
	reader, mp := newReader(t)
	if err := telemetry.RegisterCapacity(mp, func() coalesce.Stats { return coalesce.Stats{Pending: 17, HandoffWaits: 3} }); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	for name, want := range map[string]map[string]int64{
		telemetry.LimiterCapacity:        {"pool=remote": limiter.MaxEntries, "pool=local": limiter.MaxLocalEntries},
		telemetry.CoalesceWindowCapacity: {"": coalesce.MaxOpenWindows},
		telemetry.CoalesceHandoffPending: {"": 17},
		telemetry.CoalesceHandoffWaits:   {"": 3},
	} {
		m, ok := got[name]
		if !ok {
			t.Fatalf("%s not collected", name)
		}
		if m.Description == "" || m.Unit == "" {
			t.Errorf("%s has no description or unit", name)
		}
		if p := points(t, m); !maps.Equal(p, want) {
			t.Errorf("%s: points %v, want %v", name, p, want)
		}
	}
	if err := telemetry.RegisterCapacity(nil, nil); err != nil {
		t.Fatalf("RegisterCapacity on a nil provider: %v", err)
	}
}

// The saturation alert joins registrar_limiter_entries with
// registrar_limiter_capacity on the pool label: each pool must have its
// series in both, and no series may lack the label.
func TestLimiterEntriesAndCapacityHaveTheSamePools(t *testing.T) {
	ex := exercise(t)
	body, _ := scrape(t, ex.tel.Handler(), "/metrics", "")
	families := parseText(t, body)
	pools := func(name string) []string {
		mf, ok := families[name]
		if !ok {
			t.Fatalf("%s not exposed", name)
		}
		var got []string
		for _, m := range mf.GetMetric() {
			pool := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "pool" {
					pool = lp.GetValue()
				}
			}
			got = append(got, pool)
		}
		slices.Sort(got)
		return got
	}
	want := []string{"local", "remote"}
	for _, name := range []string{"registrar_limiter_entries", "registrar_limiter_capacity"} {
		if got := pools(name); !slices.Equal(got, want) {
			t.Errorf("%s: pool label values %q, want %q", name, got, want)
		}
	}
}
