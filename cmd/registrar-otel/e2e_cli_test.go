package main

// End-to-end tests of the command surface against the real binary: the
// errors without a daemon, progress in a pipe, and an interrupted wave.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With no daemon, every client command names the socket it tried and how
// to start one or point elsewhere, exits 3, and shows no placeholder URL.
func TestNoDaemonErrorNamesTheSocketAndTheFix(t *testing.T) {
	bin := buildBinary(t)
	dir := shortTempDir(t)
	missing := filepath.Join(dir, "none.sock")
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	ident := []string{"--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{append([]string{"mint", "--socket", missing}, ident...), []string{"no daemon socket at " + missing, "'registrar-otel serve'", "--socket PATH"}},
		{append([]string{"deregister", "--socket", missing}, ident...), []string{"no daemon socket at " + missing, "'registrar-otel serve'", "--socket PATH"}},
		{append([]string{"mint", "--socket", stale}, ident...), []string{stale + " exists but refuses connections", "'registrar-otel serve'"}},
		{[]string{"load", "wave", "--socket", missing, "--hosts", "1", "--modules-per-host", "1"}, []string{"no daemon socket at " + missing, "'registrar-otel serve'"}},
		{[]string{"load", "flood", "--socket", missing, "--bucket", "admission", "--requests", "1"}, []string{"no daemon socket at " + missing, "'registrar-otel serve'"}},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Dir = dir
		code, out, errOut := runCmd(t, cmd)
		if code != exitTransport {
			t.Errorf("%v: exit %d, want exit %d", tc.args, code, exitTransport)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, errOut)
			}
		}
		if strings.Contains(errOut, "http://") || out != "" {
			t.Errorf("%v: stdout %q, stderr %q; want no placeholder URL and nothing on stdout", tc.args, out, errOut)
		}
	}
	// Without --socket the default (make run's) path is tried, relative to
	// the working directory, and named absolute, saying so.
	cmd := unprivileged(t, exec.Command(bin, append([]string{"mint"}, ident...)...), dir)
	cmd.Dir = dir
	msg, _ := cmd.CombinedOutput()
	want := "no daemon socket at " + filepath.Join(dir, "var/run/registrar.sock") + " (the default var/run/registrar.sock, relative to the working directory " + dir + ")"
	if cmd.ProcessState.ExitCode() != exitTransport || !strings.Contains(string(msg), want) {
		t.Errorf("default socket: exit %d, %s", cmd.ProcessState.ExitCode(), msg)
	}
}

var progressRE = regexp.MustCompile(`^progress: +[0-9.]+s  (\d+)/(\d+) done  admitted (\d+)  throttled (\d+)`)

// loadProc is a running `load wave` with stdout and stderr on pipes.
type loadProc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	lines  chan string // stderr, line by line
	exited chan struct{}
}

func startLoad(t *testing.T, d *daemonProc, args ...string) *loadProc {
	t.Helper()
	p := &loadProc{cmd: exec.Command(d.bin, args...), lines: make(chan string, 1024), exited: make(chan struct{})}
	p.cmd.Stdout = &p.stdout // a pipe to this process, not a terminal
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		io.Copy(io.Discard, stderr)
		close(p.lines)
		p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

// waitProgress reads stderr until a progress line shows admitted and
// throttled counts, and returns the lines read.
func (p *loadProc) waitProgress(t *testing.T, admitted, throttled string) []string {
	t.Helper()
	var seen []string
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("load ended before a progress line with admitted %s throttled %s; stderr:\n%s\nstdout:\n%s", admitted, throttled, strings.Join(seen, "\n"), p.stdout.String())
			}
			seen = append(seen, line)
			if m := progressRE.FindStringSubmatch(line); m != nil && m[3] == admitted && m[4] == throttled {
				return seen
			}
		case <-deadline:
			t.Fatalf("no progress line with admitted %s throttled %s within 60 s; stderr so far:\n%s", admitted, throttled, strings.Join(seen, "\n"))
		}
	}
}

// interrupt sends SIGINT and returns the exit status.
func (p *loadProc) interrupt(t *testing.T) int {
	t.Helper()
	return p.signal(t, syscall.SIGINT)
}

// signal sends sig, waits up to 60 s for the run to exit, and returns its
// exit status.
func (p *loadProc) signal(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	for range p.lines {
	}
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("load did not exit within 60 s of %s", sigName(sig))
	}
	return p.cmd.ProcessState.ExitCode()
}

// A wave in a pipe shows plain progress lines on stderr while it runs
// (stdout stays the JSON summary); SIGINT then ends it with exit 130, a
// summary saying "interrupted" with what completed, and counts that agree
// with what the daemon recorded.
func TestLoadWaveInAPipeShowsProgressAndSIGINTExits130(t *testing.T) {
	// 5 admission tokens and no refill within the test: a wave of 8 mints
	// at concurrency 2 admits 5, then both workers wait out retry_after.
	d := startDaemon(t, `rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, "")
	common := []string{"load", "wave", "--config", d.config, "--hosts", "2", "--modules-per-host", "4",
		"--concurrency", "2", "--progress-interval", "20ms", "--settle", "0"}

	p := startLoad(t, d, append(common, "--json")...)
	lines := p.waitProgress(t, "5", "2")
	select {
	case <-p.exited:
		t.Fatal("the wave ended before the test interrupted it")
	default: // still running: the progress came before the end
	}
	if code := p.interrupt(t); code != exitInterrupt {
		t.Fatalf("exit %d after SIGINT, want %d; stdout:\n%s", code, exitInterrupt, p.stdout.String())
	}
	var sum loadSummary
	if err := json.Unmarshal(p.stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary (progress leaked into it?): %v\n%s\nstderr: %s", err, p.stdout.String(), lines)
	}
	if !sum.Interrupted || sum.Signal != "SIGINT" || sum.Target != 8 || sum.Completed != 5 || sum.Admitted != 5 ||
		sum.Throttled != 2 || sum.Abandoned != 2 || sum.NotStarted != 1 {
		t.Fatalf("summary %+v; want interrupted by SIGINT, 5 of 8 completed, 2 throttled and abandoned, 1 not started", sum)
	}
	if sum.Daemon == nil || sum.Daemon.LimitedAdmission > sum.Throttled {
		t.Fatalf("daemon counters %+v (%s), want at most the %d throttles seen", sum.Daemon, sum.DaemonError, sum.Throttled)
	}

	// The text summary, the bucket now empty: every mint is throttled.
	p = startLoad(t, d, common...)
	p.waitProgress(t, "0", "2")
	if code := p.interrupt(t); code != exitInterrupt {
		t.Fatalf("text run: exit %d, want %d", code, exitInterrupt)
	}
	if want := "interrupted: by SIGINT after "; !strings.Contains(p.stdout.String(), want) ||
		!strings.Contains(p.stdout.String(), ": 0 of 8 mints completed, 2 abandoned while waiting to retry, 6 not started") {
		t.Fatalf("text summary lacks the interrupted line:\n%s", p.stdout.String())
	}

	// What the daemon recorded: an intent and an outcome per admitted mint,
	// and one counted admission per throttle the two runs saw.
	d.stop()
	code, rep := d.scan()
	if code != 0 || rep.Anomalies {
		t.Fatalf("audit scan: exit %d, %+v", code, rep)
	}
	if rep.Records.Intent != sum.Admitted || rep.Records.Outcome != sum.Admitted {
		t.Fatalf("daemon recorded %d intents and %d outcomes; the interrupted wave reported %d admitted", rep.Records.Intent, rep.Records.Outcome, sum.Admitted)
	}
	if got, want := rep.Limited["admission"].Count, sum.Throttled+2; got != want {
		t.Fatalf("daemon counted %d limited admissions; the runs reported %d throttles", got, want)
	}
}

// The real binary against a real daemon: a mint the admission bucket
// throttles exits 75 (RegistrarBusy), with the retry hint on stderr.
func TestEndToEndRegistrarBusyExits75(t *testing.T) {
	d := startDaemon(t, `rate_limit_admission_burst = 1
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, "")
	flags := []string{"mint", "--socket", d.socket, "--service-name", "review", "--host", "h1", "--instance", "1", "--component", "review"}
	if code, out, errOut := d.run(flags...); code != exitOK {
		t.Fatalf("first mint: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut := d.run(flags...)
	if code != 75 || !strings.Contains(errOut, "RegistrarBusy (retryable): retry after") {
		t.Fatalf("throttled mint: exit %d, stderr %q; want 75 and RegistrarBusy with its retry_after", code, errOut)
	}
	d.stop()
}

// A load run stopped by SIGTERM exits 143, its JSON summary saying it was
// interrupted by SIGTERM.
func TestEndToEndLoadStoppedBySIGTERMExits143(t *testing.T) {
	d := startDaemon(t, `rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, "")
	p := startLoad(t, d, "load", "wave", "--config", d.config, "--hosts", "2", "--modules-per-host", "4",
		"--concurrency", "2", "--progress-interval", "20ms", "--settle", "0", "--json")
	p.waitProgress(t, "5", "2") // both workers now wait out retry_after
	if code := p.signal(t, syscall.SIGTERM); code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143; stdout:\n%s", code, p.stdout.String())
	}
	var sum loadSummary
	if err := json.Unmarshal(p.stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, p.stdout.String())
	}
	if !sum.Interrupted || sum.Signal != "SIGTERM" || sum.Completed != 5 {
		t.Fatalf("summary %+v; want interrupted by SIGTERM after 5 completed", sum)
	}
	d.stop()
}
