package main

// End-to-end tests: they build the real binary, start `serve` on a
// temporary directory, talk to it over its unix socket (with the binary's
// own client subcommands and with the wire client), stop it with SIGTERM,
// and read what it left behind with `audit scan`.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"github.com/registrar-otel/registrar-otel/internal/testing/peertest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// binDir holds the binary built for the e2e tests; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	peertest.ServeIfAsked() // the test binary as another user's server (e2e_trust_test.go)
	// In-process config checks must not depend on who holds the default
	// metrics port on this machine; the binary probes for real.
	bindProbe = func(string) error { return nil }
	// Nor on whether this machine has the package's units installed: the
	// tests that read a unit give their own directories.
	unitDirs = nil
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary is the registrar-otel binary built once for every e2e test.
var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "registrar-otel-e2e-")
	if err != nil {
		return "", err
	}
	binDir = dir
	return goBuild(filepath.Join(dir, "registrar-otel"))
})

// goBuild builds this package's binary, race-enabled, as bin with the
// build flags given, and returns bin.
func goBuild(bin string, flags ...string) (string, error) {
	args := append(append([]string{"build", "-race"}, flags...), "-o", bin, ".")
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

func buildBinary(t *testing.T) string {
	t.Helper()
	return needBinary(t, binary)
}

// needBinary skips the test in -short mode, else returns the binary build
// makes (once), failing the test when it cannot be built.
func needBinary(t *testing.T, build func() (string, error)) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// daemonProc is a running `registrar-otel serve`.
type daemonProc struct {
	t          *testing.T
	bin, dir   string
	config     string
	socket     string
	auditDir   string
	metricsURL string
	ready      string // the "registrar-otel serving" log line
	*loggedProc
}

// syncBuffer is the shared test log destination.
type syncBuffer = logtest.Buffer

// loggedProc is a child process of a test (the daemon, a Collector)
// whose stdout and stderr lines are kept in logs and which is waited for in
// the background: exited receives Wait's result once.
type loggedProc struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan error
}

// startLogged starts cmd (its Stdout going to the logs) and returns once
// it writes a line containing ready to stderr, with that line. It fails
// the test if the process exits first or is not ready within 60 s. A
// cleanup kills the process if it is still running and waits for it, and
// when the test failed logs what it wrote; what names it in messages.
func startLogged(t *testing.T, what string, cmd *exec.Cmd, ready string) (*loggedProc, string) {
	t.Helper()
	p := &loggedProc{cmd: cmd, logs: &syncBuffer{}, exited: make(chan error, 1)}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyLine := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.logs, line)
			if strings.Contains(line, ready) {
				select {
				case readyLine <- line:
				default:
				}
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", what, p.logs.String())
		}
	})
	select {
	case line := <-readyLine:
		return p, line
	case err := <-p.exited:
		t.Fatalf("%s exited before it was ready: %v\n%s", what, err, p.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not ready within 60 s:\n%s", what, p.logs.String())
	}
	return nil, ""
}

// terminate sends SIGTERM and waits up to 60 s for a clean exit.
func (p *loggedProc) terminate(t *testing.T, what string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("%s exited with %v after SIGTERM:\n%s", what, err, p.logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60 s of SIGTERM:\n%s", what, p.logs.String())
	}
}

var metricsRE = regexp.MustCompile(`metrics=(http://[^ ]+/metrics)`)

// startDaemon writes a configuration (the [registrar] paths under a temp
// dir, plus extra TOML lines) and starts serve. It returns once the daemon
// logs that it is serving — read from its own log, not by waiting.
func startDaemon(t *testing.T, registrarExtra, telemetryExtra string) *daemonProc {
	t.Helper()
	return startDaemonWithState(t, registrarExtra, telemetryExtra, "")
}

// startDaemonWithState is startDaemon with the state directory seeded with
// stateDB as its registrar.db (a restore) when stateDB is not empty.
func startDaemonWithState(t *testing.T, registrarExtra, telemetryExtra, stateDB string) *daemonProc {
	t.Helper()
	return startDaemonWithFlags(t, registrarExtra, telemetryExtra, stateDB)
}

// startDaemonWithFlags is startDaemonWithState with serveFlags after
// "serve --config F".
func startDaemonWithFlags(t *testing.T, registrarExtra, telemetryExtra, stateDB string, serveFlags ...string) *daemonProc {
	t.Helper()
	d := prepareDaemon(t, registrarExtra, telemetryExtra, stateDB)
	d.serve(serveFlags...)
	return d
}

// prepareDaemon writes startDaemonWithState's configuration and state
// directory and does not start the daemon: serve starts it.
func prepareDaemon(t *testing.T, registrarExtra, telemetryExtra, stateDB string) *daemonProc {
	t.Helper()
	bin := buildBinary(t)
	dir := shortTempDir(t)
	d := &daemonProc{t: t, bin: bin, dir: dir}
	d.socket, _, d.auditDir = daemonPaths(dir)
	d.config = writeConfig(t, dir, serveDoc(dir, registrarExtra, `metrics_listen = "127.0.0.1:0"
`+telemetryExtra+`

[registrar.components.edge-proxy]
multiplicity = "one-per-host"
`), 0o600)
	if stateDB != "" {
		raw, err := os.ReadFile(stateDB)
		if err != nil {
			t.Fatal(err)
		}
		mkdir(t, filepath.Join(dir, "lib"), 0o700)
		writeFile(t, filepath.Join(dir, "lib", "registrar.db"), raw, 0o600)
	}
	return d
}

// serve starts the daemon prepareDaemon prepared, with serveFlags after
// "serve --config F", and waits until it serves.
func (d *daemonProc) serve(serveFlags ...string) {
	d.t.Helper()
	var line string
	d.loggedProc, line = startLogged(d.t, "daemon", exec.Command(d.bin, append([]string{"serve", "--config", d.config}, serveFlags...)...), "registrar-otel serving")
	d.ready = line
	if m := metricsRE.FindStringSubmatch(line); m != nil {
		d.metricsURL = m[1]
	}
}

// shortTempDir is a temporary directory with a short path (unix socket
// paths are limited to 107 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "reg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// listenLocal is a TCP listener on a free loopback port, closed when the
// test ends: a port in use, or one a test serves on.
func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// closedAddr is a loopback host:port nothing listens on right now.
func closedAddr(t *testing.T) string {
	t.Helper()
	l := listenLocal(t)
	defer l.Close()
	return l.Addr().String()
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l := listenLocal(t)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// daemonPaths are the socket, state directory and audit record directory
// of a test daemon whose files all lie under dir.
func daemonPaths(dir string) (socket, stateDir, auditDir string) {
	return filepath.Join(dir, "run", "r.sock"), filepath.Join(dir, "lib"), filepath.Join(dir, "audit")
}

// serveDoc is a configuration with every path under dir (daemonPaths),
// extra lines in [registrar], the review component, and rest in
// [telemetry] (then any further tables); the metrics listener is off
// unless rest sets it.
func serveDoc(dir, registrarExtra, rest string) string {
	socket, stateDir, auditDir := daemonPaths(dir)
	return serveDocAt(socket, stateDir, auditDir, registrarExtra, rest)
}

// serveDocAt is serveDoc with the three paths given.
func serveDocAt(socket, stateDir, auditDir, registrarExtra, rest string) string {
	if !strings.Contains(rest, "metrics_listen") {
		rest = "metrics_listen = \"\"\n" + rest
	}
	return fmt.Sprintf(`[registrar]
socket_path = %q
state_dir = %q
audit_record_dir = %q
%s
[registrar.components.review]
multiplicity = "many-per-host"

[telemetry]
%s`, socket, stateDir, auditDir, registrarExtra, rest)
}

// writeConfig writes doc to dir/registrar.toml at mode and returns its path.
func writeConfig(t *testing.T, dir, doc string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, "registrar.toml")
	writeFile(t, path, []byte(doc), mode)
	return path
}

// runCmd runs cmd and returns its exit status and output, failing the
// test when it could not be run at all.
func runCmd(t *testing.T, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	return code, out.String(), errOut.String()
}

// poll calls cond every 20 ms until it holds, and reports whether it did
// within the given time.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.After(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
	return true
}

// getBody is the body of a GET of u, failing the test on any error.
func getBody(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemonProc) stop() {
	d.t.Helper()
	d.terminate(d.t, "daemon")
}

// run runs the binary and returns its exit status and output.
func (d *daemonProc) run(args ...string) (int, string, string) {
	d.t.Helper()
	return runCmd(d.t, exec.Command(d.bin, args...))
}

// scanReport is the part of `audit scan --json` the tests read.
type scanReport struct {
	Anomalies            bool   `json:"anomalies"`
	IntentWithoutOutcome uint64 `json:"intent_without_outcome"`
	MalformedRecords     uint64 `json:"malformed_records"`
	Records              struct {
		Intent, Outcome, Limited uint64
	} `json:"records"`
	Limited map[string]struct {
		Records uint64 `json:"records"`
		Count   uint64 `json:"count"`
	} `json:"limited"`
}

func (d *daemonProc) scan() (int, scanReport) {
	d.t.Helper()
	code, out, errOut := d.run("audit", "scan", "--dir", d.auditDir, "--json")
	var rep scanReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		d.t.Fatalf("audit scan --json: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	return code, rep
}

func TestEndToEndMintDeregisterScan(t *testing.T) {
	d := startDaemon(t, "", "")
	flags := []string{"--socket", d.socket, "--service-name", "review", "--host", "h1", "--instance", "7", "--component", "review"}

	code, out, errOut := d.run(append([]string{"mint"}, flags...)...)
	if code != exitOK || !strings.HasPrefix(out, "first_mint h1-review-007") || !strings.Contains(out, "wrapped_secret_id:") {
		t.Fatalf("mint: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = d.run(append([]string{"mint", "--json"}, flags...)...)
	var mint struct {
		Outcome        string          `json:"outcome"`
		RegistrationID string          `json:"registration_id"`
		Health         json.RawMessage `json:"registrar_health"`
	}
	if err := json.Unmarshal([]byte(out), &mint); err != nil || code != exitOK || mint.Outcome != "idempotent_remint" || len(mint.Health) == 0 {
		t.Fatalf("remint --json: exit %d, %+v, %v\n%s", code, mint, err, out)
	}
	bad := []string{"mint", "--socket", d.socket, "--service-name", "Review", "--host", "h1", "--instance", "7", "--component", "review"}
	if code, _, errOut := d.run(bad...); code != exitPermanent || !strings.Contains(errOut, "ServiceLabelInvalid") {
		t.Fatalf("bad mint: exit %d, %s; want 1 and ServiceLabelInvalid", code, errOut)
	}
	if code, out, errOut := d.run(append([]string{"deregister"}, flags...)...); code != exitOK || !strings.HasPrefix(out, "removed h1-review-007") {
		t.Fatalf("deregister: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := d.run(append([]string{"deregister"}, flags...)...); code != exitOK || !strings.HasPrefix(out, "already_absent") {
		t.Fatalf("second deregister: exit %d\n%s", code, out)
	}
	d.stop()

	code, rep := d.scan()
	if code != 0 || rep.Anomalies || rep.IntentWithoutOutcome != 0 || rep.MalformedRecords != 0 {
		t.Fatalf("audit scan after a clean run: exit %d, %+v", code, rep)
	}
	if rep.Records.Intent != 5 || rep.Records.Outcome != 5 {
		t.Fatalf("records %+v, want 5 intents and 5 outcomes", rep.Records)
	}
	if !strings.Contains(d.logs.String(), "flushed coalescing windows") {
		t.Fatalf("no shutdown flush in the log:\n%s", d.logs.String())
	}
}

func TestSIGTERMDuringAFloodLeavesCountsOfEveryLimitedInvocation(t *testing.T) {
	// Small buckets that do not refill during the test, and a window far
	// longer than the test, so every counted record is written by the
	// shutdown flush.
	d := startDaemon(t, `rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_predecision_refusal_burst = 5
rate_limit_predecision_refusal_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, "")
	client := wire.NewUnixClient(d.socket)
	var (
		mu                     sync.Mutex
		refusals, busy, admits int
		answered               int
		signalled              bool
	)
	good := wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: "h1", Instance: 1, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60}
	malformed := good
	malformed.ServiceName = "Not-A-Label!"
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				req := good
				if (w+i)%2 == 0 {
					req = malformed
				}
				resp, err := client.Mint(context.Background(), req)
				if err != nil {
					return // the daemon has stopped listening
				}
				mu.Lock()
				answered++
				switch {
				case resp.OK():
					admits++
				case resp.ErrorID == wire.RegistrarBusy:
					busy++
				case resp.ErrorID == wire.ServiceLabelInvalid:
					refusals++
				default:
					t.Errorf("unexpected answer %s", resp.ErrorID)
				}
				if answered == 400 && !signalled {
					signalled = true
					d.cmd.Process.Signal(syscall.SIGTERM)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("daemon exit: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not exit")
	}
	if refusals <= 5 || busy == 0 {
		t.Fatalf("flood answered %d refusals and %d busy before shutdown; want both buckets limited", refusals, busy)
	}
	code, rep := d.scan()
	if code != 0 || rep.Anomalies {
		t.Fatalf("audit scan: exit %d, %+v", code, rep)
	}
	// The first 5 refusals were recorded in full; every later one was
	// limited. Every busy answer was a limited admission.
	if got, want := rep.Limited["predecision_refusal"].Count, uint64(refusals-5); got != want {
		t.Fatalf("counted predecision_refusal %d, want %d (refusals %d − burst 5)", got, want, refusals)
	}
	if got, want := rep.Limited["admission"].Count, uint64(busy); got != want {
		t.Fatalf("counted admission %d, want the %d RegistrarBusy answers the client saw", got, want)
	}
	if rep.Limited["admission"].Records != 1 || rep.Limited["predecision_refusal"].Records != 1 {
		t.Fatalf("counted records %+v, want one per bucket (one window per key)", rep.Limited)
	}
}
