package config

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gotoml "github.com/pelletier/go-toml/v2"
)

func TestDefaultHoldsTheDocumentedValues(t *testing.T) {
	cfg := Default()
	r, tel := cfg.Registrar, cfg.Telemetry
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"registrar.socket_path", r.SocketPath, "var/run/registrar.sock"},
		{"registrar.tls_listen", r.TLSListen, ""},
		{"registrar.tls_cert_file", r.TLSCertFile, ""},
		{"registrar.tls_key_file", r.TLSKeyFile, ""},
		{"registrar.tls_client_ca_file", r.TLSClientCAFile, ""},
		{"registrar.state_dir", r.StateDir, "var/lib"},
		{"registrar.audit_record_dir", r.AuditRecordDir, "var/audit"},
		{"registrar.audit_max_file_bytes", r.AuditMaxFileBytes, uint64(8388608)},
		{"registrar.audit_max_retained_files", r.AuditMaxRetainedFiles, uint32(16)},
		{"registrar.audit_store_reserve_bytes", r.AuditStoreReserveBytes, uint64(268435456)},
		{"registrar.rate_limit_admission_burst", r.RateLimitAdmissionBurst, uint32(512)},
		{"registrar.rate_limit_admission_refill_interval_ms", r.RateLimitAdmissionRefillIntervalMS, uint32(500)},
		{"registrar.rate_limit_predecision_refusal_burst", r.RateLimitPredecisionRefusalBurst, uint32(32)},
		{"registrar.rate_limit_predecision_refusal_refill_interval_ms", r.RateLimitPredecisionRefusalRefillIntervalMS, uint32(1000)},
		{"registrar.rate_limit_coalesce_window_seconds", r.RateLimitCoalesceWindowSeconds, uint32(60)},
		{"registrar.maintenance_interval_ms", r.MaintenanceIntervalMS, uint32(1000)},
		{"registrar.max_wrap_ttl_seconds", r.MaxWrapTTLSeconds, uint32(1800)},
		{"registrar.components", r.Components, map[string]Multiplicity{"review": ManyPerHost, "edge-proxy": OnePerHost, "control-plane": OnePerDeployment}},
		{"registrar.extra", r.Extra, map[string]any(nil)},
		{"telemetry.metrics_listen", tel.MetricsListen, "127.0.0.1:9464"},
		{"telemetry.otlp_endpoint", tel.OTLPEndpoint, ""},
		{"telemetry.service_name", tel.ServiceName, "registrar-otel"},
		{"telemetry.trace_sample_per_million", tel.TraceSamplePerMillion, uint32(10_000)},
		{"source", cfg.Source, "embedded defaults"},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %#v, want %#v", c.key, c.got, c.want)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v, want nil", err)
	}
}

func TestDefaultReturnsFreshMapsEachCall(t *testing.T) {
	a := Default()
	a.Registrar.Components["extra"] = OnePerHost
	delete(a.Registrar.Components, "review")
	b := Default()
	if _, ok := b.Registrar.Components["extra"]; ok {
		t.Error("a component added to one Default() leaked into the next")
	}
	if _, ok := b.Registrar.Components["review"]; !ok {
		t.Error("a component deleted from one Default() is missing from the next")
	}
}

func TestCloneCopiesTheMaps(t *testing.T) {
	a := Default()
	a.Registrar.Extra = map[string]any{"k": int64(1)}
	b := a.Clone()
	b.Registrar.Components["new"] = OnePerHost
	b.Registrar.Extra["k2"] = "v"
	if len(a.Registrar.Components) != 3 || len(a.Registrar.Extra) != 1 {
		t.Errorf("mutating a clone changed the original: components %v, extra %v", a.Registrar.Components, a.Registrar.Extra)
	}
}

func TestMultiplicityTextRoundTrips(t *testing.T) {
	for _, m := range []Multiplicity{OnePerDeployment, OnePerHost, ManyPerHost} {
		text, err := m.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText() error: %v", m, err)
		}
		var back Multiplicity
		if err := back.UnmarshalText(text); err != nil || back != m {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v, nil", text, back, err, m)
		}
		if string(text) != m.String() {
			t.Errorf("MarshalText = %q, String = %q; want them equal", text, m.String())
		}
	}
}

func TestParseMultiplicityAcceptsOnlyTheExactSpellings(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Multiplicity
	}{
		{"one-per-deployment", OnePerDeployment},
		{"one-per-host", OnePerHost},
		{"many-per-host", ManyPerHost},
	} {
		if got, err := ParseMultiplicity(c.in); err != nil || got != c.want {
			t.Errorf("ParseMultiplicity(%q) = %v, %v; want %v, nil", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "Many-Per-Host", " many-per-host", "many-per-host ", "many_per_host", "sometimes"} {
		if got, err := ParseMultiplicity(in); !errors.Is(err, ErrInvalidMultiplicity) {
			t.Errorf("ParseMultiplicity(%q) = %v, %v; want ErrInvalidMultiplicity", in, got, err)
		}
	}
}

func TestZeroMultiplicityIsInvalid(t *testing.T) {
	var m Multiplicity
	if m.Valid() {
		t.Error("the zero Multiplicity is valid, want invalid")
	}
	if got, want := m.String(), "multiplicity(0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if _, err := m.MarshalText(); err == nil {
		t.Error("MarshalText of the zero Multiplicity succeeded, want an error")
	}
}

func TestKeyErrorFormatsTheValueAsTOMLWouldSpellIt(t *testing.T) {
	const rule = "must be an unsigned integer"
	k := "registrar.rate_limit_admission_burst"
	for _, c := range []struct {
		name string
		err  KeyError
		want string
	}{
		{"negative", KeyError{Key: k, Value: int64(-3), Rule: rule}, k + " must be an unsigned integer, got -3"},
		{"fraction", KeyError{Key: k, Value: 1.5, Rule: rule}, k + " must be an unsigned integer, got 1.5"},
		{"whole float", KeyError{Key: k, Value: 512.0, Rule: rule}, k + " must be an unsigned integer, got 512.0"},
		{"exponent", KeyError{Key: k, Value: 1e300, Rule: rule}, k + " must be an unsigned integer, got 1e+300"},
		{"nan", KeyError{Key: k, Value: math.NaN(), Rule: rule}, k + " must be an unsigned integer, got nan"},
		{"inf", KeyError{Key: k, Value: math.Inf(1), Rule: rule}, k + " must be an unsigned integer, got inf"},
		{"minus inf", KeyError{Key: k, Value: math.Inf(-1), Rule: rule}, k + " must be an unsigned integer, got -inf"},
		{"string", KeyError{Key: k, Value: "512", Rule: rule}, k + ` must be an unsigned integer, got "512"`},
		{"control characters", KeyError{Key: k, Value: "a\nb\x00", Rule: rule}, k + ` must be an unsigned integer, got "a\nb\x00"`},
		{"bool", KeyError{Key: k, Value: true, Rule: rule}, k + " must be an unsigned integer, got true"},
		{"array", KeyError{Key: k, Value: []any{int64(1)}, Rule: rule}, k + " must be an unsigned integer, got an array"},
		{"table", KeyError{Key: k, Value: map[string]any{}, Rule: rule}, k + " must be an unsigned integer, got a table"},
		{"date", KeyError{Key: k, Value: gotoml.LocalDate{Year: 1979, Month: 5, Day: 27}, Rule: rule}, k + " must be an unsigned integer, got 1979-05-27"},
		{"date-time", KeyError{Key: k, Value: time.Date(1979, 5, 27, 7, 32, 0, 0, time.UTC), Rule: rule}, k + " must be an unsigned integer, got 1979-05-27T07:32:00Z"},
		{"environment", KeyError{Key: k, Value: "-3", Rule: rule, EnvVar: "REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST"},
			k + ` must be an unsigned integer, got "-3" (from environment variable REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST)`},
		{"no value", KeyError{Key: "registrar.tls_key_file", Rule: "is required when registrar.tls_listen is set"},
			"registrar.tls_key_file is required when registrar.tls_listen is set"},
		{"hidden value", KeyError{Key: k, Value: uint32(0), Rule: ruleZeroBurst, hideValue: true},
			"registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Error(); got != c.want {
				t.Errorf("Error() =\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestKeyErrorTruncatesLongStrings(t *testing.T) {
	e := &KeyError{Key: "registrar.state_dir", Value: strings.Repeat("é", 300), Rule: "must not contain a NUL byte"}
	got := e.Error()
	if !strings.HasSuffix(got, `…" (600 bytes)`) && !strings.HasSuffix(got, "… (600 bytes)") {
		t.Errorf("Error() = %q, want it truncated with the length", got)
	}
	if len(got) > 300 {
		t.Errorf("Error() is %d bytes, want a truncated value", len(got))
	}
}

func TestKeyPathQuotesSegmentsThatAreNotBareKeys(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"registrar", "socket_path"}, "registrar.socket_path"},
		{[]string{"registrar", "components", "edge-proxy"}, "registrar.components.edge-proxy"},
		{[]string{"registrar", "a.b"}, `registrar."a.b"`},
		{[]string{"registrar", ""}, `registrar.""`},
		{[]string{"registrar", "line\nbreak"}, `registrar."line\nbreak"`},
	} {
		if got := keyPath(c.parts...); got != c.want {
			t.Errorf("keyPath(%q) = %s, want %s", c.parts, got, c.want)
		}
	}
}

func TestUnknownKeysAreSortedDottedNames(t *testing.T) {
	cfg := Config{Registrar: Registrar{Extra: map[string]any{"zeta": 1, "alpha": 2, "a.b": 3}}}
	got := cfg.UnknownKeys()
	want := []string{`registrar."a.b"`, "registrar.alpha", "registrar.zeta"}
	if !slices.Equal(got, want) {
		t.Errorf("UnknownKeys() = %q, want %q", got, want)
	}
}

func TestComponentNamesMustBeDNSLabels(t *testing.T) {
	for name, want := range map[string]bool{
		"review":                  true,
		"edge-proxy":              true,
		"a":                       true,
		"0":                       true,
		strings.Repeat("a", 63):   true,
		strings.Repeat("a", 64):   false,
		"":                        false,
		"-edge":                   false,
		"edge-":                   false,
		"Edge":                    false,
		"edge_proxy":              false,
		"edge.proxy":              false,
		"édge":                    false,
		"edge proxy":              false,
		"registrar-otel-internal": true,
	} {
		if got := IsDNSLabel(name); got != want {
			t.Errorf("IsDNSLabel(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestValidateReportsEveryRuleOfAHandBuiltConfig(t *testing.T) {
	cfg := Default()
	r := &cfg.Registrar
	r.SocketPath = ""
	r.TLSListen = "no-port"
	r.StateDir = "var/\x00lib"
	r.AuditMaxRetainedFiles = 0
	r.RateLimitCoalesceWindowSeconds = 0
	r.Components["Bad"] = ManyPerHost
	r.Components["zero"] = 0
	cfg.Telemetry.ServiceName = " "
	cfg.Telemetry.TraceSamplePerMillion = 1_000_001
	got := errorLines(cfg.Validate())
	want := `registrar.socket_path must be a non-empty path, got ""
registrar.tls_listen must be host:port with a numeric port (0 to 65535), got "no-port"
registrar.tls_cert_file is required when registrar.tls_listen is set
registrar.tls_key_file is required when registrar.tls_listen is set
registrar.tls_client_ca_file is required when registrar.tls_listen is set
registrar.state_dir must not contain a NUL byte, got "var/\x00lib"
registrar.audit_max_retained_files must be greater than 0; a zero retention deletes every rotated generation of the audit evidence
registrar.rate_limit_coalesce_window_seconds must be greater than 0; a zero window makes every limited invocation its own record, which defeats the coalescing
registrar.components.Bad is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids
registrar.components.zero.multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host", got "multiplicity(0)"
telemetry.service_name must be a non-empty string, got " "
telemetry.trace_sample_per_million must be at most 1000000 (every root trace), got 1000001
`
	if got != want {
		t.Errorf("Validate() errors:\ngot:\n%swant:\n%s", got, want)
	}
}

func TestListenAddressRule(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9464":  true,
		":9464":           true,
		"[::1]:9464":      true,
		"localhost:9464":  true,
		"0.0.0.0:0":       true,
		"localhost":       false,
		"localhost:http":  false,
		"localhost:65536": false,
		"localhost:-1":    false,
		"localhost:":      false,
		"::1:9464":        false,
		"a b:9464":        false,
	} {
		if got := checkHostPort("telemetry.metrics_listen", addr) == nil; got != ok {
			t.Errorf("checkHostPort(%q) accepted = %v, want %v", addr, got, ok)
		}
	}
}

func TestOTLPEndpointRule(t *testing.T) {
	for endpoint, ok := range map[string]bool{
		"http://collector:4318":               true,
		"https://collector.example.net":       true,
		"https://collector:4318/v1/traces":    true,
		"collector:4318":                      false,
		"grpc://collector:4317":               false,
		"http://":                             false,
		"http:///path":                        false,
		"https://:4318":                       false,
		"http://collector:4318/%zz":           false,
		"ftp://collector.example.net/metrics": false,
	} {
		if got := checkEndpoint("telemetry.otlp_endpoint", endpoint) == nil; got != ok {
			t.Errorf("checkEndpoint(%q) accepted = %v, want %v", endpoint, got, ok)
		}
	}
}

func TestKeysListsEveryKnownKey(t *testing.T) {
	keys := Keys()
	if len(keys) != 44 {
		t.Fatalf("Keys() has %d keys, want the 28 [registrar], 6 [telemetry] and 10 [openbao] keys: %v", len(keys), keys)
	}
	for _, want := range []string{"registrar.rate_limit_admission_burst", "registrar.idle_timeout_ms", "registrar.max_conns_per_identity", "registrar.components.<name>.multiplicity", "telemetry.trace_sample_per_million", "registrar.backend", "registrar.log_level", "openbao.secret_id_num_uses"} {
		if !slices.Contains(keys, want) {
			t.Errorf("Keys() lacks %s", want)
		}
	}
}
