package main

// The stamped build and the daemon's own logs, tried as an operator would:
// `make build` stamps git describe into the binary, and what the daemon
// says about itself (registrar_build_info, service.version, the version
// command) agrees with it; a --log-format json daemon whose collector is
// down still writes only JSON lines.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// servedDaemon is a `serve` started by launchServe.
type servedDaemon struct {
	*loggedProc
	metricsURL string
	socket     string
}

var jsonMetricsRE = regexp.MustCompile(`"metrics":"(http://[^"]+/metrics)"`)

// launchServe starts bin serve with a fresh configuration (telemetry
// lines added to [telemetry]), extra serve flags and extra environment,
// and returns once it logs that it serves.
func launchServe(t *testing.T, bin, telemetryExtra string, env []string, args ...string) *servedDaemon {
	t.Helper()
	dir := shortTempDir(t)
	s := &servedDaemon{}
	s.socket, _, _ = daemonPaths(dir)
	cfgPath := writeConfig(t, dir, serveDoc(dir, "", `metrics_listen = "127.0.0.1:0"
`+telemetryExtra+"\n"), 0o600)
	cmd := exec.Command(bin, append([]string{"serve", "--config", cfgPath}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var line string
	s.loggedProc, line = startLogged(t, "daemon", cmd, "registrar-otel serving")
	if m := metricsRE.FindStringSubmatch(line); m != nil {
		s.metricsURL = m[1]
	} else if m := jsonMetricsRE.FindStringSubmatch(line); m != nil {
		s.metricsURL = m[1]
	}
	return s
}

func (s *servedDaemon) stop(t *testing.T) {
	t.Helper()
	s.terminate(t, "daemon")
}

func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git %v: %v", args, err)
		}
		t.Skipf("git %v: %v (not a git checkout?)", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestBuildInfoAgreesWithTheVersionFileOfAStampedBuild builds with `make
// build`, as a release is built, and asks the running daemon: the version
// is the VERSION file, the revision git's HEAD.
func TestBuildInfoAgreesWithTheVersionFileOfAStampedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	versionFile, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	describe := strings.TrimSpace(string(versionFile))
	revision := gitOutput(t, root, "rev-parse", "HEAD")
	bin := filepath.Join(t.TempDir(), "registrar-otel")
	mk := exec.Command("make", "-C", root, "build", "BIN="+bin)
	// The Makefile's own stamping, not a VERSION or REVISION a release
	// pipeline might export.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VERSION=") && !strings.HasPrefix(kv, "REVISION=") {
			mk.Env = append(mk.Env, kv)
		}
	}
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}

	t.Run("registrar_build_info and service.version", func(t *testing.T) {
		s := launchServe(t, bin, "", nil)
		body := getBody(t, http.DefaultClient, s.metricsURL)
		want := fmt.Sprintf(`registrar_build_info{goversion=%q,revision=%q,version=%q} 1`, runtime.Version(), revision, describe)
		if !strings.Contains(body, want) {
			t.Errorf("/metrics does not carry\n  %s\n%s", want, grep(body, "registrar_build_info"))
		}
		if want := fmt.Sprintf(`service_version=%q`, describe); !strings.Contains(grep(body, "target_info"), want) {
			t.Errorf("target_info does not carry %s:\n%s", want, grep(body, "target_info"))
		}
		if !strings.Contains(body, "\nprocess_cpu_seconds_total ") || !strings.Contains(body, "\ngo_goroutines ") {
			t.Errorf("/metrics lacks the process_* and go_* series")
		}
		s.stop(t)
	})

	t.Run("version command", func(t *testing.T) {
		code, out, errOut := runCmd(t, exec.Command(bin, "version"))
		if strings.Contains(errOut, "unknown command") {
			t.Skip("this build has no version command yet (issue 15 adds it)")
		}
		if code != exitOK || !strings.Contains(out, describe) {
			t.Errorf("registrar-otel version: exit %d\nstdout: %s\nstderr: %s\nwant it to print %q", code, out, errOut, describe)
		}
	})
}

// TestPlainGoBuildReportsTheModuleVersionAndRevision: a plain `go build`
// (no -ldflags) prints what the toolchain recorded, not "dev"/"unknown":
// the main module's version and the checkout's HEAD.
func TestPlainGoBuildReportsTheModuleVersionAndRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped in -short mode")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	revision := gitOutput(t, root, "rev-parse", "HEAD")
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		// The go command records VCS information only when the checkout's
		// .git is a directory: a `git worktree` (a .git file) gets none.
		t.Skipf("%s/.git is not a directory (a git worktree?): the go command records no VCS information there", root)
	}
	bin := filepath.Join(t.TempDir(), "registrar-otel")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/registrar-otel")
	build.Dir = root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			build.Env = append(build.Env, kv)
		}
	}
	build.Env = append(build.Env, "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mod, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var modVersion string
	for _, l := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "mod" {
			modVersion = f[2]
		}
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("version --json: %v", err)
	}
	var v versionJSON
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	if modVersion == "" || v.Version != modVersion {
		t.Errorf("version = %q, want the module version the toolchain recorded, %q", v.Version, modVersion)
	}
	if !strings.HasPrefix(v.Revision, revision) {
		t.Errorf("revision = %q, want git's HEAD %s (with \" (modified)\" for a dirty tree)", v.Revision, revision)
	}
}

func grep(body, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestJSONLogStaysJSONWithTheCollectorDown: a --log-format json daemon
// exporting to a closed OTLP port logs the SDK's export failures through
// slog, rate-limited, and nothing but JSON lines.
func TestJSONLogStaysJSONWithTheCollectorDown(t *testing.T) {
	bin := buildBinary(t)
	closed := "http://" + closedAddr(t)
	// The standard variables make the SDK export (and fail) every 100 ms.
	// trace_sample_per_million = 1000000: the mints below send no traceparent, and
	// their spans must be exported (and fail) too.
	s := launchServe(t, bin, fmt.Sprintf("otlp_endpoint = %q\ntrace_sample_per_million = 1000000", closed), []string{
		"OTEL_METRIC_EXPORT_INTERVAL=100", "OTEL_METRIC_EXPORT_TIMEOUT=200",
		"OTEL_EXPORTER_OTLP_TIMEOUT=200", "OTEL_BSP_SCHEDULE_DELAY=100",
	}, "--log-format", "json")
	// A few invocations, so there are spans to export too.
	for i := range 3 {
		code, out, errOut := (&daemonProc{t: t, bin: bin}).run("mint", "--socket", s.socket, "--service-name", "review",
			"--host", fmt.Sprintf("h%d", i), "--instance", "1", "--component", "review")
		if code != exitOK {
			t.Fatalf("mint: exit %d\n%s%s", code, out, errOut)
		}
	}
	// Wait (on the daemon's own log) for both signals' failures.
	if !poll(60*time.Second, func() bool {
		return strings.Contains(s.logs.String(), "/v1/metrics") && strings.Contains(s.logs.String(), "traces export")
	}) {
		t.Fatalf("no OTLP export failure logged within 60 s:\n%s", s.logs.String())
	}
	s.stop(t)
	sdkLines := 0
	for i, line := range strings.Split(strings.TrimSpace(s.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line %d is not JSON: %q", i+1, line)
			continue
		}
		if msg, _ := m["msg"].(string); strings.Contains(msg, "OpenTelemetry SDK") {
			sdkLines++
		}
	}
	// Export failed about every 100 ms per signal; rate-limited, each kind
	// of failure is logged once a minute.
	if sdkLines == 0 || sdkLines > 6 {
		t.Errorf("%d OpenTelemetry SDK lines, want a few (rate-limited):\n%s", sdkLines, s.logs.String())
	}
}
