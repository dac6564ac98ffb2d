package config

import (
	"log/slog"
	"maps"
	"slices"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Registrar is the [registrar] table. Durations carry their unit in the field
// name (MS = milliseconds, Seconds = seconds); sizes are in bytes.
type Registrar struct {
	// SocketPath is the unix socket of the primary listener; its parent
	// directory is created 0700. Default "var/run/registrar.sock"; at most
	// 107 bytes (a unix socket address).
	SocketPath string
	// SocketGroup is the group the daemon shares the socket it binds with:
	// the socket is chowned to it and made 0660, a missing parent directory
	// is created 0750 with the group, and an existing one must let the
	// group traverse it. Default "" (the socket is 0600, the daemon's user
	// only). A group name or a numeric gid; serve refuses a group that does
	// not exist. Not used when systemd hands the socket over (the socket
	// unit's SocketGroup= and SocketMode= apply).
	SocketGroup string
	// SubuidFile is the subordinate uid file (subuid(5)) whose ranges make
	// a unix caller's uid its range owner's identity: a process of a user
	// namespace newuidmap made is its account. Default DefaultSubuidFile,
	// where a missing file means no ranges; "" turns the mapping off. Read
	// at start and on every reload (LoadSubuids).
	SubuidFile string
	// TLSListen is the host:port of the optional TCP+mTLS listener; "" means
	// no TCP listener. When set, TLSCertFile, TLSKeyFile and TLSClientCAFile
	// are all required.
	TLSListen string
	// TLSCertFile and TLSKeyFile are the listener's PEM certificate and key;
	// TLSClientCAFile holds the PEM CA bundle client certificates must chain to.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// StateDir holds the embedded backend's bbolt file. Default "var/lib".
	StateDir string
	// AuditRecordDir holds the append-only audit record files. Default "var/audit".
	AuditRecordDir string
	// AuditMaxFileBytes is the size in bytes at which the active audit file
	// rotates. Default 8388608 (8 MiB), at least 65536.
	AuditMaxFileBytes uint64
	// AuditMaxRetainedFiles is the number of rotated generations kept.
	// Default 16, greater than 0.
	AuditMaxRetainedFiles uint32
	// AuditStoreReserveBytes is the free space in bytes the audit capacity
	// probe wants left beyond what the store may still grow to: below
	// (audit_max_retained_files+1) × audit_max_file_bytes − store bytes +
	// reserve free, the state is "low". Default 268435456 (256 MiB); 0
	// means no reserve; at most MaxAuditStoreReserveBytes.
	AuditStoreReserveBytes uint64
	// AuditMinRetentionSeconds keeps every rotated generation younger than
	// it, even past AuditMaxRetainedFiles; while it keeps one past the
	// budget the audit capacity state is retention_held and mints are
	// refused RegistrarBusy. Default 0 (off); at most
	// MaxAuditMinRetentionSeconds.
	AuditMinRetentionSeconds uint32
	// RateLimitAdmissionBurst is the admission bucket's capacity in tokens.
	// Default 512, greater than 0.
	RateLimitAdmissionBurst uint32
	// RateLimitAdmissionRefillIntervalMS is the milliseconds per admission
	// token. Default 500 (two tokens per second), greater than 0.
	RateLimitAdmissionRefillIntervalMS uint32
	// RateLimitPredecisionRefusalBurst is the pre-derivation refusal bucket's
	// capacity in tokens. Default 32, greater than 0.
	RateLimitPredecisionRefusalBurst uint32
	// RateLimitPredecisionRefusalRefillIntervalMS is the milliseconds per
	// refusal token. Default 1000 (one token per second), greater than 0.
	RateLimitPredecisionRefusalRefillIntervalMS uint32
	// Instances is the number of registrars that share every caller
	// policy's budget (registrar.instances): each daemon enforces
	// 1/Instances of each burst (rounded down) and of each refill rate
	// (its interval multiplied by Instances), so a caller spreading over
	// all of them is admitted no more than the policy says (Share).
	// Default 1 (one registrar), 1 to MaxInstances, and no burst it
	// divides may round down to 0. Live on reload.
	Instances uint32
	// RateLimitCoalesceWindowSeconds is the length in seconds of a coalescing
	// window of limited events. Default 60, greater than 0.
	RateLimitCoalesceWindowSeconds uint32
	// MaintenanceIntervalMS is the daemon tick interval in milliseconds.
	// Default 1000, greater than 0.
	MaintenanceIntervalMS uint32
	// MaxWrapTTLSeconds is the largest wrap_ttl in seconds a mint may ask
	// for. Default 1800, greater than 0.
	MaxWrapTTLSeconds uint32
	// Components maps a component name (a DNS label) to its multiplicity,
	// from [registrar.components.<name>] multiplicity = "...".
	Components map[string]vocab.Multiplicity
	// MaxInstancesPerHost maps a many-per-host component's name to its
	// max_instances_per_host, from [registrar.components.<name>]: how
	// many live registrations of the component one host may hold (a mint
	// of a new instance beyond it is refused; a remint never is). Only
	// the components that set it are present, each greater than 0; nil
	// when none does (the default): no ceiling.
	MaxInstancesPerHost map[string]uint32
	// Callers are the caller policies, from [registrar.callers.<name>]
	// tables, sorted by name; none by default (every identity takes the
	// sizes above, policy "default"). See CallerPolicy.
	Callers []CallerPolicy
	// UnixMaxConns caps the unix socket's open connections. Default 128,
	// 1 to MaxConnsLimit. At the cap the oldest idle connection is closed
	// for a newcomer, which is refused only when all have a request in
	// flight.
	UnixMaxConns uint32
	// TLSMaxConns caps the TLS listener's established connections.
	// Default 128, 1 to MaxConnsLimit.
	TLSMaxConns uint32
	// TLSHandshakeMaxConns caps the TLS connections still in their
	// handshake, apart from TLSMaxConns; at the cap the oldest is closed.
	// Default 32, 1 to MaxConnsLimit.
	TLSHandshakeMaxConns uint32
	// TLSHandshakeTimeoutMS bounds a TLS handshake in milliseconds.
	// Default 3000, 1 to MaxTimeoutMS.
	TLSHandshakeTimeoutMS uint32
	// MaxConnsPerIdentity caps one caller identity's connections on each
	// listener. Default 64, 1 to MaxConnsLimit.
	MaxConnsPerIdentity uint32
	// ReadHeaderTimeoutMS bounds, in milliseconds, how long a connection
	// may take to send a request's headers. Default 3000, 1 to MaxTimeoutMS.
	ReadHeaderTimeoutMS uint32
	// ReadBodyTimeoutMS bounds, in milliseconds, how long a connection may
	// take to send a request's body, from the end of its headers; past it
	// the connection is closed without an answer. Default 3000, 1 to
	// MaxTimeoutMS; live on reload.
	ReadBodyTimeoutMS uint32
	// IdleTimeoutMS bounds, in milliseconds, how long a keep-alive
	// connection may wait for its next request. Default 15000, 1 to
	// MaxTimeoutMS.
	IdleTimeoutMS uint32
	// MaxInFlightPerIdentity caps one caller identity's requests in
	// handlers at once, over every listener: all it may have when it is
	// the only identity calling. Default 64 (a control plane's wave at
	// concurrency 64 runs as without the cap), 1 to MaxConnsLimit; live on
	// reload.
	MaxInFlightPerIdentity uint32
	// SharedInFlight is the requests in handlers at once, all identities
	// together, once more than one identity is calling: each identity is
	// guaranteed SharedInFlight divided by the number calling (at least
	// one), and a request beyond that starts only while fewer than
	// SharedInFlight are in handlers. Default 8, 1 to MaxConnsLimit; live
	// on reload.
	SharedInFlight uint32
	// WaitTimeoutMS bounds, in milliseconds, how long a request may wait
	// for its turn (read no further than its first read, unparsed); past it the
	// request is answered
	// RegistrarBusy with retry_after 1. Default 2000, 1 to MaxTimeoutMS;
	// live on reload.
	WaitTimeoutMS uint32
	// RefusalPaceMS holds, in milliseconds, each answer the limiter
	// decided (throttled, or refused past the refusal bucket) before it is
	// written, while another identity is calling, so a flood's cheap
	// refusals leave the cores to the identities it shares the daemon
	// with. Default 25, 0 (answered at once) to 1000 (the least
	// retry_after); live on reload.
	RefusalPaceMS uint32
	// Backend selects where bindings and identities live: "embedded" (the
	// default; a bbolt file in StateDir) or "openbao" (the [openbao] table's
	// server).
	Backend string
	// LogLevel is the level of the daemon's log: records below it are
	// dropped. One of slog.LevelDebug, LevelInfo (the default, the zero
	// value), LevelWarn and LevelError, spelt "debug", "info", "warn" or
	// "error" in the file (ParseLogLevel). A reload applies it in place;
	// serve --log-level, when given, overrides it for the process's life.
	LogLevel slog.Level
	// Extra holds the [registrar] keys this version does not know, with
	// their values exactly as the TOML parser produced them (int64, float64,
	// string, bool, time values, []any, map[string]any), or the raw string
	// of an environment variable. Nil when there are none.
	Extra map[string]any
}

// Telemetry is the [telemetry] table.
type Telemetry struct {
	// MetricsListen is the host:port of the Prometheus /metrics listener;
	// "" disables it. Default "127.0.0.1:9464".
	MetricsListen string
	// OTLPEndpoint is the http:// or https:// URL of an OTLP/HTTP collector;
	// "" (the default) disables OTLP export.
	OTLPEndpoint string
	// ServiceName is the OpenTelemetry service.name. Default "registrar-otel".
	ServiceName string
	// ServiceInstanceID is the OpenTelemetry service.instance.id, which
	// tells the series of several registrars of one service.name apart.
	// Default "": the service.instance.id of OTEL_RESOURCE_ATTRIBUTES when
	// it names one, else DefaultServiceInstanceID (the host name and the
	// absolute registrar.state_dir), stable across restarts. Set, it wins
	// over both. No control characters.
	ServiceInstanceID string
	// TraceSamplePerMillion is how many root traces in a million are
	// sampled, 0 to MaxTraceSamplePerMillion inclusive: the OTel SDK's
	// traceidratio sampler at TraceSamplePerMillion/1,000,000, parent-based.
	// Default 10,000 (1 in 100); 0 samples no root trace. A caller's sampled
	// traceparent is always followed, so only untraced callers are sampled
	// at this rate (see the operations guide, "Tracing cost and
	// trace_sample_per_million"). An integer, like every value of the file:
	// the configuration surface carries no floating-point value.
	TraceSamplePerMillion uint32
	// OTLPTracesEndpoint is the full OTLP/HTTP URL spans are sent to (used
	// as is, like OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: no /v1/traces is
	// appended); "" (the default) follows OTLPEndpoint; SignalOff ("none")
	// sends no spans even when OTLPEndpoint is set.
	OTLPTracesEndpoint string
	// OTLPMetricsEndpoint is the same for metrics (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT):
	// "" follows OTLPEndpoint, SignalOff sends no metrics.
	OTLPMetricsEndpoint string
}

// The range and default of telemetry.trace_sample_per_million.
const (
	MaxTraceSamplePerMillion     = 1_000_000
	DefaultTraceSamplePerMillion = 10_000
)

// TraceSampleRatio is TraceSamplePerMillion as the fraction the OTel SDK's
// traceidratio sampler takes, 0 to 1.
func (t Telemetry) TraceSampleRatio() float64 {
	return float64(t.TraceSamplePerMillion) / MaxTraceSamplePerMillion
}

// SignalOff, as telemetry.otlp_traces_endpoint or
// telemetry.otlp_metrics_endpoint, switches that signal's OTLP export off.
const SignalOff = "none"

// Config is the whole configuration. It is a plain value: safe for
// concurrent reads, and Load never retains it. Copies share the Components,
// MaxInstancesPerHost and Extra maps and the Callers slice; use Clone for
// an independent copy.
type Config struct {
	Registrar Registrar
	Telemetry Telemetry
	// OpenBao is the [openbao] table, used when Registrar.Backend is
	// "openbao".
	OpenBao OpenBao
	// Source is the file the configuration was loaded from, or
	// "embedded defaults" when no file was given.
	Source string
}

// SourceDefaults is Config.Source when no configuration file was given.
const SourceDefaults = "embedded defaults"

// Default returns the embedded defaults: what the daemon runs with when no
// configuration file is given, including the example components "review"
// (many-per-host), "edge-proxy" (one-per-host) and "control-plane"
// (one-per-deployment). Each call returns fresh maps. The defaults are the
// key table's (keys.go).
func Default() Config {
	cfg := Config{Source: SourceDefaults}
	for i := range allKeys {
		allKeys[i].setDefault(&cfg)
	}
	return cfg
}

func exampleComponents() map[string]vocab.Multiplicity {
	return map[string]vocab.Multiplicity{
		"review":        vocab.ManyPerHost,
		"edge-proxy":    vocab.OnePerHost,
		"control-plane": vocab.OnePerDeployment,
	}
}

// Clone returns a copy of c whose Components, MaxInstancesPerHost and
// Extra maps and Callers (each policy's lists, scope and shadow too) are
// independent of c's (Extra values themselves are shared).
func (c Config) Clone() Config {
	c.Registrar.Components = maps.Clone(c.Registrar.Components)
	c.Registrar.MaxInstancesPerHost = maps.Clone(c.Registrar.MaxInstancesPerHost)
	c.Registrar.Extra = maps.Clone(c.Registrar.Extra)
	c.Registrar.Callers = cloneCallers(c.Registrar.Callers)
	return c
}

// UnknownKeys returns the sorted dotted names ("registrar.<key>") of the
// unknown [registrar] keys kept in Registrar.Extra.
func (c *Config) UnknownKeys() []string {
	out := make([]string, 0, len(c.Registrar.Extra))
	for k := range c.Registrar.Extra {
		out = append(out, keyPath("registrar", k))
	}
	slices.Sort(out)
	return out
}
