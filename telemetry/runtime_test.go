package telemetry_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/buildinfo"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

func TestRuntimeCollectorsAndBuildInfoAreExposed(t *testing.T) {
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	body, _ := scrape(t, tel.Handler(), "/metrics", "")
	families := parseText(t, body)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"} {
		if _, ok := families[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}
	mf, ok := families[telemetry.BuildInfoMetric]
	if !ok || len(mf.GetMetric()) != 1 {
		t.Fatalf("/metrics has no single %s series:\n%s", telemetry.BuildInfoMetric, body)
	}
	m := mf.GetMetric()[0]
	labels := map[string]string{}
	for _, lp := range m.GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	want := map[string]string{"version": buildinfo.GetVersion(), "revision": buildinfo.GetRevision(), "goversion": buildinfo.GoVersion()}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("%s{%s=%q}, want %q", telemetry.BuildInfoMetric, k, labels[k], v)
		}
	}
	if len(labels) != len(want) {
		t.Errorf("%s labels %v, want exactly version, revision, goversion", telemetry.BuildInfoMetric, labels)
	}
	if g := m.GetGauge().GetValue(); g != 1 {
		t.Errorf("%s = %v, want 1", telemetry.BuildInfoMetric, g)
	}
}
