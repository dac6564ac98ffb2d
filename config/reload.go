package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Reload classes: whether a changed key can be put in force by a reload
// (SIGHUP or registrar-otel reload) or needs a restart.
const (
	// Live keys are applied by a reload.
	Live = "live"
	// RestartOnly keys need a restart; a reload that changes one applies
	// nothing.
	RestartOnly = "restart"
)

// Change is one key whose value differs between two configurations. Old
// and New are the values as a log line may show them: secrets redacted.
type Change struct {
	Key      string
	Old, New string
	// Live reports that a reload applies the change (ReloadClass Live).
	Live bool
}

// reloadKey is a key's reload class and how its value is shown.
type reloadKey struct {
	key  string
	live bool
	show func(*Config) string
}

func u32s(v uint32) string { return fmt.Sprint(v) }

// reloadKeys classifies every key of Keys, in documentation order; the
// test TestEveryKeyHasAReloadClass keeps it complete, and the reload
// column of docs/en/configuration.md repeats it (TestReloadColumnMatchesTheCode).
// Live: what the daemon re-expresses or swaps in place (the limiter's
// sizes, the coalescing window for new windows, the capacity reserve, the
// components, the log level). Everything else opens a listener, a file or
// an exporter at start, or sizes something allocated then.
var reloadKeys = []reloadKey{
	{"registrar.socket_path", false, func(c *Config) string { return c.Registrar.SocketPath }},
	{"registrar.socket_group", false, func(c *Config) string { return c.Registrar.SocketGroup }},
	{"registrar.tls_listen", false, func(c *Config) string { return c.Registrar.TLSListen }},
	{"registrar.tls_cert_file", false, func(c *Config) string { return c.Registrar.TLSCertFile }},
	{"registrar.tls_key_file", false, func(c *Config) string { return c.Registrar.TLSKeyFile }},
	{"registrar.tls_client_ca_file", false, func(c *Config) string { return c.Registrar.TLSClientCAFile }},
	{"registrar.state_dir", false, func(c *Config) string { return c.Registrar.StateDir }},
	{"registrar.audit_record_dir", false, func(c *Config) string { return c.Registrar.AuditRecordDir }},
	{"registrar.audit_max_file_bytes", false, func(c *Config) string { return fmt.Sprint(c.Registrar.AuditMaxFileBytes) }},
	{"registrar.audit_max_retained_files", false, func(c *Config) string { return u32s(c.Registrar.AuditMaxRetainedFiles) }},
	{"registrar.audit_store_reserve_bytes", true, func(c *Config) string { return fmt.Sprint(c.Registrar.AuditStoreReserveBytes) }},
	{"registrar.rate_limit_admission_burst", true, func(c *Config) string { return u32s(c.Registrar.RateLimitAdmissionBurst) }},
	{"registrar.rate_limit_admission_refill_interval_ms", true, func(c *Config) string { return u32s(c.Registrar.RateLimitAdmissionRefillIntervalMS) }},
	{"registrar.rate_limit_predecision_refusal_burst", true, func(c *Config) string { return u32s(c.Registrar.RateLimitPredecisionRefusalBurst) }},
	{"registrar.rate_limit_predecision_refusal_refill_interval_ms", true, func(c *Config) string {
		return u32s(c.Registrar.RateLimitPredecisionRefusalRefillIntervalMS)
	}},
	{"registrar.rate_limit_coalesce_window_seconds", true, func(c *Config) string { return u32s(c.Registrar.RateLimitCoalesceWindowSeconds) }},
	{"registrar.maintenance_interval_ms", false, func(c *Config) string { return u32s(c.Registrar.MaintenanceIntervalMS) }},
	{"registrar.max_wrap_ttl_seconds", false, func(c *Config) string { return u32s(c.Registrar.MaxWrapTTLSeconds) }},
	{"registrar.components.<name>.multiplicity", true, func(c *Config) string { return showComponents(c.Registrar.Components) }},
	{"registrar.unix_max_conns", false, func(c *Config) string { return u32s(c.Registrar.UnixMaxConns) }},
	{"registrar.tls_max_conns", false, func(c *Config) string { return u32s(c.Registrar.TLSMaxConns) }},
	{"registrar.tls_handshake_max_conns", false, func(c *Config) string { return u32s(c.Registrar.TLSHandshakeMaxConns) }},
	{"registrar.tls_handshake_timeout_ms", false, func(c *Config) string { return u32s(c.Registrar.TLSHandshakeTimeoutMS) }},
	{"registrar.max_conns_per_identity", false, func(c *Config) string { return u32s(c.Registrar.MaxConnsPerIdentity) }},
	{"registrar.read_header_timeout_ms", false, func(c *Config) string { return u32s(c.Registrar.ReadHeaderTimeoutMS) }},
	{"registrar.idle_timeout_ms", false, func(c *Config) string { return u32s(c.Registrar.IdleTimeoutMS) }},
	{"registrar.backend", false, func(c *Config) string { return c.Registrar.Backend }},
	// Live: the daemon's handler level is a slog.LevelVar, set in place.
	{"registrar.log_level", true, func(c *Config) string { return LogLevelName(c.Registrar.LogLevel) }},
	{"telemetry.metrics_listen", false, func(c *Config) string { return c.Telemetry.MetricsListen }},
	{"telemetry.otlp_endpoint", false, func(c *Config) string { return RedactURL(c.Telemetry.OTLPEndpoint) }},
	{"telemetry.service_name", false, func(c *Config) string { return c.Telemetry.ServiceName }},
	// Restart-only: the sampler is built at start.
	{"telemetry.trace_sample_per_million", false, func(c *Config) string { return u32s(c.Telemetry.TraceSamplePerMillion) }},
	{"telemetry.otlp_traces_endpoint", false, func(c *Config) string { return RedactURL(c.Telemetry.OTLPTracesEndpoint) }},
	{"telemetry.otlp_metrics_endpoint", false, func(c *Config) string { return RedactURL(c.Telemetry.OTLPMetricsEndpoint) }},
	{"openbao.address", false, func(c *Config) string { return RedactURL(c.OpenBao.Address) }},
	{"openbao.ca_file", false, func(c *Config) string { return c.OpenBao.CAFile }},
	// The path is restart-only; the token it holds is re-read by every
	// reload (and by the backend's own check of the file).
	{"openbao.token_file", false, func(c *Config) string { return c.OpenBao.TokenFile }},
	{"openbao.kv_mount", false, func(c *Config) string { return c.OpenBao.KVMount }},
	{"openbao.kv_prefix", false, func(c *Config) string { return c.OpenBao.KVPrefix }},
	{"openbao.approle_mount", false, func(c *Config) string { return c.OpenBao.AppRoleMount }},
	{"openbao.request_timeout_ms", false, func(c *Config) string { return u32s(c.OpenBao.RequestTimeoutMS) }},
	{"openbao.max_in_flight", false, func(c *Config) string { return u32s(c.OpenBao.MaxInFlight) }},
	{"openbao.secret_id_ttl_seconds", false, func(c *Config) string { return u32s(c.OpenBao.SecretIDTTLSeconds) }},
	{"openbao.secret_id_num_uses", false, func(c *Config) string { return u32s(c.OpenBao.SecretIDNumUses) }},
}

// showComponents is the components table on one line, sorted by name.
func showComponents(m map[string]Multiplicity) string {
	parts := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, name+"="+m[name].String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// ReloadClass returns Live or RestartOnly for a key of Keys, and "" for a
// key this version does not know.
func ReloadClass(key string) string {
	for _, k := range reloadKeys {
		if k.key == key {
			if k.live {
				return Live
			}
			return RestartOnly
		}
	}
	return ""
}

// Diff returns every known key whose value differs from old to new, in
// documentation order, with secrets redacted. Unknown keys kept in
// Registrar.Extra are not compared: this version does not use them.
func Diff(old, new Config) []Change {
	var out []Change
	for _, k := range reloadKeys {
		o, n := k.show(&old), k.show(&new)
		if o != n {
			out = append(out, Change{Key: k.key, Old: o, New: n, Live: k.live})
		}
	}
	return out
}

// RestartOnlyChanges returns the keys of changes that need a restart.
func RestartOnlyChanges(changes []Change) []string {
	var keys []string
	for _, c := range changes {
		if !c.Live {
			keys = append(keys, c.Key)
		}
	}
	return keys
}
