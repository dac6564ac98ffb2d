package config

import (
	"errors"
	"fmt"
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
	// Backend selects where bindings and identities live: "embedded" (the
	// default; a bbolt file in StateDir) or "openbao" (the [openbao] table's
	// server).
	Backend string
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
	// TraceSampleRatio is the fraction of root traces sampled, 0..1
	// inclusive. Default 1.0.
	TraceSampleRatio float64
}

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
			MetricsListen:    "127.0.0.1:9464",
			OTLPEndpoint:     "",
			ServiceName:      "registrar-otel",
			TraceSampleRatio: 1.0,
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

		RateLimitAdmissionBurst:                     512,
		RateLimitAdmissionRefillIntervalMS:          500,
		RateLimitPredecisionRefusalBurst:            32,
		RateLimitPredecisionRefusalRefillIntervalMS: 1000,
		RateLimitCoalesceWindowSeconds:              60,

		MaintenanceIntervalMS: 1000,
		MaxWrapTTLSeconds:     1800,
		Components:            map[string]Multiplicity{},
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
	// MaxSocketPathBytes is the longest accepted registrar.socket_path: a
	// unix socket address (sun_path) holds 108 bytes including the NUL.
	MaxSocketPathBytes = 107
)

// Rules whose wording the spec fixes.
const (
	ruleZeroBurst    = "must be greater than 0; a zero burst throttles the first legitimate mint"
	ruleZeroInterval = "must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently"
	ruleZeroWindow   = "must be greater than 0; a zero window makes every limited invocation its own record, which defeats the coalescing"

	ruleZeroRetained    = "must be greater than 0; a zero retention deletes every rotated generation of the audit evidence"
	ruleZeroMaintenance = "must be greater than 0; a zero interval would spin the daemon tick"
	ruleZeroWrapTTL     = "must be greater than 0; a zero maximum refuses every mint with invalid_wrap_ttl"
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
	if !(t.TraceSampleRatio >= 0 && t.TraceSampleRatio <= 1) { // also catches NaN
		add(&KeyError{Key: "telemetry.trace_sample_ratio", Value: t.TraceSampleRatio, Rule: "must be between 0 and 1"})
	}
	for _, e := range c.validateOpenBao() {
		add(e)
	}
	return errors.Join(errs...)
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
	if isDNSLabel(name) {
		return nil
	}
	return &KeyError{Key: keyPath("registrar", "components", name), Value: name, hideValue: true,
		Rule: "is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids"}
}

func isDNSLabel(s string) bool {
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

func checkEndpoint(key, v string) *KeyError {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return &KeyError{Key: key, Value: v, Rule: "must be an http:// or https:// URL with a host"}
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		// The OTLP exporters would silently drop these parts; say so
		// instead. Redacted: the message must not echo a password.
		return &KeyError{Key: key, Value: u.Redacted(), Rule: "must not carry credentials, a query or a fragment"}
	}
	return nil
}
