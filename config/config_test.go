package config

import (
	"reflect"
	"slices"
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
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
		{"registrar.components", r.Components, map[string]vocab.Multiplicity{"review": vocab.ManyPerHost, "edge-proxy": vocab.OnePerHost, "control-plane": vocab.OnePerDeployment}},
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
	a.Registrar.Components["extra"] = vocab.OnePerHost
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
	b.Registrar.Components["new"] = vocab.OnePerHost
	b.Registrar.Extra["k2"] = "v"
	if len(a.Registrar.Components) != 3 || len(a.Registrar.Extra) != 1 {
		t.Errorf("mutating a clone changed the original: components %v, extra %v", a.Registrar.Components, a.Registrar.Extra)
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
