package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
)

// writeConfigForCheck writes a TOML document to a fresh temporary file.
func writeConfigForCheck(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registrar-otel.toml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func configCheckOutput(args, environ []string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = configCheck(args, environ, &out, &errb)
	return code, out.String(), errb.String()
}

func TestConfigCheckSummarisesTheEmbeddedDefaults(t *testing.T) {
	code, stdout, stderr := configCheckOutput(nil, nil)
	if code != 0 {
		t.Fatalf("exit status = %d, want 0; stderr:\n%s", code, stderr)
	}
	want := `configuration OK: embedded defaults
registrar:
  socket_path                 var/run/registrar.sock
  socket_group                (none: socket 0600, the daemon's user only)
  tls_listen                  (none: no TCP listener)
  state_dir                   var/lib
  audit_record_dir            var/audit (rotate at 8388608 bytes, keep 16 files)
  admission bucket            burst 512, one token every 500 ms
  predecision_refusal bucket  burst 32, one token every 1000 ms
  coalesce window             60 s
  maintenance interval        1000 ms
  max wrap_ttl                1800 s
  connections                 unix 128, tls 128 (+32 in handshake, 3000 ms each), 64 per identity
  connection timeouts         headers 3000 ms, idle 15000 ms
  audit store reserve         268435456 bytes
  log_level                   info (serve --log-level, when given, overrides it)
components:
  control-plane  one-per-deployment
  edge-proxy     one-per-host
  review         many-per-host
telemetry:
  metrics_listen            127.0.0.1:9464
  otlp_endpoint             (none)
  service_name              registrar-otel
  trace_sample_per_million  10000
  otlp_traces_endpoint   (none: OTEL_EXPORTER_OTLP_* variables, if set)
  otlp_metrics_endpoint  (none: OTEL_EXPORTER_OTLP_* variables, if set)
paths (what serve does):
  registrar.socket_path       WD/var/run (the default var/run, relative to the working directory WD): missing; serve creates it 0700
  registrar.socket_path       WD/var/run/registrar.sock (the default var/run/registrar.sock, relative to the working directory WD): absent; serve creates the socket 0600
  registrar.state_dir         WD/var/lib (the default var/lib, relative to the working directory WD): missing; serve creates it 0700
  registrar.audit_record_dir  WD/var/audit (the default var/audit, relative to the working directory WD): missing; serve creates it 0700
`
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want = strings.ReplaceAll(want, "WD", wd)
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}
}

func TestConfigCheckSummarisesAFileWithItsUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := validTLSFiles(t, dir)
	path := writeConfigForCheck(t, fmt.Sprintf(`[registrar]
tls_listen = ":8443"
tls_cert_file = %q
tls_key_file = %q
tls_client_ca_file = %q
audit_store_backend = "segmented"
[registrar.components.review]
multiplicity = "many-per-host"
[telemetry]
metrics_listen = ""
`, cert, key, ca))
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != 0 {
		t.Fatalf("exit status = %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"configuration OK: " + path + "\n",
		"  tls_listen                  :8443 (cert " + cert + ", key " + key + ", client CA " + ca + ")\n",
		"  registrar.tls_cert_file       " + cert + `: certificate "CN=registrar-test", valid until 2099-01-01T00:00:00Z` + "\n",
		"  registrar.tls_key_file        " + key + ": private key matching the certificate\n",
		"  registrar.tls_client_ca_file  " + ca + ": 1 CA certificate(s)\n",
		"  unknown keys kept           registrar.audit_store_backend\n",
		"components:\n  review  many-per-host\ntelemetry:\n",
		"  metrics_listen            (disabled)\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if want := "warning: registrar.audit_store_backend is not a known key; kept untouched, this version does not use it\n"; stderr != want {
		t.Errorf("stderr = %q, want the one warning %q", stderr, want)
	}
}

func TestConfigCheckPrintsEveryErrorAndExits2(t *testing.T) {
	path := writeConfigForCheck(t, `[registrar]
rate_limit_admission_burst = 0
rate_limit_predecision_refusal_burst = -3
rate_limit_coalesce_window_seconds = "60"
`)
	code, stdout, stderr := configCheckOutput([]string{"--config=" + path}, nil)
	if code != 2 {
		t.Errorf("exit status = %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	want := `registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint
registrar.rate_limit_predecision_refusal_burst must be an unsigned integer, got -3
registrar.rate_limit_coalesce_window_seconds must be an unsigned integer, got "60"
config check: 3 errors in ` + path + "\n"
	if stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
}

func TestConfigCheckAppliesTheEnvironment(t *testing.T) {
	code, stdout, stderr := configCheckOutput(nil, []string{"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST=600"})
	if code != 0 || !strings.Contains(stdout, "  admission bucket            burst 600, one token every 500 ms\n") {
		t.Errorf("exit status %d, stdout:\n%s\nstderr:\n%s\nwant burst 600 from the environment", code, stdout, stderr)
	}

	code, _, stderr = configCheckOutput(nil, []string{"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST=-1"})
	want := `registrar.rate_limit_admission_burst must be an unsigned integer, got "-1" (from environment variable REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST)
config check: 1 error in embedded defaults
`
	if code != 2 || stderr != want {
		t.Errorf("exit status %d, stderr:\n%s\nwant 2 and:\n%s", code, stderr, want)
	}
}

func TestRunConfigCheckReadsTheProcessEnvironment(t *testing.T) {
	t.Setenv("REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_COALESCE_WINDOW_SECONDS", "0")
	var out, errb bytes.Buffer
	if code := runConfigCheck(nil, &out, &errb); code != 2 {
		t.Errorf("exit status = %d, want 2 (stdout %q)", code, out.String())
	}
	if !strings.HasPrefix(errb.String(), "registrar.rate_limit_coalesce_window_seconds must be greater than 0") {
		t.Errorf("stderr = %q, want the coalesce window error", errb.String())
	}
}

func TestConfigCheckFileProblems(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.toml")
	code, _, stderr := configCheckOutput([]string{"--config", missing}, nil)
	if want := missing + ": cannot read configuration file: no such file or directory\nconfig check: 1 error in " + missing + "\n"; code != 2 || stderr != want {
		t.Errorf("missing file: exit status %d, stderr %q; want 2, %q", code, stderr, want)
	}

	bad := writeConfigForCheck(t, "[registrar]\nrate_limit_admission_burst 512\n")
	code, _, stderr = configCheckOutput([]string{"--config", bad}, nil)
	if want := bad + ":2:28: invalid TOML: expected character =\nconfig check: 1 error in " + bad + "\n"; code != 2 || stderr != want {
		t.Errorf("syntax error: exit status %d, stderr %q; want 2, %q", code, stderr, want)
	}
}

func TestConfigCheckUsage(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"unknown flag", []string{"--verbose"}, 2, "unknown flag --verbose"},
		{"flag without value", []string{"--config"}, 2, "flag --config needs a value"},
		{"empty file name", []string{"--config="}, 2, "--config needs a file name"},
		{"positional argument", []string{"registrar-otel.toml"}, 2, `unexpected argument "registrar-otel.toml"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := configCheckOutput(c.args, nil)
			if code != c.code {
				t.Errorf("exit status = %d, want %d", code, c.code)
			}
			if !strings.Contains(stderr, c.inStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, c.inStderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

// TestConfigCheckListsEveryKey: the --json listing has a member for every
// [registrar] and [telemetry] key of the key table, holding the value the
// table shows (secrets redacted); the full fixture sets every key to a
// value other than its default.
func TestConfigCheckListsEveryKey(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "..", "config", "testdata", "valid_full.toml"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(effective(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Settings() {
		table, name, _ := strings.Cut(s.Key, ".")
		if table == "openbao" || strings.HasPrefix(name, "components.") {
			continue // the text lists [openbao] with its backend; components are a map
		}
		v, ok := got[table][name]
		if !ok {
			t.Errorf("config check --json lists no %s", s.Key)
			continue
		}
		if f, isNum := v.(float64); isNum {
			v = strconv.FormatFloat(f, 'f', -1, 64)
		}
		if v != s.Value {
			t.Errorf("config check --json lists %s = %v, want %q", s.Key, v, s.Value)
		}
	}
}
