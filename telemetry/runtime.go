package telemetry

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/registrar-otel/registrar-otel/internal/buildinfo"
)

// BuildInfoMetric is the series that says which build is running:
// registrar_build_info{version,revision,goversion} 1, from
// internal/buildinfo (stamped by `make build`, the same values the
// `version` command prints and service.version carries).
const BuildInfoMetric = "registrar_build_info"

// registerProcessCollectors adds, to the daemon's private registry,
// registrar_build_info and the standard process_* (CPU, memory, file
// descriptors, start time) and go_* (goroutines, GC, memory) collectors of
// client_golang. They are Prometheus-only: OTLP carries the daemon's own
// instruments and the resource's service.version.
func registerProcessCollectors(reg *prometheus.Registry) error {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BuildInfoMetric,
		Help: "Always 1: the running build's version (git describe), revision (commit) and Go toolchain.",
		ConstLabels: prometheus.Labels{
			"version":   buildinfo.GetVersion(),
			"revision":  buildinfo.GetRevision(),
			"goversion": buildinfo.GoVersion(),
		},
	})
	info.Set(1)
	for _, c := range []prometheus.Collector{
		info,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("telemetry: registering the build and runtime collectors: %w", err)
		}
	}
	return nil
}
