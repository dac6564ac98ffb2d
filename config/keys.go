package config

import (
	"log/slog"
	"math"
	"strconv"
	"strings"
)

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
	// Live: a reload reads the file again, changed or not.
	stringKey("registrar", "subuid_file", "path", func(c *Config) *string { return &c.Registrar.SubuidFile }, DefaultSubuidFile, live,
		"the subordinate uid ranges whose uids take their owner's identity on the unix socket", noNUL),
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
	u32Key("registrar", "audit_min_retention_seconds", "u32", func(c *Config) *uint32 { return &c.Registrar.AuditMinRetentionSeconds }, 0, restart,
		"rotated generations younger than this are kept past audit_max_retained_files, and mints refused meanwhile", atMost32(MaxAuditMinRetentionSeconds)),
	u32Key("registrar", "rate_limit_admission_burst", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitAdmissionBurst }, 512, live,
		"admission bucket capacity in tokens", nonZero(ruleZeroBurst)),
	u32Key("registrar", "rate_limit_admission_refill_interval_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitAdmissionRefillIntervalMS }, 500, live,
		"milliseconds per admission token", nonZero(ruleZeroInterval)),
	u32Key("registrar", "rate_limit_predecision_refusal_burst", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitPredecisionRefusalBurst }, 32, live,
		"pre-derivation refusal bucket capacity in tokens", nonZero(ruleZeroBurst)),
	u32Key("registrar", "rate_limit_predecision_refusal_refill_interval_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitPredecisionRefusalRefillIntervalMS }, 1000, live,
		"milliseconds per refusal token", nonZero(ruleZeroInterval)),
	// Live: the daemon re-expresses every bucket in the new shares, as
	// for a change of the sizes (instances.go holds the rule).
	u32Key("registrar", "instances", "u32", func(c *Config) *uint32 { return &c.Registrar.Instances }, 1, live,
		"the registrars sharing each caller policy's budget: each enforces 1/instances of every burst and rate", checkInstances),
	u32Key("registrar", "rate_limit_coalesce_window_seconds", "u32", func(c *Config) *uint32 { return &c.Registrar.RateLimitCoalesceWindowSeconds }, 60, live,
		"length of a coalescing window in seconds", nonZero(ruleZeroWindow)),
	u32Key("registrar", "maintenance_interval_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.MaintenanceIntervalMS }, 1000, restart,
		"the daemon tick in milliseconds", nonZero(ruleZeroMaintenance)),
	u32Key("registrar", "max_wrap_ttl_seconds", "u32", func(c *Config) *uint32 { return &c.Registrar.MaxWrapTTLSeconds }, 1800, restart,
		"the largest wrap_ttl in seconds a mint may ask for", nonZero(ruleZeroWrapTTL)),
	componentsKey,
	componentCeilingKey,
	// Live: the daemon re-expresses the buckets of an identity whose
	// policy or sizes changed, as for a change of the defaults.
	callersKey,
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
	// Live: the server reads it as each request's headers end
	// (server.Server.SetReadBodyTimeout).
	u32Key("registrar", "read_body_timeout_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.ReadBodyTimeoutMS }, 3000, live,
		"milliseconds a connection may take to send a request's body, from the end of its headers", between(MaxTimeoutMS, ruleZeroBodyTimeout)),
	u32Key("registrar", "idle_timeout_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.IdleTimeoutMS }, 15000, restart,
		"milliseconds a keep-alive connection may wait for its next request", between(MaxTimeoutMS, ruleZeroTimeout)),
	// Live, the three of fair dispatch: the server's gate reads them as it
	// hands out each seat (server.Server.SetFairness), so an operator can
	// retune them during the flood that shows they need it.
	u32Key("registrar", "max_in_flight_per_identity", "u32", func(c *Config) *uint32 { return &c.Registrar.MaxInFlightPerIdentity }, 64, live,
		"requests of one caller identity in handlers at once, over every listener, when it is the only identity calling", between(MaxConnsLimit, ruleZeroInFlight)),
	u32Key("registrar", "shared_in_flight", "u32", func(c *Config) *uint32 { return &c.Registrar.SharedInFlight }, 8, live,
		"requests in handlers at once, all identities together, once more than one identity is calling; each identity is guaranteed its share", between(MaxConnsLimit, ruleZeroInFlight)),
	u32Key("registrar", "wait_timeout_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.WaitTimeoutMS }, 2000, live,
		"milliseconds a request may wait for its turn before it is answered RegistrarBusy", between(MaxTimeoutMS, ruleZeroWait)),
	u32Key("registrar", "refusal_pace_ms", "u32", func(c *Config) *uint32 { return &c.Registrar.RefusalPaceMS }, 25, live,
		"milliseconds a refusal the limiter decided is held before its answer while another identity is calling; 0 answers at once", atMost32(MaxRefusalPaceMS)),
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
	stringKey("telemetry", "service_instance_id", "string", func(c *Config) *string { return &c.Telemetry.ServiceInstanceID }, "", restart,
		"the OpenTelemetry service.instance.id; \"\" derives it from the host name and registrar.state_dir", checkServiceInstanceID),
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
	typedKey("openbao", "address", "URL or array of URLs", func(c *Config) *string { return &c.OpenBao.Address }, "", restart,
		"the OpenBao server, or the nodes of its cluster", (*decoder).addresses, redactAddresses, checkOpenBaoAddressKey),
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
	u32Key("openbao", "readiness_grace_ms", "u32", func(c *Config) *uint32 { return &c.OpenBao.ReadinessGraceMS }, 10000, restart,
		"how long in milliseconds requests may fail to reach the cluster before /readyz answers 503", nonZero("must be greater than 0; a zero grace would take the daemon out of its balancer on every failed request")),
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
// with the key multiplicity and, for a many-per-host component, the key
// max_instances_per_host (componentCeilingKey, which this row's decoder
// reads).
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
			t := map[string]any{"multiplicity": mult.String()}
			if n, ok := c.Registrar.MaxInstancesPerHost[name]; ok {
				t[keyMaxInstancesPerHost] = int64(n)
			}
			m[name] = t
		}
		return m
	},
}

var logLevelKey = typedKey("registrar", "log_level", "string", func(c *Config) *slog.Level { return &c.Registrar.LogLevel }, slog.LevelInfo, live,
	"the daemon's log level", (*decoder).logLevel, LogLevelName, checkLogLevel)

// key is one row of the key table above: everything this package knows
// about one configuration key. Loading (decode), the defaults (setDefault),
// the range checks of Validate (check), the environment variable (EnvVarOf
// of the dotted name), the error rank, Keys, the reload class and the value
// a reload diff and config check show (show) all derive from the row.
//
// koanf layers the defaults (rawDefaults), the file and the environment,
// but the merged map is decoded by the rows, not by koanf's Unmarshal:
// mapstructure's errors name a Go field path in its own words, not a
// *KeyError with the key, the value and the rule; it checks a range only as
// far as the Go type goes; it reads "8" as a number only under
// WeaklyTypedInput, which also turns true into 1; and the unknown keys of
// [registrar] must be kept in Extra and warned, not dropped or refused.
type key struct {
	table, name string
	// listed is the name Keys gives the key when it is not table.name
	// (the components table: registrar.components.<name>.multiplicity).
	listed string
	// typ is the type column of the documentation's key tables.
	typ  string
	live bool
	// doc is the key's one-line meaning; the documentation pages say the
	// rest in prose.
	doc        string
	setDefault func(*Config)
	decode     func(d *decoder, key string, v any, c *Config)
	show       func(*Config) string
	// check adds the key's rule violations (nil: no rule beyond its type).
	check func(c *Config, key string, add func(*KeyError))
	// field is the address of the struct field the key fills.
	field func(*Config) any
	// raw is the key's value in c as the TOML parser would have produced
	// it (nil: none), for koanf's defaults layer.
	raw func(c *Config) any
	// rows, for a table of named tables (the caller policies), are the
	// rows of the keys each named table takes: Keys and Table list them in
	// the row's place.
	rows func() []Row
	// diff, when set, is Diff's comparison of the key: one Change per
	// named table added, changed or removed, rather than one for the key.
	diff func(old, new *Config) []Change
}

// dotted is the key's name as errors, logs and Keys spell it.
func (k *key) dotted() string {
	if k.listed != "" {
		return k.listed
	}
	return k.table + "." + k.name
}

// Row is a key table row as the documentation and config check read it.
type Row struct {
	// Key is the dotted name, e.g. "registrar.socket_path".
	Key string
	// Type is the documentation's type: "path", "string", "u32", "u64",
	// "host:port", "URL", …
	Type string
	// Default is the default value as Diff and config check show it ("" for
	// an unset string); the components' default is the example table.
	Default string
	// Reload is Live or RestartOnly.
	Reload string
	// Doc is the key's one-line meaning.
	Doc string
}

// Table returns the rows of every key, in documentation order (Keys's).
// The keys of a caller policy's table come in the place of
// [registrar.callers], their Default the key whose value an unset one
// takes.
func Table() []Row {
	def := Default()
	out := make([]Row, 0, len(allKeys))
	for _, k := range allKeys {
		if k.rows != nil {
			out = append(out, k.rows()...)
			continue
		}
		out = append(out, Row{Key: k.dotted(), Type: k.typ, Default: k.show(&def), Reload: reloadClass(k.live), Doc: k.doc})
	}
	return out
}

// Setting is one key's value as Diff and config check show it: secrets
// redacted, integers in decimal, the log level as the file spells it.
type Setting struct {
	Key, Value string
}

// Settings returns the value of every key in c, in documentation order.
func (c *Config) Settings() []Setting {
	out := make([]Setting, 0, len(allKeys))
	for _, k := range allKeys {
		out = append(out, Setting{Key: k.dotted(), Value: k.show(c)})
	}
	return out
}

// A rule checks one key's decoded value; c is there for the rules that
// relate two keys.
type rule[V any] func(c *Config, key string, v V, add func(*KeyError))

// typedKey builds the row of a key held in a field of type V.
func typedKey[V any](table, name, typ string, field func(*Config) *V, def V, live bool, doc string,
	decode func(d *decoder, key string, v any) (V, bool), show func(V) string, check rule[V]) key {
	k := key{
		table: table, name: name, typ: typ, live: live, doc: doc,
		setDefault: func(c *Config) { *field(c) = def },
		decode: func(d *decoder, key string, v any, c *Config) {
			if x, ok := decode(d, key, v); ok {
				*field(c) = x
			}
		},
		show:  func(c *Config) string { return show(*field(c)) },
		field: func(c *Config) any { return field(c) },
		raw:   func(c *Config) any { return rawValue(*field(c)) },
	}
	if check != nil {
		k.check = func(c *Config, key string, add func(*KeyError)) { check(c, key, *field(c), add) }
	}
	return k
}

func identity(s string) string { return s }

func (d *decoder) u32(key string, v any) (uint32, bool) {
	n, ok := d.uint(key, v, math.MaxUint32)
	return uint32(n), ok
}

func showU32(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
func showU64(v uint64) string { return strconv.FormatUint(v, 10) }

// stringKey is a key holding a string shown as it is.
func stringKey(table, name, typ string, field func(*Config) *string, def string, live bool, doc string, check rule[string]) key {
	return typedKey(table, name, typ, field, def, live, doc, (*decoder).string, identity, check)
}

// urlKey is a string key that may carry credentials: shown redacted.
func urlKey(table, name, typ string, field func(*Config) *string, def string, live bool, doc string, check rule[string]) key {
	return typedKey(table, name, typ, field, def, live, doc, (*decoder).string, RedactURL, check)
}

// u32Key is an unsigned 32-bit integer key.
func u32Key(table, name, typ string, field func(*Config) *uint32, def uint32, live bool, doc string, check rule[uint32]) key {
	return typedKey(table, name, typ, field, def, live, doc, (*decoder).u32, showU32, check)
}

// u64Key is an unsigned 64-bit integer key of at most max.
func u64Key(table, name string, field func(*Config) *uint64, def, max uint64, live bool, doc string, check rule[uint64]) key {
	decode := func(d *decoder, key string, v any) (uint64, bool) { return d.uint(key, v, max) }
	return typedKey(table, name, "u64", field, def, live, doc, decode, showU64, check)
}

// Reload classes of the rows.
const (
	live    = true
	restart = false
)

// keyRank orders errors as the keys appear in the documentation (and in a
// well-kept file), whether a rule was checked while decoding or after: each
// table's name, then its keys. The removed telemetry.trace_sample_ratio
// ranks just after the key that replaced it.
var keyRank = func() map[string]int {
	rank := map[string]int{}
	for _, k := range allKeys {
		if _, ok := rank[k.table]; !ok {
			rank[k.table] = len(rank)
		}
		if _, ok := rank[k.table+"."+k.name]; ok {
			continue // the components' ceilings rank with the components
		}
		rank[k.table+"."+k.name] = len(rank)
		if k.table == "telemetry" && k.name == "trace_sample_per_million" {
			rank["telemetry."+removedTraceSampleRatio] = len(rank)
		}
	}
	return rank
}()

func errorRank(err error) int {
	ke, ok := err.(*KeyError)
	if !ok {
		return len(keyRank) + 1
	}
	if r, ok := keyRank[ke.Key]; ok {
		return r
	}
	for _, table := range []string{"registrar.components", callersTable} {
		if strings.HasPrefix(ke.Key, table+".") {
			return keyRank[table]
		}
	}
	return len(keyRank) // environment variables that name no key
}

// compareErrors orders errors by errorRank, and the errors of the caller
// policies, which share one rank, by key: policy by policy, each policy's
// keys in name order; so are the components', whether a rule was checked
// while decoding or after (a component's multiplicity before its
// max_instances_per_host).
func compareErrors(a, b error) int {
	if c := errorRank(a) - errorRank(b); c != 0 {
		return c
	}
	ka, oka := a.(*KeyError)
	kb, okb := b.(*KeyError)
	if !oka || !okb {
		return 0
	}
	for _, table := range []string{"registrar.components.", callersTable + "."} {
		if strings.HasPrefix(ka.Key, table) && strings.HasPrefix(kb.Key, table) {
			return strings.Compare(ka.Key, kb.Key)
		}
	}
	return 0
}

// Keys returns every key this version knows, dotted and in documentation
// order, with the component table as registrar.components.<name>.multiplicity
// and registrar.components.<name>.max_instances_per_host, and the keys of a
// caller policy as registrar.callers.<name>.<key> and
// registrar.callers.<name>.shadow.<key>. The docs test checks each one is
// documented in every language.
func Keys() []string {
	rows := Table()
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	return keys
}

// rawValue is a decoded value as the TOML parser spells it: integers are
// int64 (every default fits), a log level its name.
func rawValue(v any) any {
	switch x := v.(type) {
	case uint32:
		return int64(x)
	case uint64:
		return int64(min(x, math.MaxInt64))
	case slog.Level:
		return LogLevelName(x)
	}
	return v
}

// rawDefaults is the defaults layer of the load: every key's value in def,
// as the parser would have read it from a file.
func rawDefaults(def *Config) map[string]any {
	layer := map[string]any{}
	for _, k := range allKeys {
		v := k.raw(def)
		if v == nil {
			continue
		}
		t, ok := layer[k.table].(map[string]any)
		if !ok {
			t = map[string]any{}
			layer[k.table] = t
		}
		t[k.name] = v
	}
	return layer
}
