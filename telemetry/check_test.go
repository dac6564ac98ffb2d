package telemetry_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// CheckCases are the [telemetry] tables and OTEL_* variables New refuses,
// one per rule, each with the key or variable its error must be keyed by.
// TestCheckRefusesWhatNewRefuses runs them through both.
var checkCases = []struct {
	name string
	cfg  config.Telemetry
	env  map[string]string
	// key is the *config.KeyError's Key; want a part of its message.
	key, want string
}{
	{"empty service name", config.Telemetry{ServiceName: " ", TraceSamplePerMillion: 1},
		nil, "telemetry.service_name", "must be a non-empty string"},
	{"sample rate above a million", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_001},
		nil, "telemetry.trace_sample_per_million", "must be at most 1000000"},
	{"endpoint key without a scheme", config.Telemetry{ServiceName: "s", OTLPTracesEndpoint: "collector:4318"},
		nil, "telemetry.otlp_traces_endpoint", "must be an http:// or https:// URL with a host"},
	{"endpoint variable with credentials", config.Telemetry{ServiceName: "s"},
		map[string]string{telemetry.EnvOTLPEndpoint: "https://user:hunter2@collector:4318"}, telemetry.EnvOTLPEndpoint, "must not carry credentials"},
	{"grpc protocol", config.Telemetry{ServiceName: "s"},
		map[string]string{telemetry.EnvOTLPEndpoint: "http://127.0.0.1:4317", telemetry.EnvOTLPProtocol: "grpc"}, telemetry.EnvOTLPProtocol, `must be "http/protobuf"`},
	// Issue 37, finding 7: config check said OK to this, serve exited 2.
	{"headers over http to a remote host, endpoint key", config.Telemetry{ServiceName: "s", OTLPEndpoint: "http://collector.example.com:4318"},
		map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=hunter2"}, "telemetry.otlp_endpoint", "must be an https:// URL unless its host is a loopback address while OTEL_EXPORTER_OTLP_HEADERS is set"},
	{"signal headers over http to a remote host, endpoint variable", config.Telemetry{ServiceName: "s"},
		map[string]string{telemetry.EnvOTLPTracesEndpoint: "http://collector.example.com:4318/v1/traces", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "k=hunter2"},
		telemetry.EnvOTLPTracesEndpoint, "while OTEL_EXPORTER_OTLP_TRACES_HEADERS is set"},
	{"unknown sampler", config.Telemetry{ServiceName: "s"},
		map[string]string{telemetry.EnvTracesSampler: "sometimes"}, telemetry.EnvTracesSampler, "must be one of always_on"},
	{"sampler argument out of range", config.Telemetry{ServiceName: "s"},
		map[string]string{telemetry.EnvTracesSamplerArg: "2"}, telemetry.EnvTracesSamplerArg, "must be a number from 0 to 1"},
}

// TestCheckRefusesWhatNewRefuses: Check and New share their rules, so each
// configuration New refuses Check refuses with the same words (New's
// prefixed "telemetry: "), under the key or variable at fault, without the
// password; and what New accepts, Check accepts.
func TestCheckRefusesWhatNewRefuses(t *testing.T) {
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v) // the exporters and the SDK's sampler read the process's
			}
			checkErr := telemetry.Check(context.Background(), tc.cfg, env(tc.env))
			_, newErr := telemetry.New(context.Background(), tc.cfg, telemetry.Options{Getenv: env(tc.env), KeepGlobalDiagnostics: true})
			if checkErr == nil || newErr == nil {
				t.Fatalf("Check: %v; New: %v; want both to refuse", checkErr, newErr)
			}
			if got, want := "telemetry: "+checkErr.Error(), newErr.Error(); got != want {
				t.Errorf("Check and New disagree:\n Check: %s\n   New: %s", got, want)
			}
			ke, ok := errors.AsType[*config.KeyError](checkErr)
			if !ok || ke.Key != tc.key || !strings.Contains(checkErr.Error(), tc.want) {
				t.Errorf("Check: %v (key %v); want keyed %s, saying %q", checkErr, ke, tc.key, tc.want)
			}
			if strings.Contains(checkErr.Error(), "hunter2") {
				t.Errorf("Check echoes the password: %v", checkErr)
			}
		})
	}
	for _, endpoint := range []string{"https://collector.example.com:4318", "http://127.0.0.1:4318", "http://localhost:4318"} {
		cfg := config.Telemetry{ServiceName: "s", OTLPEndpoint: endpoint}
		if err := telemetry.Check(context.Background(), cfg, env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "k=v"})); err != nil {
			t.Errorf("Check of %s with headers: %v, want it accepted as New accepts it", endpoint, err)
		}
	}
}

// The headers rule's refusal is a named error: *HeadersInClearError,
// unwrapping to the *config.KeyError of the key the URL came from.
func TestHeadersInClearIsANamedError(t *testing.T) {
	err := telemetry.Check(context.Background(),
		config.Telemetry{ServiceName: "s", OTLPMetricsEndpoint: "http://collector.example.com:4318/v1/metrics"},
		env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "k=v"}))
	he, ok := errors.AsType[*telemetry.HeadersInClearError](err)
	if !ok {
		t.Fatalf("Check: %v, want a *HeadersInClearError", err)
	}
	if he.Key != "telemetry.otlp_metrics_endpoint" || he.Headers != "OTEL_EXPORTER_OTLP_HEADERS" || he.URL != "http://collector.example.com:4318/v1/metrics" {
		t.Errorf("HeadersInClearError %+v; want the metrics key, the headers variable and the URL", he)
	}
	if ke, ok := errors.AsType[*config.KeyError](err); !ok || ke.Key != he.Key {
		t.Errorf("it unwraps to %v, want the *config.KeyError of %s", ke, he.Key)
	}
}

// An OTLP exporter's own refusal — an http:// URL while
// OTEL_EXPORTER_OTLP_CERTIFICATE gives TLS settings — is found by Check,
// which builds the exporters New builds, and keyed by where the URL came
// from.
func TestCheckBuildsTheExportersNewBuilds(t *testing.T) {
	dir := t.TempDir()
	pki := pkitest.NewValid(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	ca, _, _ := pki.WriteFiles(t, dir, "c", pki.Issue(t, pkitest.Options{CommonName: "c", Usage: x509.ExtKeyUsageServerAuth}))
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
	cfg := config.Telemetry{ServiceName: "s", OTLPEndpoint: "http://127.0.0.1:4318"}
	checkErr := telemetry.Check(context.Background(), cfg, nil)
	_, newErr := telemetry.New(context.Background(), cfg, telemetry.Options{KeepGlobalDiagnostics: true})
	if checkErr == nil || newErr == nil || "telemetry: "+checkErr.Error() != newErr.Error() {
		t.Fatalf("Check: %v\nNew: %v\nwant both to refuse alike", checkErr, newErr)
	}
	if ke, ok := errors.AsType[*config.KeyError](checkErr); !ok || ke.Key != "telemetry.otlp_endpoint" || !strings.Contains(checkErr.Error(), "cannot use TLS") {
		t.Errorf("Check: %v; want it keyed telemetry.otlp_endpoint with the exporter's reason", checkErr)
	}
	cfg.OTLPEndpoint = "https://127.0.0.1:4318"
	if err := telemetry.Check(context.Background(), cfg, nil); err != nil {
		t.Errorf("Check over https with the certificate: %v, want nil", err)
	}
}

// Check accepts a configuration exporting neither signal, or only one: it
// shuts down the exporters it built and touches none it did not.
func TestCheckAcceptsEitherSignalAloneOrNeither(t *testing.T) {
	for name, cfg := range map[string]config.Telemetry{
		"neither":      {ServiceName: "s"},
		"traces only":  {ServiceName: "s", OTLPTracesEndpoint: "http://127.0.0.1:1/v1/traces"},
		"metrics only": {ServiceName: "s", OTLPMetricsEndpoint: "http://127.0.0.1:1/v1/metrics"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := telemetry.Check(context.Background(), cfg, env(nil)); err != nil {
				t.Errorf("Check: %v, want nil", err)
			}
		})
	}
}

// The span exporter's own refusal, with the metric exporter off or built
// (and then shut down unused), is keyed by the traces key.
func TestCheckFindsTheSpanExportersRefusal(t *testing.T) {
	dir := t.TempDir()
	pki := pkitest.NewValid(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	ca, _, _ := pki.WriteFiles(t, dir, "c", pki.Issue(t, pkitest.Options{CommonName: "c", Usage: x509.ExtKeyUsageServerAuth}))
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", ca)
	for name, cfg := range map[string]config.Telemetry{
		"metrics off": {ServiceName: "s", OTLPTracesEndpoint: "http://127.0.0.1:1/v1/traces"},
		"metrics on": {ServiceName: "s", OTLPTracesEndpoint: "http://127.0.0.1:1/v1/traces",
			OTLPMetricsEndpoint: "http://127.0.0.1:1/v1/metrics"},
	} {
		t.Run(name, func(t *testing.T) {
			err := telemetry.Check(context.Background(), cfg, env(nil))
			if ke, ok := errors.AsType[*config.KeyError](err); !ok || ke.Key != "telemetry.otlp_traces_endpoint" || !strings.Contains(err.Error(), "span exporter refuses it") {
				t.Errorf("Check: %v; want it keyed telemetry.otlp_traces_endpoint with the span exporter's reason", err)
			}
		})
	}
}
