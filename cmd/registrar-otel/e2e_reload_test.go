package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// sampleIn reads one sample's value from an exposition; -1 when absent.
func sampleIn(t *testing.T, exposition, sample string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` ([0-9.e+-]+)$`).FindStringSubmatch(exposition)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mintInstance(t *testing.T, c *wire.Client, instance uint32) *wire.Response {
	t.Helper()
	res, err := c.Mint(context.Background(), reviewMint("h1", instance))
	if err != nil {
		t.Fatalf("mint %d: %v", instance, err)
	}
	return res
}

// rewrite replaces old with new in the daemon's configuration file.
func (d *daemonProc) rewrite(old, new string, mode os.FileMode) {
	d.t.Helper()
	raw, err := os.ReadFile(d.config)
	if err != nil {
		d.t.Fatal(err)
	}
	if !strings.Contains(string(raw), old) {
		d.t.Fatalf("%q not in the configuration file", old)
	}
	writeFile(d.t, d.config, []byte(strings.Replace(string(raw), old, new, 1)), 0o600)
	chmod(d.t, d.config, mode)
}

const drainLimits = "rate_limit_admission_burst = 8\nrate_limit_admission_refill_interval_ms = 3600000\n"

// TestEndToEndReloadRaisesTheLimitsWithoutRestarting is the incident of
// docs/en/operations.md#changing-limits: one identity has drained its
// admission bucket (burst 8, one token an hour); the operator raises the
// burst to 64 and shortens the refill to a minute and runs registrar-otel
// reload. The drained identity stays throttled until it accrues under the
// new sizes (its retry-after is the new interval's, not a fresh burst), a
// new identity gets the new burst, and nothing restarted: same pid, the
// counters and the open coalescing window kept their counts.
func TestEndToEndReloadRaisesTheLimitsWithoutRestarting(t *testing.T) {
	p := newE2EPKI(t)
	d, addr := startTLSDaemon(t, p, drainLimits)
	pid := d.cmd.Process.Pid
	unix := wire.NewUnixClient(d.socket, wire.WithTimeout(e2eIODeadline))
	defer unix.CloseIdleConnections()
	for i := range 8 {
		if res := mintInstance(t, unix, uint32(i+1)); !res.OK() {
			t.Fatalf("mint %d within the burst of 8: %d %s", i, res.StatusCode, res.ErrorID)
		}
	}
	for i := range 3 {
		if res := mintInstance(t, unix, uint32(100+i)); res.ErrorID != wire.RegistrarBusy || res.RetryAfter < 3000 {
			t.Fatalf("mint past the burst: %d %s retry_after %d, want RegistrarBusy after about an hour", res.StatusCode, res.ErrorID, res.RetryAfter)
		}
	}
	before := d.scrape()
	if got := sampleIn(t, before, `registrar_limited_admission_total{policy="default",verb="mint"}`); got != 3 {
		t.Fatalf("limited admission before the reload: %v, want 3", got)
	}
	if got := sampleIn(t, before, "registrar_coalesce_open_windows"); got != 1 {
		t.Fatalf("open windows before the reload: %v, want 1", got)
	}

	d.rewrite(drainLimits, "rate_limit_admission_burst = 64\nrate_limit_admission_refill_interval_ms = 60000\n", 0o600)
	code, out, errOut := d.run("reload", "--config", d.config)
	if code != 0 || !strings.Contains(out, "registrar.rate_limit_admission_burst: 8 -> 64") || !strings.Contains(out, "registrar.rate_limit_admission_refill_interval_ms: 3600000 -> 60000") {
		t.Fatalf("reload: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	// The drained identity: still throttled, now due within the new 60 s
	// interval (not the old hour), and not refilled to a fresh burst.
	res := mintInstance(t, unix, 200)
	if res.ErrorID != wire.RegistrarBusy || res.RetryAfter > 60 || res.RetryAfter < 30 {
		t.Fatalf("drained identity after the reload: %d %s retry_after %d, want RegistrarBusy within the new 60 s interval", res.StatusCode, res.ErrorID, res.RetryAfter)
	}
	// A new identity gets the new burst.
	caller := p.Client(t, "spiffe://registrar.test/fresh")
	tlsc := wire.NewTLSClient(addr, p.clientConfig(&caller), wire.WithTimeout(e2eIODeadline))
	defer tlsc.CloseIdleConnections()
	admitted := 0
	for i := range 65 {
		if mintInstance(t, tlsc, uint32(300+i)).OK() {
			admitted++
		}
	}
	if admitted != 64 {
		t.Fatalf("new identity after the reload: %d of 65 admitted, want the new burst 64", admitted)
	}

	if err := syscall.Kill(pid, 0); err != nil || strings.Count(d.logs.String(), "registrar-otel serving") != 1 {
		t.Fatalf("the daemon (pid %d) restarted or exited: %v", pid, err)
	}
	after := d.scrape()
	if got := sampleIn(t, after, `registrar_limited_admission_total{policy="default",verb="mint"}`); got < 4 {
		t.Fatalf("limited admission after the reload: %v, want ≥ 4 (3 before + 1): the counters were reset", got)
	}
	if got := sampleIn(t, after, `registrar_limited_admission_total{policy="clients",verb="mint"}`); got < 1 {
		t.Fatalf("the new identity's limited admission: %v, want ≥ 1 under its policy, clients", got)
	}
	if got := sampleIn(t, after, "registrar_config_last_reload_successful"); got != 1 {
		t.Fatalf("last_reload_successful %v, want 1", got)
	}
	if got := sampleIn(t, after, `registrar_config_reloads_total{result="success"}`); got != 1 {
		t.Fatalf("reloads success %v, want 1", got)
	}
	if ts := sampleIn(t, after, "registrar_config_last_reload_success_timestamp_seconds"); ts < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("last_reload_success_timestamp_seconds %v, not the reload's time", ts)
	}
	if !strings.Contains(d.logs.String(), `msg="configuration reloaded"`) {
		t.Fatalf("no reload INFO line in\n%s", d.logs)
	}
	// The open window kept its count: the unix identity's one record counts
	// the 3 limited mints before the reload and the 1 after.
	d.stop()
	_, rep := d.scan()
	// Two admission windows, one per identity: the unix identity's window
	// counted 3 before the reload and 1 after (a reload that closed or
	// reset it would make three records), the new identity's 1.
	if l := rep.Limited["admission"]; l.Records != 2 || l.Count != 5 {
		t.Fatalf("limited admission records %+v, want 2 records counting 5: the open window kept its count across the reload", rep.Limited)
	}
}

// TestEndToEndReloadRefusesAnInvalidFileAndServesOn: a 0666 file, a zero
// interval, a misspelt key and a restart-only change are each refused
// (exit 2, the errors printed, the key named), the daemon serves on with
// the old limits, and the gauge RegistrarConfigReloadFailed reads is 0;
// SIGHUP takes the same path.
func TestEndToEndReloadRefusesAnInvalidFileAndServesOn(t *testing.T) {
	d := startDaemon(t, drainLimits, "")
	unix := wire.NewUnixClient(d.socket, wire.WithTimeout(e2eIODeadline))
	defer unix.CloseIdleConnections()
	good := "rate_limit_admission_burst = 8\n"
	for i, tc := range []struct {
		name, new string
		mode      os.FileMode
		want      string
	}{
		{"0666", "rate_limit_admission_burst = 64\n", 0o666, "writable"},
		{"zero interval", "rate_limit_admission_burst = 64\nrate_limit_predecision_refusal_refill_interval_ms = 0\n", 0o600, "registrar.rate_limit_predecision_refusal_refill_interval_ms must be greater than 0"},
		{"misspelt key", "rate_limit_admission_burst = 64\nrate_limit_admision_burst = 64\n", 0o600, "registrar.rate_limit_admision_burst is not a known key"},
		{"restart-only key", "rate_limit_admission_burst = 64\nmaintenance_interval_ms = 250\n", 0o600, "registrar.maintenance_interval_ms changed: it needs a restart"},
	} {
		d.rewrite(good, tc.new, tc.mode)
		// --socket: with --config the command itself would refuse the
		// 0666 file while looking for the socket, before the daemon.
		code, out, errOut := d.run("reload", "--socket", d.socket)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%s: reload exit %d, want 2 with %q\nstdout: %s\nstderr: %s", tc.name, code, tc.want, out, errOut)
		}
		if got := sampleIn(t, d.scrape(), "registrar_config_last_reload_successful"); got != 0 {
			t.Fatalf("%s: last_reload_successful %v, want 0", tc.name, got)
		}
		if got := sampleIn(t, d.scrape(), `registrar_config_reloads_total{result="failure"}`); got != float64(i+1) {
			t.Fatalf("%s: reloads failure %v, want %d", tc.name, got, i+1)
		}
		d.rewrite(tc.new, good, 0o600)
	}
	// Nothing of those applied: the old burst of 8.
	admitted := 0
	for i := range 10 {
		if mintInstance(t, unix, uint32(i+1)).OK() {
			admitted++
		}
	}
	if admitted != 8 {
		t.Fatalf("%d of 10 mints admitted after the refused reloads, want the old burst 8", admitted)
	}
	// SIGHUP with a bad file: the same refusal, counted; then a good one.
	d.rewrite(good, "rate_limit_admission_burst = 0\n", 0o600)
	if err := syscall.Kill(d.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return sampleIn(t, d.scrape(), `registrar_config_reloads_total{result="failure"}`) == 5 })
	d.rewrite("rate_limit_admission_burst = 0\n", good, 0o600)
	if err := syscall.Kill(d.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return sampleIn(t, d.scrape(), "registrar_config_last_reload_successful") == 1 })
	if !strings.Contains(d.logs.String(), "registrar.rate_limit_admission_burst must be greater than 0") {
		t.Fatalf("the SIGHUP refusal is not logged with its key:\n%s", d.logs)
	}
}

// waitFor polls cond, without sleeping for a fixed time: each poll is a
// scrape round trip, bounded by e2eIODeadline overall.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(e2eIODeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within the deadline")
		}
		runtime.Gosched()
	}
}

// malformedOverUnix sends a request to an unknown path over the socket,
// which the daemon answers RequestMalformed and logs at debug level
// ("request malformed").
func (d *daemonProc) malformedOverUnix() {
	d.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}, Timeout: e2eIODeadline}
	defer hc.CloseIdleConnections()
	r, err := hc.Get("http://registrar/v1/nowhere")
	if err != nil {
		d.t.Fatal(err)
	}
	r.Body.Close()
}

// logCount counts the lines of the daemon's log that contain s.
func (d *daemonProc) logCount(s string) int { return strings.Count(d.logs.String(), s) }

const debugLine = `msg="request malformed"`

// TestEndToEndReloadChangesTheLogLevelWithoutRestarting: started at
// registrar.log_level info, the daemon writes no debug line; the file is
// rewritten with debug and SIGHUP sent: the debug line appears, from the
// same process. An invalid level is refused by registrar-otel reload,
// naming the key, and the debug level stays. The log is read through a
// pipe, so an absence is asserted only up to a later line the daemon
// wrote (the reload's own), never by waiting.
func TestEndToEndReloadChangesTheLogLevelWithoutRestarting(t *testing.T) {
	d := startDaemon(t, "log_level = \"info\"\n", "")
	pid := d.cmd.Process.Pid
	if !strings.Contains(d.ready, "log_level=info") {
		t.Fatalf("the serving line does not say the level: %s", d.ready)
	}
	d.malformedOverUnix()

	d.rewrite("log_level = \"info\"\n", "log_level = \"debug\"\n", 0o600)
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return d.logCount(`msg="configuration reloaded"`) == 1 })
	if n := d.logCount(debugLine); n != 0 {
		t.Fatalf("%d debug lines before the reload to debug, want 0:\n%s", n, d.logs)
	}
	if d.logCount(`registrar.log_level="info → debug"`) != 1 {
		t.Fatalf("the reload line does not list registrar.log_level info → debug:\n%s", d.logs)
	}
	d.malformedOverUnix()
	waitFor(t, func() bool { return d.logCount(debugLine) == 1 })

	// An invalid level: refused with the key named, the level kept.
	d.rewrite("log_level = \"debug\"\n", "log_level = \"verbose\"\n", 0o600)
	code, out, errOut := d.run("reload", "--socket", d.socket)
	if code != 2 || !strings.Contains(errOut, `registrar.log_level must be one of "debug", "info", "warn", "error", got "verbose"`) {
		t.Fatalf("reload with log_level \"verbose\": exit %d, want 2 naming registrar.log_level\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	d.malformedOverUnix()
	waitFor(t, func() bool { return d.logCount(debugLine) == 2 })

	if err := syscall.Kill(pid, 0); err != nil || d.logCount("registrar-otel serving") != 1 {
		t.Fatalf("the daemon (pid %d) restarted or exited: %v", pid, err)
	}
}

// TestEndToEndTheLogLevelFlagOutlivesTheKey: serve --log-level info over a
// file that says debug writes no debug line, and a reload of the file
// does not change that; the log says the key was not applied.
func TestEndToEndTheLogLevelFlagOutlivesTheKey(t *testing.T) {
	d := startDaemonWithFlags(t, "log_level = \"debug\"\n", "", "", "--log-level", "info")
	if !strings.Contains(d.ready, "log_level=info") {
		t.Fatalf("the serving line does not say the flag's level: %s", d.ready)
	}
	d.malformedOverUnix()
	d.rewrite("log_level = \"debug\"\n", "log_level = \"debug\"\nrate_limit_admission_burst = 64\n", 0o600)
	code, out, errOut := d.run("reload", "--socket", d.socket)
	if code != 0 || !strings.Contains(out, "registrar.rate_limit_admission_burst") || strings.Contains(out, "registrar.log_level") {
		t.Fatalf("reload: exit %d, want 0 changing the burst only\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	d.malformedOverUnix()
	// The reload's lines come before the second request's: read up to a
	// line written after both requests (a third reload's).
	waitFor(t, func() bool { return d.logCount("registrar.log_level not applied") == 1 })
	if code, _, errOut := d.run("reload", "--socket", d.socket); code != 0 {
		t.Fatalf("second reload: exit %d: %s", code, errOut)
	}
	waitFor(t, func() bool { return d.logCount(`msg="configuration reloaded"`) == 2 })
	if n := d.logCount(debugLine); n != 0 {
		t.Fatalf("%d debug lines with --log-level info, want 0:\n%s", n, d.logs)
	}
}
