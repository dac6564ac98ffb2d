package config

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/registrar-otel/registrar-otel/vocab"
)

var integerKeys = []string{
	"audit_max_file_bytes",
	"audit_max_retained_files",
	"audit_store_reserve_bytes",
	"rate_limit_admission_burst",
	"rate_limit_admission_refill_interval_ms",
	"rate_limit_predecision_refusal_burst",
	"rate_limit_predecision_refusal_refill_interval_ms",
	"rate_limit_coalesce_window_seconds",
	"maintenance_interval_ms",
	"max_wrap_ttl_seconds",
}

func TestIntegerKeysRejectEveryNonIntegerNamingTheKey(t *testing.T) {
	for _, key := range integerKeys {
		for _, c := range []struct{ toml, got string }{
			{"-3", "-3"},
			{"-9223372036854775808", "-9223372036854775808"},
			{"1.5", "1.5"},
			{"60.0", "60.0"},
			{"1e3", "1000.0"},
			{"inf", "inf"},
			{"nan", "nan"},
			{`"512"`, `"512"`},
			{`''`, `""`},
			{"true", "true"},
			{"false", "false"},
			{"[512]", "an array"},
			{"{ value = 512 }", "a table"},
			{"1979-05-27", "1979-05-27"},
			{"07:32:00", "07:32:00"},
			{"1979-05-27T07:32:00", "1979-05-27T07:32:00"},
			{"1979-05-27T07:32:00Z", "1979-05-27T07:32:00Z"},
		} {
			t.Run(key+"="+c.toml, func(t *testing.T) {
				got := loadErrors(t, "[registrar]\n"+key+" = "+c.toml+"\n")
				want := "registrar." + key + " must be an unsigned integer, got " + c.got + "\n"
				if got != want {
					t.Errorf("errors:\n%swant:\n%s", got, want)
				}
			})
		}
	}
}

func TestU32KeysRejectValuesAboveTheirRange(t *testing.T) {
	for _, key := range integerKeys {
		if key == "audit_max_file_bytes" || key == "audit_store_reserve_bytes" {
			continue // u64 keys, tested on their own
		}
		t.Run(key, func(t *testing.T) {
			got := loadErrors(t, "[registrar]\n"+key+" = 4294967296\n")
			want := "registrar." + key + " must be at most 4294967295, got 4294967296\n"
			if got != want {
				t.Errorf("errors:\n%swant:\n%s", got, want)
			}
		})
	}
	cfg := mustLoadBytes(t, "[registrar]\naudit_max_file_bytes = 9223372036854775807\n")
	if got := cfg.Registrar.AuditMaxFileBytes; got != 9223372036854775807 {
		t.Errorf("audit_max_file_bytes = %d, want the largest TOML integer", got)
	}
}

func TestStringKeysRejectOtherTypesNamingTheKey(t *testing.T) {
	for _, key := range []string{
		"registrar.socket_path", "registrar.socket_group", "registrar.tls_listen", "registrar.tls_cert_file", "registrar.tls_key_file",
		"registrar.tls_client_ca_file", "registrar.state_dir", "registrar.audit_record_dir",
		"telemetry.metrics_listen", "telemetry.otlp_endpoint", "telemetry.service_name",
	} {
		table, name, _ := strings.Cut(key, ".")
		got := loadErrors(t, "["+table+"]\n"+name+" = 5\n")
		if want := key + " must be a string, got 5\n"; got != want {
			t.Errorf("%s = 5: errors:\n%swant:\n%s", key, got, want)
		}
	}
}

// TestTraceSamplePerMillion: the rate is an integer key, 0 to a million,
// refused as every integer key is when it is not one; the float key it
// replaced is refused by name, naming the replacement and, where it can,
// the integer that keeps the file's rate.
func TestTraceSamplePerMillion(t *testing.T) {
	for _, c := range []struct {
		toml string
		want uint32
	}{{"0", 0}, {"1", 1}, {"10000", 10_000}, {"1000000", 1_000_000}} {
		cfg := mustLoadBytes(t, "[telemetry]\ntrace_sample_per_million = "+c.toml+"\n")
		if got := cfg.Telemetry.TraceSamplePerMillion; got != c.want {
			t.Errorf("trace_sample_per_million = %s: got %v, want %v", c.toml, got, c.want)
		}
		if got, want := cfg.Telemetry.TraceSampleRatio(), float64(c.want)/1e6; got != want {
			t.Errorf("trace_sample_per_million = %s: ratio %v, want %v", c.toml, got, want)
		}
	}
	for _, c := range []struct{ toml, want string }{
		{"trace_sample_per_million = 1000001", "telemetry.trace_sample_per_million must be at most 1000000 (every root trace), got 1000001"},
		{"trace_sample_per_million = 0.01", "telemetry.trace_sample_per_million must be an unsigned integer, got 0.01"},
		{"trace_sample_per_million = -1", "telemetry.trace_sample_per_million must be an unsigned integer, got -1"},
		{`trace_sample_per_million = "10000"`, `telemetry.trace_sample_per_million must be an unsigned integer, got "10000"`},
		{"trace_sample_ratio = 0.01", "telemetry.trace_sample_ratio is no longer a key: use telemetry.trace_sample_per_million = 10000 (the same rate, as an integer from 0 to 1000000), got 0.01"},
		{"trace_sample_ratio = 1", "telemetry.trace_sample_ratio is no longer a key: use telemetry.trace_sample_per_million = 1000000 (the same rate, as an integer from 0 to 1000000), got 1"},
		{"trace_sample_ratio = 1.5", "telemetry.trace_sample_ratio is no longer a key: use telemetry.trace_sample_per_million, an integer from 0 to 1000000 (1 in 100 is 10000), got 1.5"},
		{`trace_sample_ratio = "x"`, `telemetry.trace_sample_ratio is no longer a key: use telemetry.trace_sample_per_million, an integer from 0 to 1000000 (1 in 100 is 10000), got "x"`},
	} {
		got := loadErrors(t, "[telemetry]\n"+c.toml+"\n")
		if want := c.want + "\n"; got != want {
			t.Errorf("%s: errors:\n%swant:\n%s", c.toml, got, want)
		}
	}
}

func TestUnknownRegistrarKeysSurviveUntouched(t *testing.T) {
	path := filepath.Join("testdata", "valid_unknown_keys.toml")
	cfg, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(errorLines(err))
	}
	// What the TOML parser itself produces for the [registrar] table, minus
	// the keys this version knows.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := gotoml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(doc["registrar"].(map[string]any))
	delete(want, "rate_limit_admission_burst")
	delete(want, "components")
	if !reflect.DeepEqual(cfg.Registrar.Extra, want) {
		t.Errorf("Extra =\n%#v\nwant (as parsed)\n%#v", cfg.Registrar.Extra, want)
	}
	wantKeys := []string{
		`registrar."quoted.key"`,
		"registrar.audit_store_backend", "registrar.audit_store_day", "registrar.audit_store_enabled",
		"registrar.audit_store_extra", "registrar.audit_store_hours", "registrar.audit_store_local",
		"registrar.audit_store_max_segments", "registrar.audit_store_mixed", "registrar.audit_store_ratio",
		"registrar.audit_store_rules", "registrar.audit_store_since", "registrar.audit_store_window",
	}
	if got := cfg.UnknownKeys(); !slices.Equal(got, wantKeys) {
		t.Errorf("UnknownKeys() = %q\nwant %q", got, wantKeys)
	}
	if got := cfg.Registrar.RateLimitAdmissionBurst; got != 600 {
		t.Errorf("a known key beside unknown ones: rate_limit_admission_burst = %d, want 600", got)
	}
}

func TestComponentTables(t *testing.T) {
	cfg := mustLoadBytes(t, `
[registrar.components.a]
multiplicity = "one-per-deployment"
[registrar.components.b-2]
multiplicity = "one-per-host"
[registrar.components]
c.multiplicity = "many-per-host"
`)
	want := map[string]vocab.Multiplicity{"a": vocab.OnePerDeployment, "b-2": vocab.OnePerHost, "c": vocab.ManyPerHost}
	if !reflect.DeepEqual(cfg.Registrar.Components, want) {
		t.Errorf("components = %v, want %v", cfg.Registrar.Components, want)
	}
	for _, c := range []struct{ doc, want string }{
		{"[registrar.components.review]\nmultiplicity = 3\n",
			`registrar.components.review.multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host", got 3`},
		{"[registrar.components.review]\nmultiplicity = \"Many-Per-Host\"\n",
			`registrar.components.review.multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host", got "Many-Per-Host"`},
		{"[registrar.components.\"a.b\"]\nmultiplicity = \"one-per-host\"\n",
			`registrar.components."a.b" is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids`},
		{"[registrar.components.-edge]\nmultiplicity = \"one-per-host\"\n",
			`registrar.components.-edge is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids`},
		{"[[registrar.components.review]]\nmultiplicity = \"one-per-host\"\n",
			`registrar.components.review must be a table with a multiplicity key, got an array`},
		{"[registrar]\ncomponents = 1\n", `registrar.components must be a table, got 1`},
		{"telemetry = []\n", `telemetry must be a table, got an array`},
	} {
		if got := loadErrors(t, c.doc); got != c.want+"\n" {
			t.Errorf("loading\n%s\nerrors:\n%swant:\n%s", c.doc, got, c.want)
		}
	}
}
