package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The shipped example names TLS files that do not exist here: the check
// fails and names each one, as serve would fail on the first.
func TestConfigCheckShippedExampleWithTheTLSFilesMissing(t *testing.T) {
	for _, lang := range []string{"en", "ko"} {
		example := filepath.Join("..", "..", "docs", lang, "examples", "registrar.toml")
		code, stdout, stderr := configCheckOutput([]string{"--config", example}, nil)
		if code != configCheckInvalid || stdout != "" {
			t.Fatalf("%s: exit %d, stdout %q; want 2 and nothing on stdout", example, code, stdout)
		}
		for _, want := range []string{
			"registrar.tls_cert_file: cannot read /etc/registrar-otel/tls/server.crt: no such file or directory\n",
			"registrar.tls_key_file: cannot read /etc/registrar-otel/tls/server.key: no such file or directory\n",
			"registrar.tls_client_ca_file: cannot read /etc/registrar-otel/tls/clients-ca.crt: no such file or directory\n",
			"config check: 3 errors in " + example + "\n",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", example, want, stderr)
			}
		}
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

func tlsConfigDoc(cert, key, ca string) string {
	return fmt.Sprintf("[registrar]\ntls_listen = \"127.0.0.1:8443\"\ntls_cert_file = %q\ntls_key_file = %q\ntls_client_ca_file = %q\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n", cert, key, ca)
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
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
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
