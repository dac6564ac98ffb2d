package main

// End-to-end tests of a newcomer's first hour (issue 22, items 6 to 13):
// each runs the real binary and pins its output or its exit status.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// runBin runs the binary in dir with env added to the environment.
func runBin(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PWD="+dir), env...)
	return runCmd(t, cmd)
}

func wantRun(t *testing.T, dir string, env []string, args []string, code int, wantErr ...string) string {
	t.Helper()
	got, out, errOut := runBin(t, dir, env, args...)
	if got != code {
		t.Errorf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, got, code, out, errOut)
	}
	for _, w := range wantErr {
		if !strings.Contains(errOut, w) {
			t.Errorf("%v: stderr lacks %q:\n%s", args, w, errOut)
		}
	}
	return out
}

// Item 6: from a directory without the defaults' var/, the messages give
// the absolute path and say it is the default, relative to the working
// directory.
func TestDefaultPathsAreNamedAbsoluteAndRelativeToTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	mint := unprivileged(t, exec.Command(buildBinary(t), "mint", "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"), dir)
	mint.Dir, mint.Env = dir, append(os.Environ(), "PWD="+dir)
	want := "no daemon socket at " + filepath.Join(dir, "var/run/registrar.sock") + " (the default var/run/registrar.sock, relative to the working directory " + dir + ")"
	if code, _, errOut := runCmd(t, mint); code != exitTransport || !strings.Contains(errOut, want) {
		t.Errorf("mint with the default socket: exit %d, stderr:\n%s\nwant exit %d and %q", code, errOut, exitTransport, want)
	}
	wantRun(t, dir, nil, []string{"audit", "scan"}, auditScanFailed,
		"audit scan: cannot read the record store at "+filepath.Join(dir, "var/audit")+" (the default var/audit, relative to the working directory "+dir+"): no such file or directory",
		"--dir DIR")
}

// Item 7: a regular file at the socket path is not called a stale socket
// that serve replaces: serve refuses it, and the client says so.
func TestARegularFileAtTheSocketPathIsNotCalledAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "registrar.sock")
	writeFile(t, file, []byte("x"), 0o600)
	_, _, errOut := runBin(t, dir, nil, "mint", "--socket", file, "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1")
	if !strings.Contains(errOut, file+" is not a socket (a regular file): serve refuses to replace it") || strings.Contains(errOut, "stale") {
		t.Errorf("stderr %q: want the regular file named, no stale-socket advice", errOut)
	}
}

// Item 8: an environment variable with one "_" between levels is named,
// with the "__" spelling.
func TestAMisspeltVariableIsNamedWithTheDoubleUnderscoreSpelling(t *testing.T) {
	wantRun(t, t.TempDir(), []string{"REGISTRAR_OTEL_REGISTRAR_RATE_LIMIT_ADMISSION_BURST=600"}, []string{"config", "check"}, exitUsage,
		`environment variable REGISTRAR_OTEL_REGISTRAR_RATE_LIMIT_ADMISSION_BURST names no known key (it reads as registrar_rate_limit_admission_burst); did you mean REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST? Levels are separated by "__"`)
}

// Item 9: flag errors name the flag, what it wanted and an example; a
// misspelt command, flag or value gets a "did you mean"; a usage error
// exits 2 everywhere, a bare command and a bare group included.
func TestUsageErrorsSayWhatWasWantedAndExit2(t *testing.T) {
	dir := t.TempDir()
	open := t.TempDir()
	chmod(t, open, 0o777)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sizing", "--wave-hosts", "-5", "--modules-per-host", "1"}, `registrar-otel sizing: --wave-hosts: got "-5", want a whole number, 0 or more (decimal digits only); for example: --wave-hosts 64`},
		{[]string{"audit", "scan", "--window", "1d"}, `--window: got "1d", want a duration: a number and a unit (ms, s, m or h), such as 90s or 24h; there is no d; for example: --window 24h`},
		{[]string{"mnit"}, `unknown command "mnit"; did you mean "mint"?`},
		{[]string{"audit", "scna"}, `unknown command "audit scna"; did you mean "audit scan"?`},
		{[]string{"mint", "--servicename", "x"}, "unknown flag --servicename; did you mean --service-name?"},
		{[]string{"load", "flood", "--bucket", "admision", "--requests", "1"}, `--bucket: got "admision", want predecision_refusal or admission; did you mean admission?; for example: --bucket admission`},
		{[]string{"config", "check", "--config", open}, "--config " + open + " is a directory: give the configuration file itself"},
		{[]string{}, "usage: registrar-otel <command>"},
		{[]string{"audit"}, "usage: registrar-otel audit <subcommand>"},
	} {
		wantRun(t, dir, nil, tc.args, exitUsage, tc.want)
	}
	// Asking for the list is not an error.
	wantRun(t, dir, nil, []string{"audit", "-h"}, exitOK)
}

// Item 10: config check warns about a private key others may read (an
// error under --strict), and about a listen address it cannot bind,
// naming a running daemon when its /metrics answers there.
func TestConfigCheckForeseesTheKeyModeAndATakenPort(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := validTLSFiles(t, dir)
	chmod(t, key, 0o644)
	// A fake daemon on the metrics port: its /metrics has registrar_build_info.
	l := listenLocal(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `registrar_build_info{version="x"} 1`)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	// And a port held by something else.
	other := listenLocal(t)
	doc := fmt.Sprintf("[registrar]\n%s[registrar.components.review]\nmultiplicity = \"many-per-host\"\n[telemetry]\nmetrics_listen = %q\n",
		tlsListenLines(other.Addr().String(), cert, key, ca), l.Addr().String())
	path := filepath.Join(dir, "registrar.toml")
	writeFile(t, path, []byte(doc), 0o600)
	keyWarn := fmt.Sprintf("registrar.tls_key_file %s is readable by its group and every user (mode 0644)", key)
	wantRun(t, dir, nil, []string{"config", "check", "--config", path}, exitOK,
		"warning: "+keyWarn,
		"warning: telemetry.metrics_listen "+l.Addr().String()+": serve could not listen there: address already in use; a running registrar-otel daemon holds it (its /metrics answers there)",
		"warning: registrar.tls_listen "+other.Addr().String()+": serve could not listen there: address already in use; another process holds it")
	wantRun(t, dir, nil, []string{"config", "check", "--config", path, "--strict"}, exitUsage, keyWarn)
}

// Item 11: load wave says when its trace went nowhere, and exits 1 when
// the exporter failed.
func TestLoadWaveSaysWhereItsTraceWent(t *testing.T) {
	d := startDaemon(t, "", "")
	args := []string{"load", "wave", "--config", d.config, "--hosts", "1", "--modules-per-host", "1", "--settle", "0s", "--progress", "off"}
	out := wantRun(t, d.dir, nil, args, exitOK)
	if !strings.Contains(out, "NOT exported: no traces endpoint") {
		t.Errorf("no exporter: summary lacks the not-exported note:\n%s", out)
	}
	addr := closedAddr(t)
	wantRun(t, d.dir, []string{"OTEL_EXPORTER_OTLP_TIMEOUT=500"}, append(args, "--otlp-endpoint", "http://"+addr), exitFailure,
		"registrar-otel load wave: its trace ", "was NOT exported: exporting the spans to http://"+addr+"/v1/traces")
}

// Items 12 and 13: audit scan --by identity names the flooding caller,
// largest first, in text and JSON; --fail-on-limited N exits 4 when more
// than N invocations were limited, and anomalies (1) take precedence.
func TestAuditScanNamesTheFloodingIdentityAndFailsOnLimited(t *testing.T) {
	lim := func(id string, b vocab.Bucket, n uint64) *audit.Record {
		r := scanLimited(b, n)
		r.CallerIdentity = id
		return r
	}
	dir := auditStore(t, scanIntent("q1"), scanOutcome("q1"),
		lim("unix-peer:uid=1000", vocab.Admission, 7),
		lim("unix-peer:uid=6666", vocab.PredecisionRefusal, 8000),
		lim("unix-peer:uid=1000", vocab.Admission, 3))
	wd := t.TempDir()
	out := wantRun(t, wd, nil, []string{"audit", "scan", "--dir", dir, "--by", "identity", "--top", "1"}, exitOK)
	wantContains(t, "text", out,
		"limited by caller identity (1 of 2, most limited invocations first):",
		"unix-peer:uid=6666  predecision_refusal  1        8000",
		"... and 1 more (--top 0 shows all)",
		"result: clean")
	js := wantRun(t, wd, nil, []string{"audit", "scan", "--dir", dir, "--by", "identity", "--json", "--fail-on-limited", "8009"}, auditScanLimited)
	var got struct {
		ByIdentity []scanIdentityJSON `json:"limited_by_identity"`
		Omitted    int                `json:"limited_by_identity_omitted"`
		FailOn     failOnLimited      `json:"fail_on_limited"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("%v:\n%s", err, js)
	}
	want := []scanIdentityJSON{{"unix-peer:uid=6666", "predecision_refusal", 1, 8000}, {"unix-peer:uid=1000", "admission", 2, 10}}
	if fmt.Sprint(got.ByIdentity) != fmt.Sprint(want) || got.Omitted != 0 || got.FailOn != (failOnLimited{8009, 8010, true}) {
		t.Errorf("JSON: %+v, want rows %+v and fail_on_limited {8009 8010 true}", got, want)
	}
	wantRun(t, wd, nil, []string{"audit", "scan", "--dir", dir, "--fail-on-limited", "8010"}, exitOK)
	wantRun(t, wd, nil, []string{"audit", "scan", "--dir", dir, "--fail-on-limited", "0"}, exitLimited)
	// An anomaly (an intent without outcome) is 1, whatever the threshold.
	crashed := scanIntent("crashed")
	bad := auditStore(t, crashed, lim("unix-peer:uid=6666", vocab.Admission, 50))
	wantRun(t, wd, nil, []string{"audit", "scan", "--dir", bad, "--fail-on-limited", "0"}, exitFailure)
}
