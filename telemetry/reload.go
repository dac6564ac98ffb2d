package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Configuration reload instruments, named after Prometheus's own
// prometheus_config_last_reload_successful and
// prometheus_config_last_reload_success_timestamp_seconds.
const (
	// registrar_config_last_reload_successful
	ConfigLastReloadSuccessful = "registrar.config.last_reload_successful"
	// registrar_config_last_reload_success_timestamp_seconds
	ConfigLastReloadSuccessTimestamp = "registrar.config.last_reload_success_timestamp"
	// registrar_config_reloads_total{result="success"|"failure"}
	ConfigReloads = "registrar.config.reloads"
)

// ReloadResults are the values of the result label of
// registrar_config_reloads_total, every one exported from the start.
var ReloadResults = []string{"success", "failure"}

// ReloadStats is what the daemon's reload path reports at each collection.
type ReloadStats struct {
	// LastSuccessful is false after a reload that was refused, true at
	// start and after one that applied.
	LastSuccessful bool
	// LastSuccessUnixSeconds is the wall-clock time of the last reload
	// that applied, or of the start, in seconds since the Unix epoch.
	LastSuccessUnixSeconds float64
	// Successes and Failures count reloads since start.
	Successes, Failures uint64
}

// RegisterReload registers, on mp (nil means a no-op provider):
//
//   - registrar.config.last_reload_successful (gauge, 0 or 1): 1 at start
//     and after a reload that applied; 0 after one refused (the old
//     configuration is still in force). RegistrarConfigReloadFailed fires on 0.
//   - registrar.config.last_reload_success_timestamp (gauge, s): when the
//     configuration in force was applied (start or reload); the dashboard
//     annotates each change of it.
//   - registrar.config.reloads (counter, {reload}, label result): reloads
//     by SIGHUP or registrar-otel reload, "success" or "failure".
//
// stats is called once per collection; nil observes a start without reloads.
func RegisterReload(mp metric.MeterProvider, stats func() ReloadStats) error {
	r := newRegistration(meterOf(mp), "RegisterReload")
	// No unit: "1" would make the exporter append _ratio to the name
	// Prometheus's own gauge has.
	ok := r.gauge(ConfigLastReloadSuccessful, "",
		"Whether the last configuration reload (SIGHUP or registrar-otel reload) applied: 1 yes (or no reload since start), "+
			"0 refused, the previous configuration still in force.")
	ts := r.floatGauge(ConfigLastReloadSuccessTimestamp, "s",
		"Unix time the configuration in force was applied: the start, or the last reload that applied.")
	n := r.counter(ConfigReloads, "{reload}",
		"Configuration reloads by result: success (applied whole) or failure (invalid, or a restart-only key changed: nothing applied).")
	success := attrs(attribute.String("result", ReloadResults[0]))
	failure := attrs(attribute.String("result", ReloadResults[1]))
	return r.observe(func(_ context.Context, o metric.Observer) error {
		s := ReloadStats{LastSuccessful: true}
		if stats != nil {
			s = stats()
		}
		o.ObserveInt64(ok, oneIf(s.LastSuccessful))
		o.ObserveFloat64(ts, s.LastSuccessUnixSeconds)
		o.ObserveInt64(n, toInt64(s.Successes), success...)
		o.ObserveInt64(n, toInt64(s.Failures), failure...)
		return nil
	})
}
