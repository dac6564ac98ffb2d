package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// telemetryRefusals are the refusals serve's start makes from the
// [telemetry] table and the OTEL_* variables once the configuration has
// loaded (telemetry.New), one case per rule: config check must make each
// one too, under the same key and in the same words
// (TestConfigCheckRefusesWhatTelemetryRefusesAtStart).
// TestEveryStartRefusalIsCheckedOrListed names its cases.
var telemetryRefusals = []struct {
	name string
	// telemetry is the [telemetry] table's body.
	telemetry string
	environ   []string
	// key is the finding's key; want its message, exactly.
	key, want string
}{
	// Issue 37, finding 7: config check said OK, serve exited 2.
	{"headers over http to a remote host",
		"otlp_endpoint = \"http://collector.example.com:4318\"\n", []string{"OTEL_EXPORTER_OTLP_HEADERS=api-key=secret"},
		"telemetry.otlp_endpoint", `telemetry.otlp_endpoint must be an https:// URL unless its host is a loopback address while OTEL_EXPORTER_OTLP_HEADERS is set: over http:// the headers would travel in clear, got "http://collector.example.com:4318/v1/traces"`},
	{"signal headers over http to a remote host from the variable",
		"", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector.example.com:4318", "OTEL_EXPORTER_OTLP_METRICS_HEADERS=k=secret"},
		"OTEL_EXPORTER_OTLP_ENDPOINT", `OTEL_EXPORTER_OTLP_ENDPOINT must be an https:// URL unless its host is a loopback address while OTEL_EXPORTER_OTLP_METRICS_HEADERS is set: over http:// the headers would travel in clear, got "http://collector.example.com:4318/v1/metrics"`},
	{"endpoint variable that is not a URL",
		"", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector:4318"},
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL with a host, got "collector:4318"`},
	{"endpoint variable with credentials",
		"", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=https://user:secret@collector:4318"},
		"OTEL_EXPORTER_OTLP_ENDPOINT", `OTEL_EXPORTER_OTLP_ENDPOINT must not carry credentials, a query or a fragment (put credentials in OTEL_EXPORTER_OTLP_HEADERS), got "https://REDACTED@collector:4318"`},
	{"grpc protocol",
		"otlp_endpoint = \"http://127.0.0.1:4317\"\n", []string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		"OTEL_EXPORTER_OTLP_PROTOCOL", `OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf" (the only OTLP protocol registrar-otel speaks) or unset, got "grpc"`},
	{"unknown sampler",
		"", []string{"OTEL_TRACES_SAMPLER=sometimes"},
		"OTEL_TRACES_SAMPLER", `OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got "sometimes"`},
	// The exporters' own refusal ($CA: a CA certificate file the test
	// writes).
	{"http endpoint with a TLS certificate",
		"otlp_endpoint = \"http://127.0.0.1:4318\"\n", []string{"OTEL_EXPORTER_OTLP_CERTIFICATE=$CA"},
		"telemetry.otlp_endpoint", `telemetry.otlp_endpoint cannot be exported to: the OTLP/HTTP metric exporter refuses it (insecure HTTP endpoint cannot use TLS client configuration), got "http://127.0.0.1:4318/v1/metrics"`},
	{"sampler argument out of range",
		"", []string{"OTEL_TRACES_SAMPLER_ARG=1.5"},
		"OTEL_TRACES_SAMPLER_ARG", `OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (the SDK's traceidratio argument), got "1.5"`},
}

// TestConfigCheckRefusesWhatTelemetryRefusesAtStart: each refusal of
// telemetry.New is one of config check's errors, keyed and worded alike,
// and serve refuses the same configuration with exit 2 and those words.
func TestConfigCheckRefusesWhatTelemetryRefusesAtStart(t *testing.T) {
	_, _, ca := validTLSFiles(t, t.TempDir())
	for _, tc := range telemetryRefusals {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfigForCheck(t, checkDoc+"[telemetry]\nmetrics_listen = \"\"\n"+tc.telemetry)
			tc.environ = slices.Clone(tc.environ)
			for i := range tc.environ {
				tc.environ[i] = strings.ReplaceAll(tc.environ[i], "$CA", ca)
			}
			for _, kv := range tc.environ {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v) // serve, and the exporters config check builds, read the process's
			}
			code, stdout, stderr := configCheckOutput([]string{"--config", path, "--json"}, tc.environ)
			var res checkResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil || stderr != "" {
				t.Fatalf("--json: %v, stderr %q\n%s", err, stderr, stdout)
			}
			if code != configCheckInvalid || res.OK || len(res.Errors) != 1 || res.Errors[0].Key != tc.key || res.Errors[0].Message != tc.want {
				t.Fatalf("config check: exit %d, errors %+v\nwant 2 and the one error, key %s:\n%s", code, res.Errors, tc.key, tc.want)
			}
			if strings.Contains(res.Errors[0].Message, "secret") {
				t.Errorf("config check echoes a secret: %s", res.Errors[0].Message)
			}
			var out, errb bytes.Buffer
			quoted := strconv.Quote(tc.want)
			if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), quoted[1:len(quoted)-1]) {
				t.Errorf("serve: exit %d, stderr:\n%s\nwant %d and the same words", code, errb.String(), exitUsage)
			}
		})
	}
	// The configuration pages quote finding 7's refusal as it is printed.
	for _, lang := range []string{"en", "ko"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", lang, "configuration.md"))
		if err != nil {
			t.Fatal(err)
		}
		if want := telemetryRefusals[0].want; !strings.Contains(string(raw), want+"\n") {
			t.Errorf("docs/%s/configuration.md does not quote:\n  %s", lang, want)
		}
	}
}
