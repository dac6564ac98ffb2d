package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
)

// writeConfigForCheck writes a TOML document to a fresh temporary file.
func writeConfigForCheck(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registrar-otel.toml")
	writeFile(t, path, []byte(doc), 0o600)
	return path
}

// selfJudged is the "judged for:" line of a check judged for the user
// running the tests, with no unit installed (TestMain empties unitDirs).
func selfJudged(t *testing.T) string {
	t.Helper()
	j, err := resolveJudge("", newCheckResult("", false))
	if err != nil || j.Source != judgeSelf {
		t.Fatalf("resolveJudge: %+v, %v; want the test's own user", j, err)
	}
	return j.line()
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
` + selfJudged(t) + `
registrar:
  socket_path                 var/run/registrar.sock
  socket_group                (none: socket 0600, the daemon's user only)
  subuid_file                 /etc/subuid (a subordinate uid is its range owner's identity)
  tls_listen                  (none: no TCP listener)
  state_dir                   var/lib
  audit_record_dir            var/audit (rotate at 8388608 bytes, keep 16 files)
  admission bucket            burst 512, one token every 500 ms
  predecision_refusal bucket  burst 32, one token every 1000 ms
  instances                   1 (a single registrar: it enforces every policy's whole budget)
  coalesce window             60 s
  maintenance interval        1000 ms
  max wrap_ttl                1800 s
  connections                 unix 128, tls 128 (+32 in handshake, 3000 ms each), 64 per identity
  connection timeouts         headers 3000 ms, body 3000 ms, idle 15000 ms
  fair dispatch               64 in flight per identity alone, 8 shared once two or more call, wait 2000 ms, limiter refusals paced 25 ms while another calls
  audit store reserve         268435456 bytes
  audit min retention         0 (off: retention by size alone)
  log_level                   info (serve --log-level, when given, overrides it)
components:
  control-plane  one-per-deployment
  edge-proxy     one-per-host
  review         many-per-host
callers: (none: only the operators, root and the daemon's uid on the unix socket, may call, with the [registrar] sizes, policy default; any other identity is refused no_policy)
telemetry:
  metrics_listen            127.0.0.1:9464
  otlp_endpoint             (none)
  service_name              registrar-otel
  service_instance_id       HOST:WD/var/lib (derived from the host name and registrar.state_dir)
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
	host, _ := os.Hostname()
	want = strings.ReplaceAll(strings.ReplaceAll(want, "WD", wd), "HOST:", host+":")
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
	path := writeConfigForCheck(t, "[registrar]\n"+tlsListenLines(":8443", cert, key, ca)+`audit_store_backend = "segmented"
[registrar.components.review]
multiplicity = "many-per-host"
[telemetry]
metrics_listen = ""
`)
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != 0 {
		t.Fatalf("exit status = %d, want 0; stderr:\n%s", code, stderr)
	}
	wantContains(t, "stdout", stdout,
		"configuration OK: "+path+"\n",
		"  tls_listen                  :8443 (cert "+cert+", key "+key+", client CA "+ca+")\n",
		"  registrar.tls_cert_file       "+cert+`: certificate "CN=registrar-test", valid until 2099-01-01T00:00:00Z`+"\n",
		"  registrar.tls_key_file        "+key+": private key matching the certificate\n",
		"  registrar.tls_client_ca_file  "+ca+": 1 CA certificate(s)\n",
		"  unknown keys kept           registrar.audit_store_backend\n",
		"components:\n  review  many-per-host\ncallers: (none: only the operators, root and the daemon's uid on the unix socket, may call, with the [registrar] sizes, policy default; any other identity is refused no_policy)\ntelemetry:\n",
		"  metrics_listen            (disabled)\n")
	// The TLS listener admits certificate holders no policy can match.
	if want := "warning: registrar.audit_store_backend is not a known key; kept untouched, this version does not use it\n" +
		"warning: " + tlsNoPolicyWarning(":8443") + "\n"; stderr != want {
		t.Errorf("stderr = %q, want the two warnings %q", stderr, want)
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
` + selfJudged(t) + `
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
` + selfJudged(t) + `
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
	if want := missing + ": cannot read configuration file: no such file or directory\n" + selfJudged(t) + "\nconfig check: 1 error in " + missing + "\n"; code != 2 || stderr != want {
		t.Errorf("missing file: exit status %d, stderr %q; want 2, %q", code, stderr, want)
	}

	bad := writeConfigForCheck(t, "[registrar]\nrate_limit_admission_burst 512\n")
	code, _, stderr = configCheckOutput([]string{"--config", bad}, nil)
	if want := bad + ":2:28: invalid TOML: expected character =\n" + selfJudged(t) + "\nconfig check: 1 error in " + bad + "\n"; code != 2 || stderr != want {
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
		if table == "openbao" || strings.HasPrefix(name, "components.") || name == "callers" {
			continue // the text lists [openbao] with its backend; components are a map, callers a list (TestConfigCheckListsTheCallerPolicies)
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

// TestConfigCheckListsTheCallerPolicies: the text lists each policy, its
// identities and prefixes and both buckets' sizes, each marked set or
// taken from the default (in a shadow: from the enforced sizes); --json
// lists the same under config.registrar.callers (golden).
func TestConfigCheckListsTheCallerPolicies(t *testing.T) {
	path := filepath.Join("..", "..", "config", "testdata", "valid_callers.toml")
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != configCheckOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	wantContains(t, "stdout", stdout, `callers (an identity takes its exact identity's policy, else the longest matching prefix's, else none and is refused no_policy; the operators, root and the daemon's uid on the unix socket, may do anything unless a policy names them exactly):
  agents:
    identity_prefixes                  registrar-client:uri:spiffe://example.org/host/
    scope                              services: any
                                       components: any
                                       hosts: any
                                       verbs: any
    scope_owner                        self
    max_registrations                  none
    admission bucket                   burst 4 (set), one token every 500 ms (default)
    predecision_refusal bucket         burst 32 (default), one token every 1000 ms (default)
  control-plane:
    identities                         unix-peer:uid=0
    identity_prefixes                  registrar-client:uri:spiffe://example.org/control-plane/
    scope                              services: any
                                       components: any
                                       hosts: any
                                       verbs: any
    scope_owner                        self
    max_registrations                  none
    admission bucket                   burst 1600 (set), one token every 100 ms (set)
    predecision_refusal bucket         burst 32 (default), one token every 1000 ms (default)
    shadow admission bucket            burst 800 (set), one token every 100 ms (enforced)
    shadow predecision_refusal bucket  burst 32 (enforced), one token every 1000 ms (enforced)
telemetry:
`)

	code, out, stderr := configCheckOutput([]string{"--config", path, "--json"}, nil)
	if code != configCheckOK {
		t.Fatalf("--json: exit %d, stderr:\n%s", code, stderr)
	}
	var res struct {
		Config struct {
			Registrar struct {
				Callers json.RawMessage `json:"callers"`
			} `json:"registrar"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	goldenJSON(t, "config_check_callers.json", res.Config.Registrar.Callers)
}

// TestConfigCheckRefusesBadCallerPolicies: a policy error exits 2 with the
// offending key named, as every key error does.
func TestConfigCheckRefusesBadCallerPolicies(t *testing.T) {
	path := writeConfigForCheck(t, `[registrar.callers.control-plane]
identities = ["unix-peer:uid=0"]
rate_limit_admission_burst = 1600.0
[registrar.callers.deployer]
identities = ["unix-peer:uid=0"]
[registrar.callers.deployer.shadow]
identities = ["unix-peer:uid=0"]
`)
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	want := `registrar.callers.control-plane.rate_limit_admission_burst must be an unsigned integer, got 1600.0
registrar.callers.deployer.identities[0] must not name an identity registrar.callers.control-plane.identities names too: an identity takes one policy, got "unix-peer:uid=0"
registrar.callers.deployer.shadow.identities is not a key of a shadow table: it takes only the four rate_limit_* keys (the identities and prefixes are the policy's)
` + selfJudged(t) + `
config check: 3 errors in ` + path + "\n"
	if code != configCheckInvalid || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant 2 and:\n%s", code, stdout, stderr, want)
	}
}

// The shipped example names TLS files that do not exist here: the check
// fails and names each one, as serve would fail on the first.
func TestConfigCheckShippedExampleWithTheTLSFilesMissing(t *testing.T) {
	for _, lang := range []string{"en", "ko"} {
		example := filepath.Join("..", "..", "docs", lang, "examples", "registrar.toml")
		code, stdout, stderr := configCheckOutput([]string{"--config", example}, nil)
		if code != configCheckInvalid || stdout != "" {
			t.Fatalf("%s: exit %d, stdout %q; want 2 and nothing on stdout", example, code, stdout)
		}
		wantContains(t, example+": stderr", stderr,
			"registrar.tls_cert_file: cannot read /etc/registrar-otel/tls/server.crt: no such file or directory\n",
			"registrar.tls_key_file: cannot read /etc/registrar-otel/tls/server.key: no such file or directory\n",
			"registrar.tls_client_ca_file: cannot read /etc/registrar-otel/tls/clients-ca.crt: no such file or directory\n",
			"config check: 3 errors in "+example+"\n")
	}
}

func TestConfigCheckStrictRejectsUnknownKeys(t *testing.T) {
	path := writeConfigForCheck(t, "[registrar]\naudit_store_backend = \"segmented\"\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n[telemetry]\nlog_format = \"json\"\n")
	if code, _, stderr := configCheckOutput([]string{"--config", path}, nil); code != configCheckOK || !strings.Contains(stderr, "warning: registrar.audit_store_backend is not a known key") {
		t.Fatalf("without --strict: exit %d, stderr %q; want 0 and a warning", code, stderr)
	}
	code, stdout, stderr := configCheckOutput([]string{"--config", path, "--strict"}, nil)
	want := `registrar.audit_store_backend is not a known key (--strict); remove it, or run without --strict to keep it for a later version
telemetry.log_format is not a known key (--strict); remove it, or run without --strict to keep it for a later version
` + selfJudged(t) + `
config check: 2 errors in ` + path + "\n"
	if code != configCheckInvalid || stdout != "" || stderr != want {
		t.Fatalf("--strict: exit %d, stdout %q, stderr:\n%s\nwant 2 and:\n%s", code, stdout, stderr, want)
	}
}

// A key one edit away from a known one is a likely misspelling: an error
// whatever the mode, naming the key it should be.
func TestConfigCheckMisspeltKeyIsAnErrorInAnyMode(t *testing.T) {
	path := writeConfigForCheck(t, "[registrar]\nrate_limit_admision_burst = 4096\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n")
	want := "registrar.rate_limit_admision_burst is not a known key: a likely misspelling of registrar.rate_limit_admission_burst (the default applies until it is fixed)\n"
	for _, args := range [][]string{{"--config", path}, {"--config", path, "--strict"}} {
		code, _, stderr := configCheckOutput(args, nil)
		if code != configCheckInvalid || !strings.HasPrefix(stderr, want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", args, code, stderr, want)
		}
	}
	// Alongside the load's own errors, both are reported.
	bad := writeConfigForCheck(t, "[registrar]\nrate_limit_admision_burst = 4096\nmax_wrap_ttl_seconds = 0\n")
	code, _, stderr := configCheckOutput([]string{"--config", bad}, nil)
	if code != configCheckInvalid || !strings.Contains(stderr, "registrar.max_wrap_ttl_seconds must be greater than 0") ||
		!strings.Contains(stderr, "likely misspelling of registrar.rate_limit_admission_burst") || !strings.Contains(stderr, "2 errors") {
		t.Errorf("with a load error: exit %d, stderr:\n%s", code, stderr)
	}
	// The environment's keys get the same hint, naming the variable; a
	// single "_" between the levels gets the "__" spelling.
	for _, tc := range []struct{ env, want string }{
		{"REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISION_BURST=4096",
			"environment variable REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISION_BURST names no known key (it reads as registrar.rate_limit_admision_burst); did you mean REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST?"},
		{"REGISTRAR_OTEL_REGISTRAR_RATE_LIMIT_ADMISSION_BURST=600",
			`environment variable REGISTRAR_OTEL_REGISTRAR_RATE_LIMIT_ADMISSION_BURST names no known key (it reads as registrar_rate_limit_admission_burst); did you mean REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST? Levels are separated by "__"`},
	} {
		code, _, stderr = configCheckOutput(nil, []string{tc.env})
		if code != configCheckInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("from the environment %s: exit %d, stderr %q, want 2 and %q", tc.env, code, stderr, tc.want)
		}
	}
}

// tlsListenLines are the [registrar] lines of a TLS listener on addr with
// the server certificate, key and client CA files given.
func tlsListenLines(addr, cert, key, ca string) string {
	return fmt.Sprintf("tls_listen = %q\ntls_cert_file = %q\ntls_key_file = %q\ntls_client_ca_file = %q\n", addr, cert, key, ca)
}

func tlsConfigDoc(cert, key, ca string) string {
	return "[registrar]\n" + tlsListenLines("127.0.0.1:8443", cert, key, ca) + "[registrar.components.review]\nmultiplicity = \"many-per-host\"\n"
}

func TestConfigCheckTLSFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := validTLSFiles(t, dir)
	other := t.TempDir()
	cert2, key2, _ := validTLSFiles(t, other)
	past := t.TempDir()
	oldCert, oldKey, _ := tlsFiles(t, past, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC))
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o600)
	unreadable := filepath.Join(dir, "unreadable.key")
	os.WriteFile(unreadable, []byte("x"), 0o000)

	for _, tc := range []struct {
		name          string
		cert, key, ca string
		want          []string // substrings of stderr; nil means OK
	}{
		{"valid", cert, key, ca, nil},
		{"key of another certificate", cert, key2, ca, []string{"registrar.tls_key_file " + key2 + ": does not go with the certificate in " + cert}},
		{"certificate of another key", cert2, key, ca, []string{"registrar.tls_key_file " + key + ": does not go with the certificate in " + cert2}},
		{"expired", oldCert, oldKey, ca, []string{"registrar.tls_cert_file " + oldCert + ": the certificate expired on 2021-01-01T00:00:00Z"}},
		{"not PEM", garbage, key, garbage, []string{
			"registrar.tls_cert_file " + garbage + ": no PEM certificate in it",
			"registrar.tls_client_ca_file " + garbage + ": no PEM certificate in it"}},
		{"each missing file named", filepath.Join(dir, "no.crt"), filepath.Join(dir, "no.key"), filepath.Join(dir, "no-ca.crt"), []string{
			"registrar.tls_cert_file: cannot read " + filepath.Join(dir, "no.crt") + ": no such file or directory",
			"registrar.tls_key_file: cannot read " + filepath.Join(dir, "no.key") + ": no such file or directory",
			"registrar.tls_client_ca_file: cannot read " + filepath.Join(dir, "no-ca.crt") + ": no such file or directory",
			"3 errors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := configCheckOutput([]string{"--config", writeConfigForCheck(t, tlsConfigDoc(tc.cert, tc.key, tc.ca))}, nil)
			if tc.want == nil {
				if code != configCheckOK {
					t.Fatalf("exit %d, stderr:\n%s; want 0", code, stderr)
				}
				return
			}
			if code != configCheckInvalid {
				t.Errorf("exit %d, want 2", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
	if os.Geteuid() != 0 { // root reads a mode-0 file
		code, _, stderr := configCheckOutput([]string{"--config", writeConfigForCheck(t, tlsConfigDoc(cert, unreadable, ca))}, nil)
		if code != configCheckInvalid || !strings.Contains(stderr, "registrar.tls_key_file: cannot read "+unreadable+": permission denied") {
			t.Errorf("unreadable key: exit %d, stderr %q", code, stderr)
		}
	}
}

func pathsDoc(socket, state, audit string) string {
	return fmt.Sprintf("[registrar]\nsocket_path = %q\nstate_dir = %q\naudit_record_dir = %q\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n", socket, state, audit)
}

func checkJSON(t *testing.T, args ...string) (int, checkResult) {
	t.Helper()
	code, stdout, stderr := configCheckOutput(append(args, "--json"), nil)
	if stderr != "" {
		t.Errorf("--json wrote to stderr: %q", stderr)
	}
	var res checkResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	return code, res
}

func pathState(res checkResult, path string) (string, string) {
	for _, p := range res.Paths {
		if p.Path == path {
			return p.State, p.Detail
		}
	}
	return "", ""
}

// The paths are reported as serve treats them: created, accepted, replaced
// or refused, with serve's own wording for a refusal.
func TestConfigCheckPathsAsServeSeesThem(t *testing.T) {
	base := t.TempDir()
	sockDir := filepath.Join(base, "run")
	mkdir(t, sockDir, 0o700)
	state := filepath.Join(base, "state")
	os.Mkdir(state, 0o700)
	os.Chmod(state, 0o777) // world-writable: refused
	real := filepath.Join(base, "real-audit")
	os.Mkdir(real, 0o700)
	auditLink := filepath.Join(base, "audit")
	if err := os.Symlink(real, auditLink); err != nil {
		t.Fatal(err)
	}

	// A socket path that is a regular file.
	sock := filepath.Join(sockDir, "registrar.sock")
	os.WriteFile(sock, nil, 0o600)
	code, res := checkJSON(t, "--config", writeConfigForCheck(t, pathsDoc(sock, state, auditLink)))
	if code != configCheckInvalid || res.OK {
		t.Fatalf("exit %d ok %v, want 2", code, res.OK)
	}
	for _, tc := range []struct{ path, state, detail string }{
		{sockDir, pathOK, "directory, mode 0700"},
		{sock, pathRefuse, "wire: the socket path exists and is not a socket: " + sock},
		{state, pathRefuse, "embedded: refusing " + state + ": has mode 0777 (group- or world-writable; want 0700)"},
		{auditLink, pathRefuse, "audit: refusing " + auditLink + ": is a symlink"},
	} {
		if st, d := pathState(res, tc.path); st != tc.state || !strings.HasPrefix(d, tc.detail) {
			t.Errorf("%s: state %q detail %q; want %q, %q", tc.path, st, d, tc.state, tc.detail)
		}
	}
	if len(res.Errors) != 3 {
		t.Errorf("errors %+v, want the three refusals", res.Errors)
	}

	// A stale socket is replaced; a live one is in use (a warning); missing
	// directories are created.
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(base, "fresh", "state")
	code, res = checkJSON(t, "--config", writeConfigForCheck(t, pathsDoc(sock, fresh, real)))
	if st, _ := pathState(res, sock); code != configCheckOK || st != pathInUse || len(res.Warnings) == 0 {
		t.Errorf("live socket: exit %d, state %q, warnings %+v; want 0, in_use, a warning", code, st, res.Warnings)
	}
	if st, _ := pathState(res, fresh); st != pathCreate {
		t.Errorf("missing state_dir: state %q, want create", st)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	code, res = checkJSON(t, "--config", writeConfigForCheck(t, pathsDoc(sock, fresh, real)))
	if st, _ := pathState(res, sock); code != configCheckOK || st != pathStale {
		t.Errorf("stale socket: exit %d, state %q; want 0, stale", code, st)
	}

	// A parent that is a file: serve cannot create the directory.
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	code, res = checkJSON(t, "--config", writeConfigForCheck(t, pathsDoc(sock, filepath.Join(file, "state"), real)))
	if st, d := pathState(res, filepath.Join(file, "state")); code != configCheckInvalid || st != pathRefuse || !strings.Contains(d, file+" is not a directory") {
		t.Errorf("state_dir under a file: exit %d, state %q %q", code, st, d)
	}
}

const checkToken = "hvs.config-check-token-never-printed"

func openbaoConfig(t *testing.T, tokenMode os.FileMode, caPEM string) string {
	t.Helper()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	writeFile(t, tok, []byte(checkToken+"\n"), 0o600)
	chmod(t, tok, tokenMode)
	doc := "[registrar]\nbackend = \"openbao\"\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n" +
		"[openbao]\naddress = \"https://openbao.internal:8200\"\ntoken_file = \"" + tok + "\"\n"
	if caPEM != "" {
		ca := filepath.Join(dir, "ca.pem")
		writeFile(t, ca, []byte(caPEM), 0o644)
		doc += "ca_file = \"" + ca + "\"\n"
	}
	return writeConfigForCheck(t, doc)
}

func TestConfigCheckVerifiesTheOpenBaoTokenFileMode(t *testing.T) {
	code, stdout, stderr := configCheckOutput([]string{"--config", openbaoConfig(t, 0o644, "")}, nil)
	if code != configCheckInvalid {
		t.Fatalf("exit status = %d, want %d; stdout:\n%s", code, configCheckInvalid, stdout)
	}
	if !strings.Contains(stderr, "openbao.token_file must be readable by its owner only (chmod 0600), but has mode 0644") {
		t.Errorf("stderr:\n%s\nwant the token file's mode named", stderr)
	}
	if strings.Contains(stdout+stderr, checkToken) {
		t.Errorf("config check printed the token:\n%s%s", stdout, stderr)
	}
}

func TestConfigCheckVerifiesTheOpenBaoCA(t *testing.T) {
	code, _, stderr := configCheckOutput([]string{"--config", openbaoConfig(t, 0o600, "not a certificate\n")}, nil)
	if code != configCheckInvalid || !strings.Contains(stderr, "openbao.ca_file must be a PEM file holding at least one CA certificate") {
		t.Errorf("exit status %d, stderr:\n%s\nwant the CA refused", code, stderr)
	}
}

func TestConfigCheckSummarisesTheOpenBaoBackendWithoutTheToken(t *testing.T) {
	code, stdout, stderr := configCheckOutput([]string{"--config", openbaoConfig(t, 0o600, "")}, []string{"BAO_TOKEN=" + checkToken})
	if code != configCheckOK {
		t.Fatalf("exit status = %d; stderr:\n%s", code, stderr)
	}
	wantContains(t, "stdout", stdout,
		`openbao (registrar.backend = "openbao"):`,
		"address          https://openbao.internal:8200",
		"ca_file          (none: the system roots)",
		"token            from openbao.token_file",
		"bindings         secret/data/registrar-otel/bindings/<registration_id> (KV v2)",
		"roles            auth/approle/role/bootroot-service-<registration_id>",
		"secret ids       ttl 3600 s, 1 use(s)")
	if strings.Contains(stdout+stderr, checkToken) {
		t.Errorf("config check printed the token:\n%s%s", stdout, stderr)
	}
}

func TestConfigCheckNamesTheMissingOpenBaoToken(t *testing.T) {
	path := writeConfigForCheck(t, "[registrar]\nbackend = \"openbao\"\n[openbao]\naddress = \"http://127.0.0.1:8200\"\n")
	code, _, stderr := configCheckOutput([]string{"--config", path}, []string{"HOME=/nonexistent"})
	if code != configCheckInvalid || !strings.Contains(stderr, "openbao.token_file is required when registrar.backend is \"openbao\" and neither BAO_TOKEN nor VAULT_TOKEN is set") {
		t.Errorf("exit status %d, stderr:\n%s", code, stderr)
	}
}

// config check resolves registrar.socket_group the way serve does when it
// binds the socket: a group the host does not have is an error naming the
// key and the group, exit 2, worded as serve's refusal.
func TestConfigCheckRefusesASocketGroupTheHostLacks(t *testing.T) {
	const missing = "no-such-group-registrar-test"
	dir := shortTempDir(t)
	path := writeConfigForCheck(t, serveDoc(dir, `socket_group = "`+missing+`"`, ""))
	want := `registrar.socket_group must name a group that exists on this host (group: unknown group ` + missing + `), got "` + missing + `"`
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != configCheckInvalid {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, configCheckInvalid, stdout, stderr)
	}
	if !strings.Contains(stderr, want+"\n") || !strings.Contains(stderr, "config check: 1 error in "+path) {
		t.Fatalf("stderr:\n%s\nwant the line %q and one error", stderr, want)
	}
	code, res := checkJSON(t, "--config", path)
	if code != configCheckInvalid || res.OK || len(res.Errors) != 1 || res.Errors[0].Key != "registrar.socket_group" || res.Errors[0].Message != want {
		t.Fatalf("--json: exit %d, ok %v, errors %+v; want 2 and one registrar.socket_group error", code, res.OK, res.Errors)
	}

	// serve refuses the same configuration with the same words (in its
	// log line's quoted error value).
	var out, errb bytes.Buffer
	quoted := strconv.Quote(want)
	if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), quoted[1:len(quoted)-1]) {
		t.Fatalf("serve: exit %d, stderr:\n%s\nwant %d and %q", code, errb.String(), exitUsage, want)
	}

	// The configuration pages quote it, for the package's group.
	for _, lang := range []string{"en", "ko"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", lang, "configuration.md"))
		if err != nil {
			t.Fatal(err)
		}
		if quote := strings.ReplaceAll(want, missing, "registrar-callers"); !strings.Contains(string(raw), quote) {
			t.Errorf("docs/%s/configuration.md does not quote:\n  %s", lang, quote)
		}
	}

	// A numeric gid the host lacks.
	gid := strconv.Itoa(unusedIDs(t, 1)[0])
	path = writeConfigForCheck(t, serveDoc(dir, `socket_group = "`+gid+`"`, ""))
	code, res = checkJSON(t, "--config", path)
	wantGID := `registrar.socket_group must name a group that exists on this host (group: unknown groupid ` + gid + `), got "` + gid + `"`
	if code != configCheckInvalid || len(res.Errors) != 1 || res.Errors[0].Message != wantGID {
		t.Fatalf("gid %s: exit %d, errors %+v; want 2 and %q", gid, code, res.Errors, wantGID)
	}
}

func TestConfigCheckAcceptsAnExistingSocketGroup(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	dir := shortTempDir(t)
	for _, group := range []string{g.Name, g.Gid} {
		path := writeConfigForCheck(t, serveDoc(dir, `socket_group = "`+group+`"`, ""))
		code, res := checkJSON(t, "--config", path)
		if code != configCheckOK || !res.OK {
			t.Fatalf("socket_group %q: exit %d, errors %+v; want 0", group, code, res.Errors)
		}
		sock := filepath.Join(dir, "run", "r.sock")
		if st, d := pathState(res, sock); st != pathCreate || d != "absent; serve creates the socket 0660 in group "+group {
			t.Errorf("socket_group %q: %s: state %q detail %q; want create, 0660 in the group", group, sock, st, d)
		}
	}
}

// tlsFiles writes a CA (valid 2020 to 2099), a server certificate it
// signed for localhost (valid from notBefore to notAfter, CN
// registrar-test) and the server's key into dir as server.crt, server.key
// and ca.crt, and returns their paths.
func tlsFiles(t *testing.T, dir string, notBefore, notAfter time.Time) (cert, key, ca string) {
	t.Helper()
	pki := pkitest.NewValid(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	srv := pki.Issue(t, pkitest.Options{CommonName: "registrar-test", DNS: []string{"localhost"}, Usage: x509.ExtKeyUsageServerAuth,
		NotBefore: notBefore, NotAfter: notAfter})
	ca, cert, key = pki.WriteFiles(t, dir, "server", srv)
	return cert, key, ca
}

// validTLSFiles is tlsFiles valid from 2020 to 2099.
func validTLSFiles(t *testing.T, dir string) (cert, key, ca string) {
	return tlsFiles(t, dir, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
}

// writeMode writes doc to a fresh file and chmods it (the umask does not
// apply to chmod).
func writeMode(t *testing.T, doc string, mode os.FileMode) string {
	t.Helper()
	path := writeConfigForCheck(t, doc)
	chmod(t, path, mode)
	return path
}

// checkDoc is a configuration serve cannot start with (its socket directory
// cannot be created under /proc): should a check under test ever let the
// file through, serve fails at once instead of serving until killed.
const checkDoc = "[registrar]\nsocket_path = \"/proc/registrar-otel-test/r.sock\"\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n"

func TestAWorldWritableConfigIsRefusedByServeAndReportedByConfigCheck(t *testing.T) {
	path := writeMode(t, checkDoc, 0o666)
	var out, errb bytes.Buffer
	if code := runServe([]string{"--config", path}, &out, &errb); code == 0 {
		t.Fatalf("serve exited 0 with a 0666 configuration file")
	}
	for _, want := range []string{path, "mode 0666", "group- or world-writable"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("serve's output does not name %q:\n%s", want, errb.String())
		}
	}
	code, stdout, stderr := configCheckOutput([]string{"--config", path}, nil)
	if code != configCheckInvalid || stdout != "" {
		t.Fatalf("config check: exit %d, stdout %q; want 2 and nothing on stdout", code, stdout)
	}
	if !strings.Contains(stderr, path) || !strings.Contains(stderr, "mode 0666") {
		t.Errorf("config check does not report the file and its mode:\n%s", stderr)
	}
	// The same file made private passes the check (serve would then fail
	// on the socket, which is not the point here).
	chmod(t, path, 0o600)
	if code, _, stderr := configCheckOutput([]string{"--config", path}, nil); code != configCheckOK {
		t.Fatalf("config check of the 0600 file: exit %d\n%s", code, stderr)
	}
}

func TestOTLPCredentialsAreNeverPrintedByServeOrConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		doc     string
		environ []string
	}{
		{"from the file", checkDoc + "[telemetry]\notlp_endpoint = \"https://otlpuser:otlppw@host\"\n", nil},
		{"from the environment", checkDoc, []string{"REGISTRAR_OTEL_TELEMETRY__OTLP_ENDPOINT=https://otlpuser:otlppw@host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeMode(t, tc.doc, 0o600)
			code, stdout, stderr := configCheckOutput([]string{"--config", path}, tc.environ)
			if code != configCheckInvalid {
				t.Fatalf("config check: exit %d, want 2", code)
			}
			for _, out := range []string{stdout, stderr} {
				if strings.Contains(out, "otlpuser") || strings.Contains(out, "otlppw") {
					t.Errorf("config check printed the credentials:\n%s", out)
				}
			}
			if !strings.Contains(stderr, "telemetry.otlp_endpoint") {
				t.Errorf("config check does not name the key:\n%s", stderr)
			}
			for _, kv := range tc.environ {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			if code := runServe([]string{"--config", path}, &out, &errb); code == 0 {
				t.Fatal("serve exited 0 with credentials in the endpoint")
			}
			if s := out.String() + errb.String(); strings.Contains(s, "otlpuser") || strings.Contains(s, "otlppw") || !strings.Contains(s, "telemetry.otlp_endpoint") {
				t.Errorf("serve's output:\n%s\nwant the key named and neither the user nor the password", s)
			}
		})
	}
}

// goldenJSON compares raw, indented as config check --json's readers
// see it, with the golden file name.
func goldenJSON(t *testing.T, name string, raw json.RawMessage) {
	t.Helper()
	var indented bytes.Buffer
	if err := json.Indent(&indented, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	indented.WriteByte('\n')
	golden(t, name, indented.Bytes())
}

// A subordinate uid file serve would refuse to read is one of config
// check's errors, under registrar.subuid_file, in serve's words.
func TestConfigCheckReportsASubuidFileServeWouldRefuse(t *testing.T) {
	dir := shortTempDir(t)
	subuid := filepath.Join(dir, "subuid")
	writeFile(t, subuid, []byte("alice:100000:65536\nbob:100000:65536\n"), 0o644)
	path := writeConfig(t, dir, serveDoc(dir, `subuid_file = "`+subuid+`"`, ""), 0o600)
	code, res := checkJSON(t, "--config", path)
	if code != configCheckInvalid || len(res.Errors) != 1 || res.Errors[0].Key != "registrar.subuid_file" {
		t.Fatalf("config check: exit %d, errors %+v; want 2 and one registrar.subuid_file error", code, res.Errors)
	}
	var out, errb bytes.Buffer
	quoted := strconv.Quote(res.Errors[0].Message)
	if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), quoted[1:len(quoted)-1]) {
		t.Errorf("serve: exit %d, stderr:\n%s\nwant %d and config check's words: %s", code, errb.String(), exitUsage, res.Errors[0].Message)
	}
}

// What opening a path fails on at start, config check reports under the
// path's key: a symlink loop above it (ELOOP), a name too long for the
// file system (ENAMETOOLONG), a directory where the registry file goes
// (EISDIR). serve refuses each with exit 2.
func TestConfigCheckRefusesWhatOpeningAPathWouldFailOn(t *testing.T) {
	dir := shortTempDir(t)
	socket, _, audit := daemonPaths(dir)
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(filepath.Join(dir, "loop2"), loop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loop, filepath.Join(dir, "loop2")); err != nil {
		t.Fatal(err)
	}
	registryDir := filepath.Join(dir, "lib2")
	mkdir(t, registryDir, 0o700)
	mkdir(t, filepath.Join(registryDir, "registrar.db"), 0o700)
	for _, c := range []struct {
		name, state, want string
	}{
		{"symlink loop", filepath.Join(loop, "state"), "too many levels of symbolic links"},
		{"name too long", filepath.Join(dir, strings.Repeat("n", 300)), "file name too long"},
		{"registry is a directory", registryDir, "is not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, dir, serveDocAt(socket, c.state, audit, "", ""), 0o600)
			code, res := checkJSON(t, "--config", path)
			if code != configCheckInvalid || errorsWith(res, "registrar.state_dir", c.want) != 1 {
				t.Errorf("config check: exit %d, errors:\n%s\nwant 2 and a registrar.state_dir error saying %q", code, findingsText(res.Errors), c.want)
			}
			var out, errb bytes.Buffer
			if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "registrar.state_dir") {
				t.Errorf("serve: exit %d, stderr:\n%s\nwant %d naming registrar.state_dir", code, errb.String(), exitUsage)
			}
		})
	}
}
