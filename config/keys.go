package config

import "log/slog"

// The key table: one row per configuration key, in documentation order.
// A key is declared here once, with its name, type, default, rule, reload
// class and one-line meaning; loading, the defaults, Validate, the
// environment variable, the error rank, Keys, the reload classification
// and config check's listing derive from the row, and
// TestEveryKeyAppearsInEveryPlace holds the struct field, the
// documentation's rows (both languages), testdata/valid_full.toml and
// config check's output to it. docs/en/architecture.md ("A configuration
// key") lists what a new key touches.

// registrarKeys are the [registrar] table's keys.
var registrarKeys = []key{
	stringKey("registrar", "socket_path", "path", func(c *Config) *string { return &c.Registrar.SocketPath }, "var/run/registrar.sock", restart,
		"the unix socket of the primary listener", checkSocketPath),
	stringKey("registrar", "socket_group", "string", func(c *Config) *string { return &c.Registrar.SocketGroup }, "", restart,
		"the group the daemon shares the socket it binds with", checkGroup),
	stringKey("registrar", "tls_listen", "host:port", func(c *Config) *string { return &c.Registrar.TLSListen }, "", restart,
		"the optional TCP listener with mutual TLS", optional(checkHostPort)),
	stringKey("registrar", "tls_cert_file", "path", func(c *Config) *string { return &c.Registrar.TLSCertFile }, "", restart,
		"the listener's PEM certificate", checkTLSFile),
	stringKey("registrar", "tls_key_file", "path", func(c *Config) *string { return &c.Registrar.TLSKeyFile }, "", restart,
		"the listener's PEM private key", checkTLSFile),
	stringKey("registrar", "tls_client_ca_file", "path", func(c *Config) *string { return &c.Registrar.TLSClientCAFile }, "", restart,
		"the PEM CA bundle client certificates must chain to", checkTLSFile),
	stringKey("registrar", "state_dir", "path", func(c *Config) *string { return &c.Registrar.StateDir }, "var/lib", restart,
		"where the embedded backend keeps its bbolt file", checkDir),
	stringKey("registrar", "audit_record_dir", "path", func(c *Config) *string { return &c.Registrar.AuditRecordDir }, "var/audit", restart,
		"the audit record store", checkDir),
	u64Key("registrar", "audit_max_file_bytes", func(c *Config) *uint64 { return &c.Registrar.AuditMaxFileBytes }, 8388608, maxU64, restart,
		"the size in bytes at which the active audit file rotates", atLeast(MinAuditMaxFileBytes)),
	u32Key("registrar", "audit_max_retained_files", "u32", func(c *Config) *uint32 { return &c.Registrar.AuditMaxRetainedFiles }, 16, restart,
		"rotated generations kept", nonZero(ruleZeroRetained)),
	u64Key("registrar", "audit_store_reserve_bytes", func(c *Config) *uint64 { return &c.Registrar.AuditStoreReserveBytes }, 268435456, MaxAuditStoreReserveBytes, live,
		"free space the capacity probe wants left beyond what the store may still grow to", atMost64(MaxAuditStoreReserveBytes)),
	u32Key("registrar", "rate_limit_admission_burst", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitAdmissionBurst }, 512, live,
		"admission bucket capacity in tokens", nonZero(ruleZeroBurst)),
	u32Key("registrar", "rate_limit_admission_refill_interval_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitAdmissionRefillIntervalMS }, 500, live,
		"milliseconds per admission token", nonZero(ruleZeroInterval)),
	u32Key("registrar", "rate_limit_predecision_refusal_burst", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitPredecisionRefusalBurst }, 32, live,
		"pre-derivation refusal bucket capacity in tokens", nonZero(ruleZeroBurst)),
	u32Key("registrar", "rate_limit_predecision_refusal_refill_interval_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitPredecisionRefusalRefillIntervalMS }, 1000, live,
		"milliseconds per refusal token", nonZero(ruleZeroInterval)),
	u32Key("registrar", "rate_limit_coalesce_window_seconds", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitCoalesceWindowSeconds }, 60, live,
		"length of a coalescing window in seconds", nonZero(ruleZeroWindow)),
	u32Key("registrar", "maintenance_interval_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.MaintenanceIntervalMS }, 1000, restart,
		"the daemon tick in milliseconds", nonZero(ruleZeroMaintenance)),
	u32Key("registrar", "max_wrap_ttl_seconds", "u32", func(c *Config) *uint32 { return &c.Registrar.MaxWrapTTLSeconds }, 1800, restart,
		"the largest wrap_ttl in seconds a mint may ask for", nonZero(ruleZeroWrapTTL)),
	componentsKey,
	u32Key("registrar", "unix_max_conns", "u32", func(c *Config) *uint32 { return &c.Registrar.UnixMaxConns }, 128, restart,
		"connections the unix socket holds at once", between(MaxConnsLimit, ruleZeroConns)),
	u32Key("registrar", "tls_max_conns", "u32", func(c *Config) *uint32 { return &c.Registrar.TLSMaxConns }, 128, restart,
		"established connections the TLS listener holds at once", between(MaxConnsLimit, ruleZeroConns)),
	u32Key("registrar", "tls_handshake_max_conns", "u32", func(c *Config) *uint32 { return &c.Registrar.TLSHandshakeMaxConns }, 32, restart,
		"TLS connections still in their handshake", between(MaxConnsLimit, ruleZeroConns)),
	u32Key("registrar", "tls_handshake_timeout_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.TLSHandshakeTimeoutMS }, 3000, restart,
		"milliseconds a TLS handshake may take", between(MaxTimeoutMS, ruleZeroTimeout)),
	u32Key("registrar", "max_conns_per_identity", "u32", func(c *Config) *uint32 { return &c.Registrar.MaxConnsPerIdentity }, 64, restart,
		"connections one caller identity may hold on each listener", between(MaxConnsLimit, ruleZeroConns)),
	u32Key("registrar", "read_header_timeout_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.ReadHeaderTimeoutMS }, 3000, restart,
		"milliseconds a connection may take to send a request's headers", between(MaxTimeoutMS, ruleZeroTimeout)),
	u32Key("registrar", "idle_timeout_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.IdleTimeoutMS }, 15000, restart,
		"milliseconds a keep-alive connection may wait for its next request", between(MaxTimeoutMS, ruleZeroTimeout)),
	stringKey("registrar", "backend", "string", func(c *Config) *string { return &c.Registrar.Backend }, BackendEmbedded, restart,
		"where bindings and identities live: embedded or openbao", checkBackend),
	// Live: the daemon's handler level is a slog.LevelVar, set in place.
	logLevelKey,
}

// telemetryKeys are the [telemetry] table's keys.
var telemetryKeys = []key{
	stringKey("telemetry", "metrics_listen", "host:port", func(c *Config) *string { return &c.Telemetry.MetricsListen }, "127.0.0.1:9464", restart,
		"the Prometheus /metrics and /healthz listener", optional(checkHostPort)),
	urlKey("telemetry", "otlp_endpoint", "URL", func(c *Config) *string { return &c.Telemetry.OTLPEndpoint }, "", restart,
		"the OTLP/HTTP base URL", optional(checkEndpoint)),
	stringKey("telemetry", "service_name", "string", func(c *Config) *string { return &c.Telemetry.ServiceName }, "registrar-otel", restart,
		"the OpenTelemetry service.name", checkServiceName),
	// Restart-only: the sampler is built at start.
	u32Key("telemetry", "trace_sample_per_million", "integer", func(c *Config) *uint32 { return &c.Telemetry.TraceSamplePerMillion }, DefaultTraceSamplePerMillion, restart,
		"root traces sampled in a million", checkTraceSample),
	urlKey("telemetry", "otlp_traces_endpoint", "URL or `none`", func(c *Config) *string { return &c.Telemetry.OTLPTracesEndpoint }, "", restart,
		"the full OTLP/HTTP URL spans go to", checkSignalEndpoint),
	urlKey("telemetry", "otlp_metrics_endpoint", "URL or `none`", func(c *Config) *string { return &c.Telemetry.OTLPMetricsEndpoint }, "", restart,
		"the full OTLP/HTTP URL metrics go to", checkSignalEndpoint),
}

// openbaoKeys are the [openbao] table's keys.
var openbaoKeys = []key{
	urlKey("openbao", "address", "URL", func(c *Config) *string { return &c.OpenBao.Address }, "", restart,
		"the OpenBao server", checkOpenBaoAddressKey),
	stringKey("openbao", "ca_file", "path", func(c *Config) *string { return &c.OpenBao.CAFile }, "", restart,
		"the CA bundle the server's certificate must chain to", checkCAFile),
	// The path is restart-only; the token it holds is re-read by every
	// reload (and by the backend's own check of the file).
	stringKey("openbao", "token_file", "path", func(c *Config) *string { return &c.OpenBao.TokenFile }, "", restart,
		"the file the registrar's token is read from", noNUL),
	stringKey("openbao", "kv_mount", "path", func(c *Config) *string { return &c.OpenBao.KVMount }, "secret", restart,
		"the KV version 2 mount of the bindings", checkAPIPath),
	stringKey("openbao", "kv_prefix", "path", func(c *Config) *string { return &c.OpenBao.KVPrefix }, "registrar-otel", restart,
		"the path of the bindings and the services' secrets inside kv_mount", checkAPIPath),
	stringKey("openbao", "approle_mount", "path", func(c *Config) *string { return &c.OpenBao.AppRoleMount }, "approle", restart,
		"the AppRole auth mount", checkAPIPath),
	u32Key("openbao", "request_timeout_ms", "u32", func(c *Config) *uint32 { return &c.OpenBao.RequestTimeoutMS }, 5000, restart,
		"the bound in milliseconds on each request", nonZero("must be greater than 0; a zero timeout fails every request")),
	u32Key("openbao", "max_in_flight", "u32", func(c *Config) *uint32 { return &c.OpenBao.MaxInFlight }, 16, restart,
		"the mints and deregistrations talking to the server at once", nonZero("must be greater than 0; zero slots would fail every request")),
	u32Key("openbao", "secret_id_ttl_seconds", "u32", func(c *Config) *uint32 { return &c.OpenBao.SecretIDTTLSeconds }, 3600, restart,
		"each secret id's lifetime in seconds", checkSecretIDTTL),
	u32Key("openbao", "secret_id_num_uses", "u32", func(c *Config) *uint32 { return &c.OpenBao.SecretIDNumUses }, 1, restart,
		"logins one secret id allows", nonZero("must be greater than 0; zero would issue secret ids with unlimited logins")),
}

// allKeys is every row, table after table.
var allKeys = concatKeys(registrarKeys, telemetryKeys, openbaoKeys)

func concatKeys(tables ...[]key) []key {
	var out []key
	for _, t := range tables {
		out = append(out, t...)
	}
	return out
}

// componentsKey is [registrar.components.<name>]: one table per component
// with the single key multiplicity.
var componentsKey = key{
	table: "registrar", name: "components", listed: "registrar.components.<name>.multiplicity",
	typ: "string", live: live, doc: "the multiplicity of each component",
	setDefault: func(c *Config) { c.Registrar.Components = exampleComponents() },
	decode:     func(d *decoder, key string, v any, c *Config) { d.components(key, v, &c.Registrar) },
	show:       func(c *Config) string { return showComponents(c.Registrar.Components) },
	check:      func(c *Config, _ string, add func(*KeyError)) { checkComponents(c.Registrar.Components, add) },
	field:      func(c *Config) any { return &c.Registrar.Components },
	raw: func(c *Config) any {
		if len(c.Registrar.Components) == 0 {
			return nil
		}
		m := make(map[string]any, len(c.Registrar.Components))
		for name, mult := range c.Registrar.Components {
			m[name] = map[string]any{"multiplicity": mult.String()}
		}
		return m
	},
}

var logLevelKey = typedKey("registrar", "log_level", "string", func(c *Config) *slog.Level { return &c.Registrar.LogLevel }, slog.LevelInfo, live,
	"the daemon's log level", (*decoder).logLevel, LogLevelName, checkLogLevel)
