package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Multiplicity says how many registrations of one component a deployment may
// hold, and so how a registration id is derived from it. The zero value is
// not a valid multiplicity: a component always names one explicitly.
type Multiplicity uint8

const (
	// OnePerDeployment: registration_id = <component>.
	OnePerDeployment Multiplicity = iota + 1
	// OnePerHost: registration_id = <host>-<component>.
	OnePerHost
	// ManyPerHost: registration_id = <host>-<component>-<NNN>, instance 1..999.
	ManyPerHost
)

var multiplicityNames = [...]string{
	OnePerDeployment: "one-per-deployment",
	OnePerHost:       "one-per-host",
	ManyPerHost:      "many-per-host",
}

// String returns the configuration spelling ("one-per-deployment",
// "one-per-host", "many-per-host"), or "multiplicity(N)" for an invalid value.
func (m Multiplicity) String() string {
	if m.Valid() {
		return multiplicityNames[m]
	}
	return "multiplicity(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is one of the three defined multiplicities.
func (m Multiplicity) Valid() bool {
	return m >= OnePerDeployment && m <= ManyPerHost
}

// MarshalText implements encoding.TextMarshaler; an invalid value is an error.
func (m Multiplicity) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("config: invalid multiplicity %d", uint8(m))
	}
	return []byte(multiplicityNames[m]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with the exact spellings
// accepted by ParseMultiplicity.
func (m *Multiplicity) UnmarshalText(text []byte) error {
	v, err := ParseMultiplicity(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ErrInvalidMultiplicity is returned (wrapped) by ParseMultiplicity.
var ErrInvalidMultiplicity = errors.New(`config: multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host"`)

// ParseMultiplicity parses the exact configuration spelling of a
// multiplicity; it is case-sensitive and accepts no surrounding space.
func ParseMultiplicity(s string) (Multiplicity, error) {
	for m := OnePerDeployment; m <= ManyPerHost; m++ {
		if s == multiplicityNames[m] {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w, got %s", ErrInvalidMultiplicity, strconv.Quote(s))
}

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
	Components map[string]Multiplicity
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
	// IdleTimeoutMS bounds, in milliseconds, how long a keep-alive
	// connection may wait for its next request. Default 15000, 1 to
	// MaxTimeoutMS.
	IdleTimeoutMS uint32
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
// concurrent reads, and Load never retains it. Copies share the Components
// and Extra maps; use Clone for an independent copy.
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
// (one-per-deployment). Each call returns fresh maps.
func Default() Config {
	cfg := Config{
		Registrar: defaultRegistrar(),
		Telemetry: Telemetry{
			MetricsListen:         "127.0.0.1:9464",
			OTLPEndpoint:          "",
			ServiceName:           "registrar-otel",
			TraceSamplePerMillion: DefaultTraceSamplePerMillion,
		},
		OpenBao: defaultOpenBao(),
		Source:  SourceDefaults,
	}
	cfg.Registrar.Components = exampleComponents()
	return cfg
}

// defaultRegistrar is the [registrar] defaults without any component.
func defaultRegistrar() Registrar {
	return Registrar{
		SocketPath:            "var/run/registrar.sock",
		StateDir:              "var/lib",
		AuditRecordDir:        "var/audit",
		AuditMaxFileBytes:     8388608,
		AuditMaxRetainedFiles: 16,

		AuditStoreReserveBytes: 268435456,

		RateLimitAdmissionBurst:                     512,
		RateLimitAdmissionRefillIntervalMS:          500,
		RateLimitPredecisionRefusalBurst:            32,
		RateLimitPredecisionRefusalRefillIntervalMS: 1000,
		RateLimitCoalesceWindowSeconds:              60,

		MaintenanceIntervalMS: 1000,
		MaxWrapTTLSeconds:     1800,
		Components:            map[string]Multiplicity{},

		UnixMaxConns:          128,
		TLSMaxConns:           128,
		TLSHandshakeMaxConns:  32,
		TLSHandshakeTimeoutMS: 3000,
		MaxConnsPerIdentity:   64,
		ReadHeaderTimeoutMS:   3000,
		IdleTimeoutMS:         15000,
		Backend:               BackendEmbedded,
	}
}

func exampleComponents() map[string]Multiplicity {
	return map[string]Multiplicity{
		"review":        ManyPerHost,
		"edge-proxy":    OnePerHost,
		"control-plane": OnePerDeployment,
	}
}

// Clone returns a copy of c whose Components and Extra maps are independent
// of c's (Extra values themselves are shared).
func (c Config) Clone() Config {
	c.Registrar.Components = maps.Clone(c.Registrar.Components)
	c.Registrar.Extra = maps.Clone(c.Registrar.Extra)
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

// Limits of the checked values.
const (
	// MinAuditMaxFileBytes is the smallest accepted registrar.audit_max_file_bytes.
	MinAuditMaxFileBytes = 65536
	// MaxAuditStoreReserveBytes is the largest accepted
	// registrar.audit_store_reserve_bytes (1 EiB): a larger reserve would
	// hold the capacity state at "low" on any file system there is.
	MaxAuditStoreReserveBytes = 1 << 60
	// MaxSocketPathBytes is the longest accepted registrar.socket_path: a
	// unix socket address (sun_path) holds 108 bytes including the NUL.
	MaxSocketPathBytes = 107
	// MaxConnsLimit is the largest accepted connection cap.
	MaxConnsLimit = 65536
	// MaxTimeoutMS is the largest accepted transport timeout (10 minutes).
	MaxTimeoutMS = 600000
)

// Rules whose wording the spec fixes.
const (
	ruleZeroBurst    = "must be greater than 0; a zero burst throttles the first legitimate mint"
	ruleZeroInterval = "must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently"
	ruleZeroWindow   = "must be greater than 0; a zero window makes every limited invocation its own record, which defeats the coalescing"

	ruleZeroRetained    = "must be greater than 0; a zero retention deletes every rotated generation of the audit evidence"
	ruleZeroMaintenance = "must be greater than 0; a zero interval would spin the daemon tick"
	ruleZeroWrapTTL     = "must be greater than 0; a zero maximum refuses every mint with invalid_wrap_ttl"

	ruleZeroConns   = "must be greater than 0; a zero cap refuses every connection"
	ruleZeroTimeout = "must be greater than 0; a zero timeout closes every connection at once"
)

// Validate checks c against every rule of the configuration contract, the
// same rules Load applies after decoding, and returns all violations joined
// (each a *KeyError), or nil. Registrar.Extra is not inspected. Use it for a
// Config built in code rather than loaded.
func (c *Config) Validate() error {
	var errs []error
	add := func(e *KeyError) { errs = append(errs, e) }
	r := &c.Registrar

	switch {
	case r.SocketPath == "":
		add(emptyPath("registrar.socket_path"))
	case strings.IndexByte(r.SocketPath, 0) >= 0:
		add(nulInPath("registrar.socket_path", r.SocketPath))
	case len(r.SocketPath) > MaxSocketPathBytes:
		add(&KeyError{Key: "registrar.socket_path", Value: r.SocketPath, hideValue: true,
			Rule: fmt.Sprintf("must be at most %d bytes to fit a unix socket address, got %d bytes", MaxSocketPathBytes, len(r.SocketPath))})
	}
	if r.SocketGroup != "" && !validGroupName(r.SocketGroup) {
		add(&KeyError{Key: "registrar.socket_group", Value: r.SocketGroup,
			Rule: "must be a group name (letters, digits, '_', '-', '.', not starting with '-') or a numeric gid"})
	}
	if r.TLSListen != "" {
		if e := checkHostPort("registrar.tls_listen", r.TLSListen); e != nil {
			add(e)
		}
	}
	tlsFiles := []struct {
		key, val string
	}{
		{"registrar.tls_cert_file", r.TLSCertFile},
		{"registrar.tls_key_file", r.TLSKeyFile},
		{"registrar.tls_client_ca_file", r.TLSClientCAFile},
	}
	for _, f := range tlsFiles {
		switch {
		case strings.IndexByte(f.val, 0) >= 0:
			add(nulInPath(f.key, f.val))
		case f.val == "" && r.TLSListen != "":
			add(&KeyError{Key: f.key, Rule: "is required when registrar.tls_listen is set"})
		}
	}
	for _, f := range []struct{ key, val string }{
		{"registrar.state_dir", r.StateDir},
		{"registrar.audit_record_dir", r.AuditRecordDir},
	} {
		switch {
		case f.val == "":
			add(emptyPath(f.key))
		case strings.IndexByte(f.val, 0) >= 0:
			add(nulInPath(f.key, f.val))
		}
	}
	if r.AuditMaxFileBytes < MinAuditMaxFileBytes {
		add(&KeyError{Key: "registrar.audit_max_file_bytes", Value: r.AuditMaxFileBytes,
			Rule: fmt.Sprintf("must be at least %d", MinAuditMaxFileBytes)})
	}
	if r.AuditStoreReserveBytes > MaxAuditStoreReserveBytes {
		add(&KeyError{Key: "registrar.audit_store_reserve_bytes", Value: r.AuditStoreReserveBytes,
			Rule: fmt.Sprintf("must be at most %d", uint64(MaxAuditStoreReserveBytes))})
	}
	for _, f := range []struct {
		key  string
		val  uint32
		rule string
	}{
		{"registrar.audit_max_retained_files", r.AuditMaxRetainedFiles, ruleZeroRetained},
		{"registrar.rate_limit_admission_burst", r.RateLimitAdmissionBurst, ruleZeroBurst},
		{"registrar.rate_limit_admission_refill_interval_ms", r.RateLimitAdmissionRefillIntervalMS, ruleZeroInterval},
		{"registrar.rate_limit_predecision_refusal_burst", r.RateLimitPredecisionRefusalBurst, ruleZeroBurst},
		{"registrar.rate_limit_predecision_refusal_refill_interval_ms", r.RateLimitPredecisionRefusalRefillIntervalMS, ruleZeroInterval},
		{"registrar.rate_limit_coalesce_window_seconds", r.RateLimitCoalesceWindowSeconds, ruleZeroWindow},
		{"registrar.maintenance_interval_ms", r.MaintenanceIntervalMS, ruleZeroMaintenance},
		{"registrar.max_wrap_ttl_seconds", r.MaxWrapTTLSeconds, ruleZeroWrapTTL},
	} {
		if f.val == 0 {
			add(&KeyError{Key: f.key, Value: f.val, Rule: f.rule, hideValue: true})
		}
	}
	for _, f := range []struct {
		key      string
		val, max uint32
		zero     string
	}{
		{"registrar.unix_max_conns", r.UnixMaxConns, MaxConnsLimit, ruleZeroConns},
		{"registrar.tls_max_conns", r.TLSMaxConns, MaxConnsLimit, ruleZeroConns},
		{"registrar.tls_handshake_max_conns", r.TLSHandshakeMaxConns, MaxConnsLimit, ruleZeroConns},
		{"registrar.tls_handshake_timeout_ms", r.TLSHandshakeTimeoutMS, MaxTimeoutMS, ruleZeroTimeout},
		{"registrar.max_conns_per_identity", r.MaxConnsPerIdentity, MaxConnsLimit, ruleZeroConns},
		{"registrar.read_header_timeout_ms", r.ReadHeaderTimeoutMS, MaxTimeoutMS, ruleZeroTimeout},
		{"registrar.idle_timeout_ms", r.IdleTimeoutMS, MaxTimeoutMS, ruleZeroTimeout},
	} {
		switch {
		case f.val == 0:
			add(&KeyError{Key: f.key, Value: f.val, Rule: f.zero, hideValue: true})
		case f.val > f.max:
			add(&KeyError{Key: f.key, Value: f.val, Rule: "must be at most " + strconv.FormatUint(uint64(f.max), 10)})
		}
	}
	if _, ok := logLevelName(r.LogLevel); !ok {
		add(&KeyError{Key: "registrar.log_level", Value: r.LogLevel.String(), Rule: ruleLogLevel})
	}
	for _, name := range slices.Sorted(maps.Keys(r.Components)) {
		if e := checkComponentName(name); e != nil {
			add(e)
			continue
		}
		if m := r.Components[name]; !m.Valid() {
			add(&KeyError{Key: keyPath("registrar", "components", name, "multiplicity"), Value: m.String(), Rule: ruleMultiplicity})
		}
	}

	t := &c.Telemetry
	if t.MetricsListen != "" {
		if e := checkHostPort("telemetry.metrics_listen", t.MetricsListen); e != nil {
			add(e)
		}
	}
	if t.OTLPEndpoint != "" {
		if e := checkEndpoint("telemetry.otlp_endpoint", t.OTLPEndpoint); e != nil {
			add(e)
		}
	}
	if strings.TrimSpace(t.ServiceName) == "" {
		add(&KeyError{Key: "telemetry.service_name", Value: t.ServiceName, Rule: "must be a non-empty string"})
	}
	if t.TraceSamplePerMillion > MaxTraceSamplePerMillion {
		add(&KeyError{Key: "telemetry.trace_sample_per_million", Value: uint64(t.TraceSamplePerMillion), Rule: "must be at most 1000000 (every root trace)"})
	}
	for _, f := range []struct{ key, val string }{
		{"telemetry.otlp_traces_endpoint", t.OTLPTracesEndpoint},
		{"telemetry.otlp_metrics_endpoint", t.OTLPMetricsEndpoint},
	} {
		if f.val == "" || f.val == SignalOff {
			continue
		}
		if e := checkEndpoint(f.key, f.val); e != nil {
			e.Rule += ` (or "` + SignalOff + `" to switch the signal off, "" to follow telemetry.otlp_endpoint)`
			add(e)
		}
	}
	for _, e := range c.validateOpenBao() {
		add(e)
	}
	return errors.Join(errs...)
}

const ruleLogLevel = `must be one of "debug", "info", "warn", "error"`

// logLevels are the four levels registrar.log_level and serve --log-level
// accept, by their spelling.
var logLevels = []struct {
	name  string
	level slog.Level
}{
	{"debug", slog.LevelDebug},
	{"info", slog.LevelInfo},
	{"warn", slog.LevelWarn},
	{"error", slog.LevelError},
}

// ErrInvalidLogLevel is returned (wrapped) by ParseLogLevel.
var ErrInvalidLogLevel = errors.New(`config: a log level must be one of "debug", "info", "warn", "error"`)

// ParseLogLevel parses a log level as registrar.log_level and serve
// --log-level spell it: "debug", "info", "warn" or "error", in any case
// (as slog.Level's UnmarshalText reads them), without surrounding space
// and without slog's "+N"/"-N" offsets, which name no documented level.
func ParseLogLevel(s string) (slog.Level, error) {
	for _, l := range logLevels {
		if strings.EqualFold(s, l.name) {
			return l.level, nil
		}
	}
	return 0, fmt.Errorf("%w, got %s", ErrInvalidLogLevel, strconv.Quote(s))
}

// LogLevelName is the configuration spelling of a level ("debug", "info",
// "warn", "error"); for any other level, slog's own ("INFO+2").
func LogLevelName(l slog.Level) string {
	if name, ok := logLevelName(l); ok {
		return name
	}
	return l.String()
}

func logLevelName(l slog.Level) (string, bool) {
	for _, x := range logLevels {
		if x.level == l {
			return x.name, true
		}
	}
	return "", false
}

const ruleMultiplicity = `must be one of "one-per-deployment", "one-per-host", "many-per-host"`

func emptyPath(key string) *KeyError {
	return &KeyError{Key: key, Value: "", Rule: "must be a non-empty path"}
}

func nulInPath(key, val string) *KeyError {
	return &KeyError{Key: key, Value: val, Rule: "must not contain a NUL byte"}
}

// checkComponentName enforces the DNS-label rule: component names are part of
// derived registration ids.
func checkComponentName(name string) *KeyError {
	if IsDNSLabel(name) {
		return nil
	}
	return &KeyError{Key: keyPath("registrar", "components", name), Value: name, hideValue: true,
		Rule: "is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids"}
}

// IsDNSLabel reports whether s is a DNS label as the registrar spells one:
// 1 to 63 octets of [a-z0-9-], not starting or ending with '-' (lower case
// only, no IDNA). Component names (here) and the verbs' service names and
// hosts (package registrar) follow it, since all three are joined into
// derived registration ids.
func IsDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// checkHostPort accepts host:port with a decimal port 0..65535 and an
// optional (possibly empty, meaning every interface) host without spaces.
func checkHostPort(key, v string) *KeyError {
	const rule = "must be host:port with a numeric port (0 to 65535)"
	host, port, err := net.SplitHostPort(v)
	if err != nil || port == "" || strings.ContainsAny(host, " \t\r\n") {
		return &KeyError{Key: key, Value: v, Rule: rule}
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return &KeyError{Key: key, Value: v, Rule: rule}
		}
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > math.MaxUint16 {
		return &KeyError{Key: key, Value: v, Rule: rule}
	}
	return nil
}

// checkEndpoint checks an OTLP endpoint. Its errors never repeat the
// user-info, query or fragment (RedactURL), not even of a value that does
// not parse: a password is not to be echoed to a terminal or a log.
func checkEndpoint(key, v string) *KeyError {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return SecretKeyError(key, v, "must be an http:// or https:// URL with a host")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.ForceQuery {
		// The OTLP exporters would silently drop these parts; say so
		// instead.
		return SecretKeyError(key, v, "must not carry credentials, a query or a fragment")
	}
	return nil
}

// validGroupName reports whether s can name a group in /etc/group: the
// portable characters of a name (useradd's rule, with '.'), at most 32
// bytes, or a number.
func validGroupName(s string) bool {
	if len(s) > 32 || s[0] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
