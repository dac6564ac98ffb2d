package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// mustLoadBytes loads a TOML document given inline and fails on any error.
func mustLoadBytes(t *testing.T, doc string, environ ...string) Config {
	t.Helper()
	cfg, err := loadBytes("test.toml", []byte(doc), environ, nil)
	if err != nil {
		t.Fatalf("loading\n%s\nfailed:\n%s", doc, errorLines(err))
	}
	return cfg
}

// loadErrors loads a TOML document given inline and returns its error lines.
func loadErrors(t *testing.T, doc string, environ ...string) string {
	t.Helper()
	cfg, err := loadBytes("test.toml", []byte(doc), environ, nil)
	if err == nil {
		t.Fatalf("loading\n%s\nsucceeded, want an error", doc)
	}
	if !reflect.DeepEqual(cfg, Config{}) {
		t.Errorf("on error Load returned %+v, want the zero Config", cfg)
	}
	return errorLines(err)
}

func TestLoadWithoutAFileReturnsTheEmbeddedDefaults(t *testing.T) {
	cfg, err := Load("", nil, nil)
	if err != nil {
		t.Fatalf("Load(\"\") error: %v", err)
	}
	if want := Default(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load(\"\") = %+v\nwant %+v", cfg, want)
	}
	if got, want := cfg.Registrar.RateLimitCoalesceWindowSeconds, uint32(60); got != want {
		t.Errorf("rate_limit_coalesce_window_seconds = %d, want %d", got, want)
	}
}

func TestAnEmptyFileLoadsTheDefaultsWithoutComponents(t *testing.T) {
	cfg := mustLoadBytes(t, "")
	want := Default()
	want.Source = "test.toml"
	want.Registrar.Components = map[string]vocab.Multiplicity{}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("empty file = %+v\nwant %+v", cfg, want)
	}
}

func TestComponentsOfAFileReplaceTheExamples(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "valid_minimal.toml"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]vocab.Multiplicity{"review": vocab.ManyPerHost}
	if !reflect.DeepEqual(cfg.Registrar.Components, want) {
		t.Errorf("components = %v, want %v (the examples must not be merged into a file's)", cfg.Registrar.Components, want)
	}
}

func TestFullFixtureSetsEveryKey(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "valid_full.toml"), nil, nil)
	if err != nil {
		t.Fatal(errorLines(err))
	}
	want := Config{
		Registrar: Registrar{
			SocketPath:            "/run/registrar-otel/registrar.sock",
			SocketGroup:           "registrar-callers",
			SubuidFile:            "/etc/registrar-otel/subuid",
			TLSListen:             "0.0.0.0:8443",
			TLSCertFile:           "/etc/registrar-otel/tls/server.crt",
			TLSKeyFile:            "/etc/registrar-otel/tls/server.key",
			TLSClientCAFile:       "/etc/registrar-otel/tls/clients-ca.crt",
			StateDir:              "/var/lib/registrar-otel",
			AuditRecordDir:        "/var/log/registrar-otel/audit",
			AuditMaxFileBytes:     16777216,
			AuditMaxRetainedFiles: 32,

			AuditStoreReserveBytes:   1073741824,
			AuditMinRetentionSeconds: 86400,

			RateLimitAdmissionBurst:                     1024,
			RateLimitAdmissionRefillIntervalMS:          250,
			RateLimitPredecisionRefusalBurst:            16,
			RateLimitPredecisionRefusalRefillIntervalMS: 2000,
			Instances:                      2,
			RateLimitCoalesceWindowSeconds: 120,
			MaintenanceIntervalMS:          500,
			MaxWrapTTLSeconds:              900,
			Components: map[string]vocab.Multiplicity{
				"review": vocab.ManyPerHost, "edge-proxy": vocab.OnePerHost, "control-plane": vocab.OnePerDeployment,
			},
			MaxInstancesPerHost: map[string]uint32{"review": 4},
			Callers: []CallerPolicy{
				{
					Name:             "agents",
					IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/host/", "registrar-client:dns:"},
					// Unset: [registrar]'s sizes; the shadow's unset
					// keys: the policy's.
					Sizes:  CallerSizes{AdmissionBurst: 1024, AdmissionRefillIntervalMS: 250, PredecisionRefusalBurst: 16, PredecisionRefusalRefillIntervalMS: 2000},
					Shadow: &CallerSizes{AdmissionBurst: 8, AdmissionRefillIntervalMS: 250, PredecisionRefusalBurst: 16, PredecisionRefusalRefillIntervalMS: 2000, Set: SetAdmissionBurst},
					Scope: callers.ScopeSpec{Services: []string{"review", "edge-*"}, Components: []string{"review", "edge-proxy"},
						Hosts: []string{"{identity}"}, Verbs: []string{"mint"}},
					Owner:            vocab.OwnerPolicy,
					MaxRegistrations: 1000,
				},
				{
					Name:             "control-plane",
					Identities:       []string{"unix-peer:uid=0", "registrar-client:dns:deployer.example.net"},
					IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/control-plane/"},
					Sizes: CallerSizes{AdmissionBurst: 1600, AdmissionRefillIntervalMS: 100, PredecisionRefusalBurst: 64, PredecisionRefusalRefillIntervalMS: 500,
						Set: SetAdmissionBurst | SetAdmissionRefillInterval | SetPredecisionRefusalBurst | SetPredecisionRefusalRefillInterval},
					Shadow: &CallerSizes{AdmissionBurst: 800, AdmissionRefillIntervalMS: 200, PredecisionRefusalBurst: 48, PredecisionRefusalRefillIntervalMS: 750,
						Set: SetAdmissionBurst | SetAdmissionRefillInterval | SetPredecisionRefusalBurst | SetPredecisionRefusalRefillInterval},
					Owner: vocab.OwnerAny,
				},
				{
					Name:             "local",
					IdentityPrefixes: []string{"unix-peer:"},
					Sizes:            CallerSizes{AdmissionBurst: 1024, AdmissionRefillIntervalMS: 250, PredecisionRefusalBurst: 16, PredecisionRefusalRefillIntervalMS: 2000},
					Scope:            callers.ScopeSpec{Components: []string{"rev*"}},
					Owner:            vocab.OwnerSelf,
				},
			},
			UnixMaxConns:           256,
			TLSMaxConns:            512,
			TLSHandshakeMaxConns:   64,
			TLSHandshakeTimeoutMS:  2000,
			MaxConnsPerIdentity:    8,
			ReadHeaderTimeoutMS:    2000,
			ReadBodyTimeoutMS:      1500,
			IdleTimeoutMS:          30000,
			MaxInFlightPerIdentity: 32,
			SharedInFlight:         4,
			WaitTimeoutMS:          1000,
			RefusalPaceMS:          40,
			Backend:                BackendOpenBao,
			LogLevel:               slog.LevelDebug,
		},
		Telemetry: Telemetry{
			MetricsListen:         "[::1]:9464",
			OTLPEndpoint:          "https://otel-collector.example.net:4318",
			ServiceName:           "registrar-otel-eu1",
			ServiceInstanceID:     "registrar-eu1-a",
			TraceSamplePerMillion: 250_000,

			OTLPTracesEndpoint:  "https://traces.example.net:4318/v1/traces",
			OTLPMetricsEndpoint: "none",
		},
		OpenBao: OpenBao{
			Address:            "https://openbao-1.example.net:8200, https://openbao-2.example.net:8200, https://openbao-3.example.net:8200",
			CAFile:             "/etc/registrar-otel/openbao-ca.pem",
			TokenFile:          "/etc/registrar-otel/openbao-token",
			KVMount:            "kv",
			KVPrefix:           "bootroot/registrar",
			AppRoleMount:       "bootroot-approle",
			RequestTimeoutMS:   2000,
			ReadinessGraceMS:   15000,
			MaxInFlight:        8,
			SecretIDTTLSeconds: 1800,
			SecretIDNumUses:    3,
		},
		Source: filepath.Join("testdata", "valid_full.toml"),
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("valid_full.toml =\n%+v\nwant\n%+v", cfg, want)
	}
	// Every field differs from its default, so no key can be silently ignored.
	def := Default()
	rv, dv := reflect.ValueOf(cfg.Registrar), reflect.ValueOf(def.Registrar)
	for i := range rv.NumField() {
		name := rv.Type().Field(i).Name
		if name == "Components" || name == "Extra" {
			continue
		}
		if reflect.DeepEqual(rv.Field(i).Interface(), dv.Field(i).Interface()) {
			t.Errorf("valid_full.toml leaves Registrar.%s at its default; set it to prove the key is read", name)
		}
	}
	tv, tdv := reflect.ValueOf(cfg.Telemetry), reflect.ValueOf(def.Telemetry)
	for i := range tv.NumField() {
		if reflect.DeepEqual(tv.Field(i).Interface(), tdv.Field(i).Interface()) {
			t.Errorf("valid_full.toml leaves Telemetry.%s at its default", tv.Type().Field(i).Name)
		}
	}
	ov, odv := reflect.ValueOf(cfg.OpenBao), reflect.ValueOf(def.OpenBao)
	for i := range ov.NumField() {
		if reflect.DeepEqual(ov.Field(i).Interface(), odv.Field(i).Interface()) {
			t.Errorf("valid_full.toml leaves OpenBao.%s at its default", ov.Type().Field(i).Name)
		}
	}
}

var rateLimitZeroMessages = []struct {
	key, want string
}{
	{"rate_limit_admission_burst", "registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint"},
	{"rate_limit_admission_refill_interval_ms", "registrar.rate_limit_admission_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently"},
	{"rate_limit_predecision_refusal_burst", "registrar.rate_limit_predecision_refusal_burst must be greater than 0; a zero burst throttles the first legitimate mint"},
	{"rate_limit_predecision_refusal_refill_interval_ms", "registrar.rate_limit_predecision_refusal_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently"},
	{"rate_limit_coalesce_window_seconds", "registrar.rate_limit_coalesce_window_seconds must be greater than 0; a zero window makes every limited invocation its own record, which defeats the coalescing"},
}

func TestEachRateLimitKeyAtZeroFailsNamingTheKey(t *testing.T) {
	for _, c := range rateLimitZeroMessages {
		t.Run(c.key, func(t *testing.T) {
			_, err := loadBytes("test.toml", []byte("[registrar]\n"+c.key+" = 0\n"), nil, nil)
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error = %v, want a *KeyError", err)
			}
			if got, want := ke.Key, "registrar."+c.key; got != want {
				t.Errorf("KeyError.Key = %q, want %q", got, want)
			}
			if got := errorLines(err); got != c.want+"\n" {
				t.Errorf("errors:\n%swant:\n%s", got, c.want)
			}
		})
	}
}

func TestEachRateLimitKeyLoadsItsValue(t *testing.T) {
	cfg := mustLoadBytes(t, `[registrar]
rate_limit_admission_burst = 7
rate_limit_admission_refill_interval_ms = 8
rate_limit_predecision_refusal_burst = 9
rate_limit_predecision_refusal_refill_interval_ms = 10
rate_limit_coalesce_window_seconds = 4294967295
`)
	r := cfg.Registrar
	got := []uint32{r.RateLimitAdmissionBurst, r.RateLimitAdmissionRefillIntervalMS, r.RateLimitPredecisionRefusalBurst,
		r.RateLimitPredecisionRefusalRefillIntervalMS, r.RateLimitCoalesceWindowSeconds}
	if want := []uint32{7, 8, 9, 10, 4294967295}; !slices.Equal(got, want) {
		t.Errorf("rate limits = %v, want %v", got, want)
	}
}

// warnings captures what Load logs, as (level, msg, key) records.
type logRecord struct {
	Level, Msg, Key string
}

func captureLog(t *testing.T) (*slog.Logger, func() []logRecord) {
	t.Helper()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return logger, func() []logRecord {
		var out []logRecord
		dec := json.NewDecoder(&buf)
		for dec.More() {
			var r logRecord
			if err := dec.Decode(&r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
}

func TestEveryUnknownKeyIsWarnedOnceNamingIt(t *testing.T) {
	logger, records := captureLog(t)
	if _, err := Load(filepath.Join("testdata", "valid_unknown_keys.toml"), nil, logger); err != nil {
		t.Fatal(errorLines(err))
	}
	count := map[string]int{}
	for _, r := range records() {
		if r.Level != "WARN" {
			t.Errorf("logged %q at %s, want WARN", r.Msg, r.Level)
		}
		count[r.Key]++
	}
	want := map[string]int{
		`registrar."quoted.key"`:             1,
		"registrar.audit_store_backend":      1,
		"registrar.audit_store_day":          1,
		"registrar.audit_store_enabled":      1,
		"registrar.audit_store_extra":        1,
		"registrar.audit_store_hours":        1,
		"registrar.audit_store_local":        1,
		"registrar.audit_store_mixed":        1,
		"registrar.audit_store_rules":        1,
		"registrar.audit_store_window":       1,
		"registrar.audit_store_max_segments": 1,
		"registrar.audit_store_ratio":        1,
		"registrar.audit_store_since":        1,
		"registrar.components.review.owner":  1,
		"telemetry.log_format":               1,
		"future_table":                       1,
	}
	if !reflect.DeepEqual(count, want) {
		t.Errorf("warnings per key = %v\nwant %v", count, want)
	}
}

func TestAKnownFileLogsNothing(t *testing.T) {
	logger, records := captureLog(t)
	if _, err := Load(filepath.Join("testdata", "valid_full.toml"), nil, logger); err != nil {
		t.Fatal(errorLines(err))
	}
	if got := records(); len(got) != 0 {
		t.Errorf("loading valid_full.toml logged %v, want nothing", got)
	}
}

func TestQuestionableButValidSettingsAreWarned(t *testing.T) {
	logger, records := captureLog(t)
	if _, err := loadBytes("test.toml", []byte("[registrar]\ntls_cert_file = \"c.pem\"\n"), nil, logger); err != nil {
		t.Fatal(errorLines(err))
	}
	var keys []string
	for _, r := range records() {
		keys = append(keys, r.Key)
	}
	if want := []string{"registrar.tls_cert_file", "registrar.components"}; !slices.Equal(keys, want) {
		t.Errorf("warned keys = %q, want %q", keys, want)
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	file := `[registrar]
rate_limit_admission_burst = 1024
socket_path = "/run/file.sock"
[registrar.components.review]
multiplicity = "many-per-host"
[telemetry]
otlp_endpoint = "http://collector:4318"
`
	for _, c := range []struct {
		name  string
		env   []string
		check func(Config) (got, want any)
	}{
		{"integer", []string{"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST=600"},
			func(c Config) (any, any) { return c.Registrar.RateLimitAdmissionBurst, uint32(600) }},
		{"leading zeros", []string{"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_COALESCE_WINDOW_SECONDS=0090"},
			func(c Config) (any, any) { return c.Registrar.RateLimitCoalesceWindowSeconds, uint32(90) }},
		{"u64", []string{"REGISTRAR_OTEL_REGISTRAR__AUDIT_MAX_FILE_BYTES=18446744073709551615"},
			func(c Config) (any, any) { return c.Registrar.AuditMaxFileBytes, uint64(18446744073709551615) }},
		{"string", []string{"REGISTRAR_OTEL_REGISTRAR__SOCKET_PATH=/run/env.sock"},
			func(c Config) (any, any) { return c.Registrar.SocketPath, "/run/env.sock" }},
		{"value containing =", []string{"REGISTRAR_OTEL_TELEMETRY__OTLP_ENDPOINT=http://c:4318/otlp/a=b"},
			func(c Config) (any, any) { return c.Telemetry.OTLPEndpoint, "http://c:4318/otlp/a=b" }},
		{"empty string disables", []string{"REGISTRAR_OTEL_TELEMETRY__OTLP_ENDPOINT="},
			func(c Config) (any, any) { return c.Telemetry.OTLPEndpoint, "" }},
		{"telemetry", []string{"REGISTRAR_OTEL_TELEMETRY__METRICS_LISTEN=0.0.0.0:9000"},
			func(c Config) (any, any) { return c.Telemetry.MetricsListen, "0.0.0.0:9000" }},
		{"sample rate", []string{"REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_PER_MILLION=125000"},
			func(c Config) (any, any) { return c.Telemetry.TraceSamplePerMillion, uint32(125_000) }},
		{"component added", []string{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY=one-per-host"},
			func(c Config) (any, any) {
				return c.Registrar.Components, map[string]vocab.Multiplicity{"review": vocab.ManyPerHost, "edge": vocab.OnePerHost}
			}},
		{"component changed", []string{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__REVIEW__MULTIPLICITY=one-per-host"},
			func(c Config) (any, any) {
				return c.Registrar.Components, map[string]vocab.Multiplicity{"review": vocab.OnePerHost}
			}},
		{"unknown registrar key kept as text", []string{"REGISTRAR_OTEL_REGISTRAR__AUDIT_STORE_MAX_SEGMENTS=12"},
			func(c Config) (any, any) { return c.Registrar.Extra, map[string]any{"audit_store_max_segments": "12"} }},
		{"other variables ignored", []string{"PATH=/bin", "REGISTRAR_OTELX=1", "registrar_otel_registrar__socket_path=/x", "NOEQUALS"},
			func(c Config) (any, any) { return c.Registrar.SocketPath, "/run/file.sock" }},
		{"last duplicate wins", []string{"REGISTRAR_OTEL_REGISTRAR__SOCKET_PATH=/a", "REGISTRAR_OTEL_REGISTRAR__SOCKET_PATH=/b"},
			func(c Config) (any, any) { return c.Registrar.SocketPath, "/b" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustLoadBytes(t, file, c.env...)
			if got, want := c.check(cfg); !reflect.DeepEqual(got, want) {
				t.Errorf("got %#v, want %#v", got, want)
			}
		})
	}
}

func TestEnvironmentOverridesTheDefaultsWithoutAFile(t *testing.T) {
	cfg, err := Load("", []string{
		"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST=600",
		"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY=one-per-host",
	}, nil)
	if err != nil {
		t.Fatal(errorLines(err))
	}
	if got := cfg.Registrar.RateLimitAdmissionBurst; got != 600 {
		t.Errorf("rate_limit_admission_burst = %d, want 600", got)
	}
	want := map[string]vocab.Multiplicity{"review": vocab.ManyPerHost, "edge-proxy": vocab.OnePerHost, "control-plane": vocab.OnePerDeployment, "edge": vocab.OnePerHost}
	if !reflect.DeepEqual(cfg.Registrar.Components, want) {
		t.Errorf("components = %v, want the examples plus edge: %v", cfg.Registrar.Components, want)
	}
	if cfg.Source != "embedded defaults" {
		t.Errorf("Source = %q, want %q", cfg.Source, "embedded defaults")
	}
}

func TestEnvironmentIntegersAreParsedStrictly(t *testing.T) {
	const v = "REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_PREDECISION_REFUSAL_BURST"
	const key = "registrar.rate_limit_predecision_refusal_burst"
	for _, c := range []struct{ value, want string }{
		{"-3", `must be an unsigned integer, got "-3"`},
		{"1.5", `must be an unsigned integer, got "1.5"`},
		{"0x10", `must be an unsigned integer, got "0x10"`},
		{"+5", `must be an unsigned integer, got "+5"`},
		{" 5", `must be an unsigned integer, got " 5"`},
		{"5 ", `must be an unsigned integer, got "5 "`},
		{"1_000", `must be an unsigned integer, got "1_000"`},
		{"abc", `must be an unsigned integer, got "abc"`},
		{"true", `must be an unsigned integer, got "true"`},
		{"", `must be an unsigned integer, got ""`},
		{"٣", `must be an unsigned integer, got "٣"`},
		{"4294967296", `must be at most 4294967295, got "4294967296"`},
		{"99999999999999999999999", `must be at most 4294967295, got "99999999999999999999999"`},
		{"0", "must be greater than 0; a zero burst throttles the first legitimate mint"},
		{"000", "must be greater than 0; a zero burst throttles the first legitimate mint"},
	} {
		t.Run(c.value, func(t *testing.T) {
			got := loadErrors(t, "", v+"="+c.value)
			want := key + " " + c.want + " (from environment variable " + v + ")\n"
			if got != want {
				t.Errorf("errors:\n%swant:\n%s", got, want)
			}
			_, err := loadBytes("test.toml", nil, []string{v + "=" + c.value}, nil)
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != key || ke.EnvVar != v {
				t.Errorf("error = %#v, want a *KeyError with Key %q and EnvVar %q", ke, key, v)
			}
		})
	}
}

func TestEnvironmentValuesOfOtherKeysAreChecked(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"REGISTRAR_OTEL_REGISTRAR__AUDIT_MAX_FILE_BYTES=1024",
			`registrar.audit_max_file_bytes must be at least 65536, got "1024" (from environment variable REGISTRAR_OTEL_REGISTRAR__AUDIT_MAX_FILE_BYTES)`},
		{"REGISTRAR_OTEL_REGISTRAR__AUDIT_MAX_FILE_BYTES=18446744073709551616",
			`registrar.audit_max_file_bytes must be at most 18446744073709551615, got "18446744073709551616" (from environment variable REGISTRAR_OTEL_REGISTRAR__AUDIT_MAX_FILE_BYTES)`},
		{"REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_PER_MILLION=1000001",
			`telemetry.trace_sample_per_million must be at most 1000000 (every root trace), got "1000001" (from environment variable REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_PER_MILLION)`},
		{"REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_PER_MILLION=0.5",
			`telemetry.trace_sample_per_million must be an unsigned integer, got "0.5" (from environment variable REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_PER_MILLION)`},
		{"REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_RATIO=0.125",
			`telemetry.trace_sample_ratio is no longer a key: use telemetry.trace_sample_per_million = 125000 (the same rate, as an integer from 0 to 1000000), got "0.125" (from environment variable REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_RATIO)`},
		{"REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_RATIO=NaN",
			`telemetry.trace_sample_ratio is no longer a key: use telemetry.trace_sample_per_million, an integer from 0 to 1000000 (1 in 100 is 10000), got "NaN" (from environment variable REGISTRAR_OTEL_TELEMETRY__TRACE_SAMPLE_RATIO)`},
		{"REGISTRAR_OTEL_TELEMETRY__METRICS_LISTEN=localhost",
			`telemetry.metrics_listen must be host:port with a numeric port (0 to 65535), got "localhost" (from environment variable REGISTRAR_OTEL_TELEMETRY__METRICS_LISTEN)`},
		{"REGISTRAR_OTEL_TELEMETRY__SERVICE_NAME=",
			`telemetry.service_name must be a non-empty string, got "" (from environment variable REGISTRAR_OTEL_TELEMETRY__SERVICE_NAME)`},
		{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY=sometimes",
			`registrar.components.edge.multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host", got "sometimes" (from environment variable REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY)`},
		{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE_PROXY__MULTIPLICITY=one-per-host",
			`registrar.components.edge_proxy is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids`},
		{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS=review",
			`registrar.components must be a table, got "review" (from environment variable REGISTRAR_OTEL_REGISTRAR__COMPONENTS)`},
		{"REGISTRAR_OTEL_REGISTRAR__TLS_LISTEN=:8443",
			"registrar.tls_cert_file is required when registrar.tls_listen is set\n" +
				"registrar.tls_key_file is required when registrar.tls_listen is set\n" +
				"registrar.tls_client_ca_file is required when registrar.tls_listen is set"},
	} {
		if got := loadErrors(t, "", c.env); got != c.want+"\n" {
			t.Errorf("%s: errors:\n%swant:\n%s", c.env, got, c.want)
		}
	}
}

func TestEnvironmentVariablesThatNameNoKeyAreErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"REGISTRAR_OTEL_REGISTRAR__=1"},
			`REGISTRAR_OTEL_REGISTRAR__ does not name a configuration key: the key names after REGISTRAR_OTEL_ are separated by "__" and none may be empty`},
		{[]string{"REGISTRAR_OTEL_REGISTRAR____SOCKET_PATH=/x"},
			`REGISTRAR_OTEL_REGISTRAR____SOCKET_PATH does not name a configuration key: the key names after REGISTRAR_OTEL_ are separated by "__" and none may be empty`},
		{[]string{"REGISTRAR_OTEL_=1"},
			`REGISTRAR_OTEL_ does not name a configuration key: the key names after REGISTRAR_OTEL_ are separated by "__" and none may be empty`},
		{[]string{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE=x", "REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY=one-per-host"},
			`registrar.components.edge is set as a value by REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE and as a table by REGISTRAR_OTEL_REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY`},
	} {
		if got := loadErrors(t, "", c.env...); got != c.want+"\n" {
			t.Errorf("%q: errors:\n%swant:\n%s", c.env, got, c.want)
		}
	}
}

func TestAMissingFileNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.toml")
	_, err := Load(path, nil, nil)
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != path {
		t.Fatalf("error = %v, want a *FileError for %s", err, path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(err, fs.ErrNotExist) = false for %v", err)
	}
	if got, want := err.Error(), path+": cannot read configuration file: no such file or directory"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestADirectoryIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir, nil, nil)
	var fe *FileError
	if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), dir+": cannot read configuration file: ") {
		t.Errorf("error = %v, want a *FileError naming %s", err, dir)
	}
}

func TestSyntaxErrorsNameTheFileAndPosition(t *testing.T) {
	for _, c := range []struct {
		doc             string
		line, column    int
		wantMsgContains string
	}{
		{"[registrar]\nrate_limit_admission_burst 512\n", 2, 28, "expected character ="},
		{"[registrar]\nrate_limit_admission_burst = 99999999999999999999\n", 2, 30, ""},
		{"[registrar]\nsocket_path = \"a\"\nsocket_path = \"b\"\n", 3, 0, "key socket_path is already defined"},
		{"[registrar]\nsocket_path = \"a\"\n\n[telemetry]\n[registrar]\n", 5, 0, "table registrar already exists"},
		{"a = 1\nb = \"\"\"\nx\n\"\"\"\na = 2\n", 5, 0, "key a is already defined"},
		{"[registrar\n", 1, 11, ""},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "bad.toml")
		if err := os.WriteFile(path, []byte(c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, nil, nil)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error = %v, want a *SyntaxError", c.doc, err)
			continue
		}
		if se.File != path || se.Line != c.line || se.Column != c.column {
			t.Errorf("%q: SyntaxError at %s:%d:%d, want %s:%d:%d", c.doc, se.File, se.Line, se.Column, path, c.line, c.column)
		}
		prefix := path + ":" + strconv.Itoa(c.line) + ":" + strconv.Itoa(c.column) + ": invalid TOML: "
		if c.column == 0 { // the parser gives no position; Load finds the line
			prefix = path + ":" + strconv.Itoa(c.line) + ": invalid TOML: "
		}
		if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, c.wantMsgContains) || strings.Contains(msg, "\n") {
			t.Errorf("%q: error = %q, want one line starting %q", c.doc, msg, prefix)
		}
	}
}

func TestLoadIsSafeForConcurrentUse(t *testing.T) {
	path := filepath.Join("testdata", "valid_full.toml")
	done := make(chan error)
	for range 8 {
		go func() {
			_, err := Load(path, []string{"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST=600"}, nil)
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestAuditStoreReserveBytes(t *testing.T) {
	if got := Default().Registrar.AuditStoreReserveBytes; got != 256<<20 {
		t.Errorf("default reserve %d, want 256 MiB", got)
	}
	for _, c := range []struct {
		toml string
		want uint64
	}{
		{"0", 0}, // documented: no reserve
		{"1", 1},
		{"0x4000_0000", 1 << 30},
		{"1152921504606846976", 1 << 60},
	} {
		cfg := mustLoadBytes(t, "[registrar]\naudit_store_reserve_bytes = "+c.toml+"\nfuture_key = 3\n")
		if got := cfg.Registrar.AuditStoreReserveBytes; got != c.want {
			t.Errorf("audit_store_reserve_bytes = %s loaded as %d, want %d", c.toml, got, c.want)
		}
		if got := cfg.Registrar.Extra["future_key"]; got != int64(3) {
			t.Errorf("an unknown key beside the reserve was not kept: %v", got)
		}
	}
	for _, c := range []struct{ toml, want string }{
		{"1152921504606846977", "registrar.audit_store_reserve_bytes must be at most 1152921504606846976, got 1152921504606846977\n"},
		{"9223372036854775807", "registrar.audit_store_reserve_bytes must be at most 1152921504606846976, got 9223372036854775807\n"},
		{"-1", "registrar.audit_store_reserve_bytes must be an unsigned integer, got -1\n"},
		{"1.5", "registrar.audit_store_reserve_bytes must be an unsigned integer, got 1.5\n"},
		{"1e30", "registrar.audit_store_reserve_bytes must be an unsigned integer, got 1e+30\n"},
	} {
		if got := loadErrors(t, "[registrar]\naudit_store_reserve_bytes = "+c.toml+"\n"); got != c.want {
			t.Errorf("audit_store_reserve_bytes = %s: errors\n%swant\n%s", c.toml, got, c.want)
		}
	}
	// From the environment, beyond every integer type too.
	for _, v := range []string{"18446744073709551616", "99999999999999999999999"} {
		_, err := Load("", []string{"REGISTRAR_OTEL_REGISTRAR__AUDIT_STORE_RESERVE_BYTES=" + v}, nil)
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != "registrar.audit_store_reserve_bytes" || !strings.Contains(err.Error(), "must be at most 1152921504606846976") {
			t.Errorf("reserve %s from the environment: %v, want a key-named range error", v, err)
		}
	}
	// Built in code: Validate applies the same bound.
	cfg := Default()
	cfg.Registrar.AuditStoreReserveBytes = 1<<60 + 1
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "registrar.audit_store_reserve_bytes must be at most") {
		t.Errorf("Validate: %v", err)
	}
}
