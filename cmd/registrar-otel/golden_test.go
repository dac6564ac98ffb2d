package main

// Golden tests of every --json output (and the interrupted load summary):
// the schema documented in docs/{en,ko}/operations.md#json-output. Each
// TestGolden* sits beside the code it holds (version_test.go,
// sizing_test.go, load_summary_test.go, audit_scan_json_test.go); this
// file has the comparison they share. Run "make golden" (go test -update)
// to rewrite them after a deliberate change, and review the diff.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, got, 0o644)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run make golden to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run make golden and review the diff):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestGoldenConfigCheckJSON(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := validTLSFiles(t, dir)
	os.Mkdir(filepath.Join(dir, "audit"), 0o700)
	doc := func(extra string) string {
		return fmt.Sprintf(`[registrar]
socket_path = %q
state_dir = %q
audit_record_dir = %q
%saudit_store_backend = "segmented"
%s
[registrar.components.review]
multiplicity = "many-per-host"
[registrar.components.edge-proxy]
multiplicity = "one-per-host"
[telemetry]
otlp_endpoint = "http://127.0.0.1:4318"
trace_sample_per_million = 250000
`, filepath.Join(dir, "run", "registrar.sock"), filepath.Join(dir, "lib"), filepath.Join(dir, "audit"), tlsListenLines("127.0.0.1:8443", cert, key, ca), extra)
	}
	for _, tc := range []struct {
		doc  string
		code int
		file string
	}{
		{doc(""), configCheckOK, "config_check_ok.json"},
		{doc("rate_limit_admision_burst = 4096"), configCheckInvalid, "config_check_misspelt.json"},
		{"[registrar]\nrate_limit_admission_burst = 0\nmax_wrap_ttl_seconds = -1\n", configCheckInvalid, "config_check_invalid.json"},
	} {
		path := filepath.Join(dir, "registrar.toml")
		writeFile(t, path, []byte(tc.doc), 0o600)
		code, out, errOut := configCheckOutput([]string{"--config", path, "--json"}, nil)
		if code != tc.code || errOut != "" {
			t.Fatalf("%s: exit %d (want %d), stderr %q", tc.file, code, tc.code, errOut)
		}
		// The derived service.instance.id names this machine.
		host, _ := os.Hostname()
		out = strings.ReplaceAll(out, host+":"+dir, "$HOST:"+dir)
		golden(t, tc.file, []byte(asRootJudged(t, strings.ReplaceAll(out, dir, "$DIR"))))
	}
}

// asRootJudged makes config check --json's judged_for the one a check run
// by root shows, whoever runs the tests, so that the goldens do not depend
// on it.
func asRootJudged(t *testing.T, out string) string {
	t.Helper()
	j, err := resolveJudge("", newCheckResult("", false))
	if err != nil {
		t.Fatal(err)
	}
	mine := fmt.Sprintf("\"judged_for\": {\n    \"user\": %q,\n    \"uid\": %d,", j.User, j.UID)
	if !strings.Contains(out, mine) {
		t.Fatalf("config check --json does not say it judged for %s:\n%s", j.who(), out)
	}
	return strings.Replace(out, mine, "\"judged_for\": {\n    \"user\": \"root\",\n    \"uid\": 0,", 1)
}
