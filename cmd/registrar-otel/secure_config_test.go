package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeMode writes doc to a fresh file and chmods it (the umask does not
// apply to chmod).
func writeMode(t *testing.T, doc string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registrar-otel.toml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
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
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
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
		{"from the file", checkDoc + "[telemetry]\notlp_endpoint = \"https://user:pw@host\"\n", nil},
		{"from the environment", checkDoc, []string{"REGISTRAR_OTEL_TELEMETRY__OTLP_ENDPOINT=https://user:pw@host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeMode(t, tc.doc, 0o600)
			code, stdout, stderr := configCheckOutput([]string{"--config", path}, tc.environ)
			if code != configCheckInvalid {
				t.Fatalf("config check: exit %d, want 2", code)
			}
			for _, out := range []string{stdout, stderr} {
				if strings.Contains(out, "user") || strings.Contains(out, "pw") {
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
			if s := out.String() + errb.String(); strings.Contains(s, "user") || strings.Contains(s, "pw") || !strings.Contains(s, "telemetry.otlp_endpoint") {
				t.Errorf("serve's output:\n%s\nwant the key named and neither the user nor the password", s)
			}
		})
	}
}
