package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/daemon"
)

// unitDir is where the systemd units are kept (and where the Debian
// package takes them from).
const unitDir = "../../packaging/systemd"

// maxExposure is the exposure `systemd-analyze security --offline=true`
// may report for the service (the peers: prometheus 4.0, node_exporter
// 4.6, openbao 5.9).
const maxExposure = 2.0

// unitCopies copies the units into a temporary directory with ExecStart
// pointing at an executable that exists here (verify checks it), and
// returns the directory.
func unitCopies(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"registrar-otel.service", "registrar-otel.socket"} {
		b, err := os.ReadFile(filepath.Join(unitDir, name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "/usr/bin/registrar-otel", self)
		writeFile(t, filepath.Join(dir, name), []byte(s), 0o644)
	}
	return dir
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package; `make deps` installs it): the unit files are not checked")
	}
	return bin
}

func TestTheSystemdUnitsVerifyWithoutAWord(t *testing.T) {
	bin := systemdAnalyze(t)
	dir := unitCopies(t)
	out, err := exec.Command(bin, "verify",
		filepath.Join(dir, "registrar-otel.service"), filepath.Join(dir, "registrar-otel.socket")).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("systemd-analyze verify: %v, printed:\n%s", err, out)
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for registrar-otel\.service: ([0-9.]+)`)

func TestTheServiceUnitIsHardenedToAnExposureOfAtMostTwo(t *testing.T) {
	bin := systemdAnalyze(t)
	dir := unitCopies(t)
	out, err := exec.Command(bin, "security", "--offline=true", "--no-pager",
		filepath.Join(dir, "registrar-otel.service")).CombinedOutput()
	m := exposureRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v, no exposure level in:\n%s", err, out)
	}
	got, perr := strconv.ParseFloat(string(m[1]), 64)
	if perr != nil {
		t.Fatal(perr)
	}
	t.Logf("systemd-analyze security --offline=true: exposure %.1f", got)
	if got > maxExposure {
		t.Fatalf("exposure %.1f, want at most %.1f:\n%s", got, maxExposure, out)
	}
}

// unitDirectives returns the directives of a unit file, key → values in
// order.
func unitDirectives(t *testing.T, name string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(unitDir, name))
	if err != nil {
		t.Fatal(err)
	}
	d := map[string][]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a directive: %q", name, line)
		}
		d[k] = append(d[k], v)
	}
	return d
}

func TestTheServiceUnitSaysWhatTheDaemonDoes(t *testing.T) {
	svc := unitDirectives(t, "registrar-otel.service")
	want := map[string]string{
		"Type":                     "notify",
		"KillSignal":               "SIGTERM",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": strconv.Itoa(exitUsage),
		"ExecReload":               "/usr/bin/registrar-otel reload --config /etc/registrar-otel/registrar.toml",
		"User":                     "registrar-otel",
		"Group":                    "registrar-otel",
		"SupplementaryGroups":      "registrar-callers",
		"StateDirectory":           "registrar-otel registrar-otel/audit",
		"ReadWritePaths":           "-/run/registrar-otel",
		"ConfigurationDirectory":   "registrar-otel",
	}
	for k, v := range want {
		if got := svc[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%v, want %s", k, got, v)
		}
	}
	// Issue 37: RuntimeDirectory= made systemd chown the socket unit's
	// socket to the daemon's group at every start, locking the callers'
	// group out; the directory comes from tmpfiles.d instead.
	if got, ok := svc["RuntimeDirectory"]; ok {
		t.Errorf("RuntimeDirectory=%v: systemd would chown the socket unit's socket to the daemon's group", got)
	}
	tmp, err := os.ReadFile(filepath.Join(unitDir, "registrar-otel.tmpfiles"))
	if err != nil || !strings.Contains(string(tmp), "\nd /run/registrar-otel 0755 registrar-otel registrar-otel -\n") {
		t.Errorf("registrar-otel.tmpfiles does not make /run/registrar-otel 0755 for the daemon's user (%v):\n%s", err, tmp)
	}
	// A watchdog kill must not end in the status kept for configuration
	// errors: the daemon exits daemon.AbortExitStatus on SIGABRT.
	if daemon.AbortExitStatus == exitUsage || strings.Contains(" "+strings.Join(svc["RestartPreventExitStatus"], " ")+" ", " "+strconv.Itoa(daemon.AbortExitStatus)+" ") {
		t.Errorf("the watchdog's SIGABRT ends in exit %d, which the unit does not restart", daemon.AbortExitStatus)
	}
	if ws := svc["WatchdogSignal"]; len(ws) != 0 && ws[0] != "SIGABRT" {
		t.Errorf("WatchdogSignal=%v, the daemon answers SIGABRT", ws)
	}
	// The stop timeout covers the in-flight bound and the flush bound
	// (each daemon.ShutdownTimeout).
	stop, err := time.ParseDuration(strings.Join(svc["TimeoutStopSec"], ""))
	if err != nil || stop <= 2*daemon.ShutdownTimeout {
		t.Errorf("TimeoutStopSec=%v (%v), want more than 2 × %s", svc["TimeoutStopSec"], err, daemon.ShutdownTimeout)
	}
	// The watchdog must leave the default tick (1 s) room: at least
	// twice the default interval and the liveness bound.
	wd, err := time.ParseDuration(strings.Join(svc["WatchdogSec"], ""))
	if err != nil || wd < 2*daemon.TickLateBound(time.Second) {
		t.Errorf("WatchdogSec=%v (%v), want at least 2 × %s", svc["WatchdogSec"], err, daemon.TickLateBound(time.Second))
	}
	sock := unitDirectives(t, "registrar-otel.socket")
	for k, v := range map[string]string{
		"ListenStream": "/run/registrar-otel/registrar.sock",
		"SocketMode":   "0660",
		"SocketGroup":  "registrar-callers",
	} {
		if got := sock[k]; len(got) != 1 || got[0] != v {
			t.Errorf("socket unit: %s=%v, want %s", k, got, v)
		}
	}
}
