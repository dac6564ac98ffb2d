package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// keyErrorFor returns the Validate error naming key, or nil.
func keyErrorFor(t *testing.T, c Config, key string) *KeyError {
	t.Helper()
	err := c.Validate()
	if err == nil {
		return nil
	}
	var errs interface{ Unwrap() []error }
	list := []error{err}
	if errors.As(err, &errs) {
		list = errs.Unwrap()
	}
	for _, e := range list {
		var ke *KeyError
		if errors.As(e, &ke) && ke.Key == key {
			return ke
		}
	}
	return nil
}

// TestRegistrarBoundsAreInclusive holds the edges of the [registrar]
// checks: a value at its documented bound is accepted, one past it is
// refused under its key; a NUL at the very start of a path is found like
// one in its middle; and a socket group may use every letter, digit, '_',
// '-' and '.', the bytes just outside those ranges not.
func TestRegistrarBoundsAreInclusive(t *testing.T) {
	type tc struct {
		name   string
		key    string
		set    func(r *Registrar)
		refuse bool
	}
	cases := []tc{
		{"a socket path of 107 bytes", "registrar.socket_path", func(r *Registrar) { r.SocketPath = "/" + strings.Repeat("s", MaxSocketPathBytes-1) }, false},
		{"a socket path of 108 bytes", "registrar.socket_path", func(r *Registrar) { r.SocketPath = "/" + strings.Repeat("s", MaxSocketPathBytes) }, true},
		{"a NUL first in state_dir", "registrar.state_dir", func(r *Registrar) { r.StateDir = "\x00/var/lib/registrar" }, true},
		{"a NUL first in audit_record_dir", "registrar.audit_record_dir", func(r *Registrar) { r.AuditRecordDir = "\x00/var/log/registrar" }, true},
		{"a NUL in tls_cert_file", "registrar.tls_cert_file", func(r *Registrar) { r.TLSListen = "127.0.0.1:8443"; r.TLSCertFile = "/etc/\x00cert.pem" }, true},
		{"a NUL first in tls_key_file", "registrar.tls_key_file", func(r *Registrar) { r.TLSListen = "127.0.0.1:8443"; r.TLSKeyFile = "\x00/etc/key.pem" }, true},
		{"max_conns_per_identity at its bound", "registrar.max_conns_per_identity", func(r *Registrar) { r.MaxConnsPerIdentity = MaxConnsLimit }, false},
		{"max_conns_per_identity past its bound", "registrar.max_conns_per_identity", func(r *Registrar) { r.MaxConnsPerIdentity = MaxConnsLimit + 1 }, true},
		{"read_body_timeout_ms at its bound", "registrar.read_body_timeout_ms", func(r *Registrar) { r.ReadBodyTimeoutMS = MaxTimeoutMS }, false},
		{"read_body_timeout_ms past its bound", "registrar.read_body_timeout_ms", func(r *Registrar) { r.ReadBodyTimeoutMS = MaxTimeoutMS + 1 }, true},
		{"read_body_timeout_ms at zero", "registrar.read_body_timeout_ms", func(r *Registrar) { r.ReadBodyTimeoutMS = 0 }, true},
		{"max_in_flight_per_identity at its bound", "registrar.max_in_flight_per_identity", func(r *Registrar) { r.MaxInFlightPerIdentity = MaxConnsLimit }, false},
		{"max_in_flight_per_identity past its bound", "registrar.max_in_flight_per_identity", func(r *Registrar) { r.MaxInFlightPerIdentity = MaxConnsLimit + 1 }, true},
		{"max_in_flight_per_identity at zero", "registrar.max_in_flight_per_identity", func(r *Registrar) { r.MaxInFlightPerIdentity = 0 }, true},
		{"shared_in_flight at one", "registrar.shared_in_flight", func(r *Registrar) { r.SharedInFlight = 1 }, false},
		{"shared_in_flight past its bound", "registrar.shared_in_flight", func(r *Registrar) { r.SharedInFlight = MaxConnsLimit + 1 }, true},
		{"shared_in_flight at zero", "registrar.shared_in_flight", func(r *Registrar) { r.SharedInFlight = 0 }, true},
		{"wait_timeout_ms at its bound", "registrar.wait_timeout_ms", func(r *Registrar) { r.WaitTimeoutMS = MaxTimeoutMS }, false},
		{"wait_timeout_ms past its bound", "registrar.wait_timeout_ms", func(r *Registrar) { r.WaitTimeoutMS = MaxTimeoutMS + 1 }, true},
		{"wait_timeout_ms at zero", "registrar.wait_timeout_ms", func(r *Registrar) { r.WaitTimeoutMS = 0 }, true},
		{"refusal_pace_ms at its bound", "registrar.refusal_pace_ms", func(r *Registrar) { r.RefusalPaceMS = MaxRefusalPaceMS }, false},
		{"refusal_pace_ms past its bound", "registrar.refusal_pace_ms", func(r *Registrar) { r.RefusalPaceMS = MaxRefusalPaceMS + 1 }, true},
		{"refusal_pace_ms at zero: answered at once", "registrar.refusal_pace_ms", func(r *Registrar) { r.RefusalPaceMS = 0 }, false},
		{"idle_timeout_ms at its bound", "registrar.idle_timeout_ms", func(r *Registrar) { r.IdleTimeoutMS = MaxTimeoutMS }, false},
		{"idle_timeout_ms past its bound", "registrar.idle_timeout_ms", func(r *Registrar) { r.IdleTimeoutMS = MaxTimeoutMS + 1 }, true},
		{"a group of every edge character", "registrar.socket_group", func(r *Registrar) { r.SocketGroup = "az.AZ.09_-" }, false},
		{"a group in capitals", "registrar.socket_group", func(r *Registrar) { r.SocketGroup = "OPS" }, false},
	}
	for _, bad := range []string{"ops`", "ops{", "ops@", "ops[", "ops/", "ops:"} {
		cases = append(cases, tc{"the group " + bad, "registrar.socket_group", func(r *Registrar) { r.SocketGroup = bad }, true})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			c.set(&cfg.Registrar)
			ke := keyErrorFor(t, cfg, c.key)
			switch {
			case c.refuse && ke == nil:
				t.Errorf("Validate accepted it; want an error under %s (got %v)", c.key, cfg.Validate())
			case !c.refuse && ke != nil:
				t.Errorf("Validate refused it: %v", ke)
			}
		})
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
	r.Components["Bad"] = vocab.ManyPerHost
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
	acceptsExactly(t, "checkHostPort", func(v string) bool { return checkHostPort("telemetry.metrics_listen", v) == nil },
		[]string{"127.0.0.1:9464", ":9464", "[::1]:9464", "localhost:9464", "0.0.0.0:0"},
		[]string{"localhost", "localhost:http", "localhost:65536", "localhost:-1", "localhost:", "::1:9464", "a b:9464"})
}

func TestOTLPEndpointRule(t *testing.T) {
	acceptsExactly(t, "checkEndpoint", func(v string) bool { return checkEndpoint("telemetry.otlp_endpoint", v) == nil },
		[]string{"http://collector:4318", "https://collector.example.net", "https://collector:4318/v1/traces"},
		[]string{"collector:4318", "grpc://collector:4317", "http://", "http:///path", "https://:4318", "http://collector:4318/%zz", "ftp://collector.example.net/metrics"})
}

// acceptsExactly fails t unless accept takes every value of ok and refuses
// every value of bad.
func acceptsExactly(t *testing.T, what string, accept func(string) bool, ok, bad []string) {
	t.Helper()
	for _, v := range ok {
		if !accept(v) {
			t.Errorf("%s(%q) refused it, want it accepted", what, v)
		}
	}
	for _, v := range bad {
		if accept(v) {
			t.Errorf("%s(%q) accepted it, want it refused", what, v)
		}
	}
}

func TestOTLPEndpointSecretsAreNeverEchoed(t *testing.T) {
	secrets := []string{"user", "s3cretpw", "token", "abc", "p/w", "pa?ss"}
	for _, tc := range []struct {
		name     string
		endpoint string
		fromEnv  bool
	}{
		{"user and password from the environment", "https://user:s3cretpw@h:4318", true},
		{"user and password from the file", "https://user:s3cretpw@h:4318", false},
		{"user name and a query token", "https://user:xxxxx@collector.example:4318/?token=abc", false},
		{"a query token alone", "https://collector.example:4318/?token=abc", true},
		{"an unparsable URL with a password", "https://user:s3cretpw@h:notaport", false},
		{"a password with a slash", "https://user:p/w@h:4318", true},
		{"a password with a question mark", "https://user:pa?ss@h:4318", false},
		{"no scheme", "user:s3cretpw@h:4318", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			doc := minimalDoc
			var env []string
			if tc.fromEnv {
				env = []string{"REGISTRAR_OTEL_TELEMETRY__OTLP_ENDPOINT=" + tc.endpoint}
			} else {
				doc += "[telemetry]\notlp_endpoint = " + quote(tc.endpoint) + "\n"
			}
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, env, nil)
			if err == nil {
				t.Fatal("accepted an endpoint with credentials or without a host")
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != "telemetry.otlp_endpoint" {
				t.Fatalf("got %v, want a KeyError naming telemetry.otlp_endpoint", err)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("message %q repeats %q", err, s)
				}
				if v, _ := ke.Value.(string); strings.Contains(v, s) {
					t.Errorf("KeyError.Value %q holds %q", v, s)
				}
			}
			if !strings.Contains(err.Error(), Redacted) && !strings.Contains(err.Error(), "h:") && !strings.Contains(err.Error(), "collector") {
				t.Errorf("message %q no longer says which endpoint", err)
			}
		})
	}
}
