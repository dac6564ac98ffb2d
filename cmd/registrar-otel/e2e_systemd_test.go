package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// fakeSystemd plays the parts of systemd serve talks to: the NOTIFY_SOCKET
// datagram socket it reports to, and the listening unix socket it hands
// over as fd 3 (LISTEN_FDS=1, LISTEN_PID set to the child's pid by the
// shell that execs it).
type fakeSystemd struct {
	t        *testing.T
	dir      string
	socket   string // the handed-over socket's path (registrar.socket_path)
	listener *net.UnixListener
	file     *os.File // the listener's descriptor, handed to each start
	notify   *net.UnixConn
	states   chan note
}

// note is one sd_notify datagram and when it arrived.
type note struct {
	state string
	at    time.Time
}

// newFakeSystemd binds the socket as a socket unit would: directory 0750
// and socket 0660, both in group gid.
func newFakeSystemd(t *testing.T, gid int) *fakeSystemd {
	t.Helper()
	dir := shortTempDir(t)
	chmod(t, dir, 0o755) // the callers traverse it
	run := filepath.Join(dir, "run")
	mkdirMode(t, run, 0o750)
	if err := os.Chown(run, 0, gid); err != nil {
		t.Fatal(err)
	}
	fs := &fakeSystemd{t: t, dir: dir, socket: filepath.Join(run, "r.sock"), states: make(chan note, 4096)}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: fs.socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	fs.listener = l
	t.Cleanup(func() { l.Close() })
	if err := os.Chown(fs.socket, 0, gid); err != nil {
		t.Fatal(err)
	}
	chmod(t, fs.socket, 0o660)
	if fs.file, err = l.File(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.file.Close() })
	notifyPath := filepath.Join(dir, "notify")
	fs.notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.notify.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := fs.notify.Read(buf)
			if err != nil {
				return
			}
			for line := range strings.SplitSeq(string(buf[:n]), "\n") {
				if line != "" {
					fs.states <- note{line, time.Now()}
				}
			}
		}
	}()
	return fs
}

// config writes a configuration for the handed-over socket.
func (fs *fakeSystemd) config(extra string) string {
	fs.t.Helper()
	path := filepath.Join(fs.dir, "registrar.toml")
	doc := fmt.Sprintf(`[registrar]
socket_path = %q
state_dir = %q
audit_record_dir = %q
maintenance_interval_ms = 200
%s
[registrar.components.review]
multiplicity = "many-per-host"

[telemetry]
metrics_listen = "127.0.0.1:0"
`, fs.socket, filepath.Join(fs.dir, "lib"), fs.auditDir(), extra)
	writeFile(fs.t, path, []byte(doc), 0o600)
	return path
}

func (fs *fakeSystemd) auditDir() string { return filepath.Join(fs.dir, "audit") }

// start starts serve as a socket-activated, notify-type service would be,
// with env added to the environment.
func (fs *fakeSystemd) start(bin, cfg string, watchdog time.Duration, env ...string) *loggedProc {
	fs.t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "LISTEN_FDNAMES=registrar-otel.socket",
		"NOTIFY_SOCKET="+fs.notify.LocalAddr().String(),
		"WATCHDOG_USEC="+strconv.FormatInt(watchdog.Microseconds(), 10))
	cmd.Env = append(cmd.Env, env...)
	cmd.ExtraFiles = []*os.File{fs.file}
	p, _ := startLogged(fs.t, "daemon", cmd, "registrar-otel serving")
	return p
}

// next returns the next datagram that starts with prefix, failing the
// test after 60 s; skipped datagrams are returned too, in order.
func (fs *fakeSystemd) next(prefix string) (note, []note) {
	fs.t.Helper()
	var skipped []note
	timeout := time.After(60 * time.Second)
	for {
		select {
		case n := <-fs.states:
			if strings.HasPrefix(n.state, prefix) {
				return n, skipped
			}
			skipped = append(skipped, n)
		case <-timeout:
			fs.t.Fatalf("no %s datagram within 60 s (got %v)", prefix, skipped)
		}
	}
}

// pingsAtTheTick reads n WATCHDOG=1 datagrams and fails the test if they
// came faster than the maintenance tick can send them. The tick's ticker
// keeps at most one tick pending, so a late pass may be followed at once
// by the next: single gaps say nothing under load, but n pings span more
// than n-3 ticks. The bound asked here, three quarters of that, leaves
// room for the receiver's own delays; two pings per pass would miss it.
// It returns the last ping.
func (fs *fakeSystemd) pingsAtTheTick(n int, tick time.Duration) note {
	fs.t.Helper()
	first, _ := fs.next("WATCHDOG=1")
	last := first
	for range n - 1 {
		last, _ = fs.next("WATCHDOG=1")
	}
	if span, min := last.at.Sub(first.at), time.Duration(n-3)*tick*3/4; span < min {
		fs.t.Errorf("%d WATCHDOG=1 in %s, want them at the tick's cadence (%s): at least %s", n, span, tick, min)
	}
	return last
}

// unusedIDs returns n ids from 61000 up that name no user and no group.
func unusedIDs(t *testing.T, n int) []int {
	t.Helper()
	var ids []int
	for id := 61000; len(ids) < n && id < 62000; id++ {
		s := strconv.Itoa(id)
		if _, err := user.LookupId(s); err == nil {
			continue
		}
		if _, err := user.LookupGroupId(s); err == nil {
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) < n {
		t.Skip("no unused uids in 61000-61999")
	}
	return ids
}

func TestServePlaysItsPartUnderSystemd(t *testing.T) {
	bin := buildBinary(t)
	needRoot(t, "the callers run as two other uids")
	ids := unusedIDs(t, 3)
	gid, uidA, uidB := ids[0], ids[1], ids[2]
	fs := newFakeSystemd(t, gid)
	// The socket group's members are callers: a policy admits them (the
	// package's own configuration does the same).
	cfg := fs.config("rate_limit_predecision_refusal_burst = 2\n\n[registrar.callers.members]\nidentity_prefixes = [\"unix-peer:\"]\n")

	// A caller queued on the socket before the daemon starts.
	early := make(chan error, 1)
	go func() {
		c := wire.NewUnixClient(fs.socket, wire.WithTimeout(60*time.Second))
		_, err := c.Health(context.Background())
		early <- err
	}()

	const tick = 200 * time.Millisecond
	d := fs.start(bin, cfg, time.Hour) // a timer at WATCHDOG_USEC/2 would ping every 30 min
	_, before := fs.next("READY=1")
	for _, n := range before {
		if n.state == "WATCHDOG=1" {
			t.Fatalf("WATCHDOG=1 before READY=1: %v", before)
		}
	}
	c := wire.NewUnixClient(fs.socket, wire.WithTimeout(10*time.Second))
	if resp, err := c.Health(context.Background()); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health right after READY=1: %+v, %v", resp, err)
	}
	if err := <-early; err != nil {
		t.Fatalf("the caller queued before the start got no answer: %v", err)
	}

	// The watchdog at the tick's cadence (a timer at WATCHDOG_USEC/2
	// would send none within the test's bounds).
	fs.pingsAtTheTick(12, tick)

	// The handed-over socket keeps its mode and group.
	fi, err := os.Stat(fs.socket)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || int(st.Gid) != gid {
		t.Fatalf("socket mode %v group %d after the daemon took it, want 0660 and %d", fi.Mode().Perm(), st.Gid, gid)
	}

	// Two uids of the group, two identities.
	chmod(t, filepath.Dir(bin), 0o755) // the callers exec the binary
	for i, uid := range []int{uidA, uidB} {
		cmd := exec.Command(bin, "mint", "--socket", fs.socket, "--service-name", "review", "--host", "h1",
			"--instance", strconv.Itoa(i+1), "--component", "review")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = "/"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mint as uid %d: %v\n%s", uid, err, out)
		}
	}
	// Limited calls, for a window the shutdown flushes.
	for range 5 {
		c.Mint(context.Background(), wire.MintRequest{ProtocolVersion: 1, ServiceName: "BAD", Host: "h1", Instance: 1,
			Component: "review", Spec: wire.Spec{Component: "review", ServiceName: "BAD"}, WrapTTL: 60})
	}

	d.cmd.Process.Signal(syscall.SIGTERM)
	_, skipped := fs.next("STOPPING=1")
	for _, n := range skipped {
		if strings.HasPrefix(n.state, "STATUS=stopping: flushing") {
			t.Fatalf("the flush was announced before STOPPING=1: %v", skipped)
		}
	}
	flushing, _ := fs.next("STATUS=stopping: flushing")
	if !strings.Contains(flushing.state, "flushing 1 coalescing windows") {
		t.Errorf("%q, want the one open window", flushing.state)
	}
	if err := <-d.exited; err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: fs.auditDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Limited[0].Count != 3 {
		t.Errorf("limited count after the flush: %d, want 3", rep.Limited[0].Count)
	}
	active, err := os.ReadFile(filepath.Join(fs.auditDir(), audit.ActiveFileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []int{uidA, uidB} {
		if id := server.UnixIdentity(uint32(uid)); !bytes.Contains(active, []byte(`"caller_identity":"`+id+`"`)) {
			t.Errorf("no record of %s:\n%s", id, active)
		}
	}
}

func TestCallersQueueThroughASocketActivatedRestart(t *testing.T) {
	bin := buildBinary(t)
	fs := newFakeSystemd(t, os.Getegid())
	cfg := fs.config("rate_limit_admission_burst = 1000000\nrate_limit_admission_refill_interval_ms = 1")

	const callers = 32
	var (
		answers  [callers]atomic.Int64
		failures = make(chan error, callers)
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	d := fs.start(bin, cfg, 0)
	fs.next("READY=1")
	for i := range callers {
		wg.Go(func() {
			c := wire.NewUnixClient(fs.socket, wire.WithoutKeepAlive(), wire.WithTimeout(2*time.Minute))
			for j := 0; !stop.Load(); j++ {
				req := wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: fmt.Sprintf("c%02d", i),
					Instance: uint32(j%999 + 1), Component: "review", Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60}
				resp, err := c.Mint(context.Background(), req)
				if err == nil && !resp.OK() {
					err = fmt.Errorf("HTTP %d %s", resp.StatusCode, resp.ErrorID)
				}
				if err != nil {
					failures <- fmt.Errorf("caller %d, call %d: %w", i, j, err)
					return
				}
				answers[i].Add(1)
			}
		})
	}
	total := func() (n int64) {
		for i := range answers {
			n += answers[i].Load()
		}
		return n
	}
	// waitAnswers waits until every caller has n more answers than in
	// from (bounded), or a caller failed.
	waitAnswers := func(what string, from []int64, n int64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for i := range answers {
			for answers[i].Load() < from[i]+n {
				select {
				case err := <-failures:
					t.Fatalf("%s: %v", what, err)
				case <-time.After(5 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: caller %d has %d answers, want %d", what, i, answers[i].Load(), from[i]+n)
				}
			}
		}
	}
	snapshot := func() []int64 {
		s := make([]int64, callers)
		for i := range answers {
			s[i] = answers[i].Load()
		}
		return s
	}
	waitAnswers("before the restart", make([]int64, callers), 5)

	// The restart: SIGTERM, then the same listener to a new process.
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-d.exited; err != nil {
		t.Fatalf("the first serve after SIGTERM: %v", err)
	}
	atGap := total()
	d2 := fs.start(bin, cfg, 0)
	fs.next("READY=1")
	waitAnswers("after the restart", snapshot(), 5)
	stop.Store(true)
	wg.Wait()
	close(failures)
	for err := range failures {
		var op *net.OpError
		if errors.As(err, &op) && errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("connection refused through the restart: %v", err)
		} else {
			t.Errorf("no answer: %v", err)
		}
	}
	d2.terminate(t, "the second serve")

	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: fs.auditDir()})
	if err != nil {
		t.Fatal(err)
	}
	n := total()
	t.Logf("%d callers: %d answers, %d of them before the restart's SIGTERM took effect; audit: %d intents, %d outcomes",
		callers, n, atGap, rep.Records[0], rep.Records[1])
	// Every call mints an instance of its own (while no caller passes 999
	// calls), so an idempotent_remint is a call the daemon carried out
	// twice: its first answer was lost, and wire.Client sent it again.
	remints, maxCalls := remintOutcomes(t, fs.auditDir()), int64(0)
	for i := range answers {
		maxCalls = max(maxCalls, answers[i].Load())
	}
	if maxCalls <= 999 && remints > 0 {
		t.Errorf("%d idempotent_remint outcomes: answers lost after their records were written, and the client's resend made a second invocation each", remints)
	}
	if rep.Anomalies() || uint64(n) != rep.Records[0] || uint64(n) != rep.Records[1] {
		t.Fatalf("%d answers, audit records %v (anomalies %v): want one intent and one outcome per answer", n, rep.Records, rep.Anomalies())
	}
}

// remintOutcomes counts the idempotent_remint outcome records in the audit
// store's files.
func remintOutcomes(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			r, err := audit.Unmarshal(line)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if r.Phase == audit.PhaseOutcome && r.Outcome.Class == vocab.ClassIdempotentRemint {
				n++
			}
		}
	}
	return n
}

// faultsBinary is the registrar-otel binary built once with the fault
// seams (-tags registrar_faults, daemon/fault_on.go), beside binary()'s in
// binDir so TestMain removes it.
var faultsBinary = sync.OnceValues(func() (string, error) {
	plain, err := binary()
	if err != nil {
		return "", err
	}
	return goBuild(filepath.Join(filepath.Dir(plain), "registrar-otel-faults"), "-tags", "registrar_faults")
})

func buildFaultsBinary(t *testing.T) string {
	t.Helper()
	return needBinary(t, faultsBinary)
}

// stalledFor parses the fault build's "STATUS=fault: tick stalled for Nms".
func stalledFor(state string) (time.Duration, bool) {
	ms, ok := strings.CutPrefix(state, "STATUS=fault: tick stalled for ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(ms, "ms"))
	if err != nil {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// TestWatchdogPingsStopWhileTheTickStalls plays systemd with a small
// WatchdogSec against the real binary (its test build): WATCHDOG=1 comes at
// the tick's cadence, stops for as long as the tick is stalled (at least
// three watchdog intervals, long enough for systemd to act), and resumes
// with the tick. The stall is the fault seam REGISTRAR_FAULT_TICK_STALL: a
// file whose existence blocks the maintenance pass, which reports on the
// notify socket when the stall begins and how long it has lasted.
func TestWatchdogPingsStopWhileTheTickStalls(t *testing.T) {
	bin := buildFaultsBinary(t)
	fs := newFakeSystemd(t, os.Getegid())
	cfg := fs.config("")
	stall := filepath.Join(fs.dir, "stall-the-tick")

	const (
		tick     = 200 * time.Millisecond // the config's maintenance_interval_ms
		watchdog = time.Second            // WATCHDOG_USEC: a timer would ping every 500 ms
	)
	d := fs.start(bin, cfg, watchdog, "REGISTRAR_FAULT_TICK_STALL="+stall)
	fs.next("READY=1")
	fs.pingsAtTheTick(12, tick) // at the tick's cadence

	// Stall the tick. A ping of the pass before the stall may still
	// arrive before the stall's announcement; none may after it.
	writeFile(t, stall, nil, 0o600)
	began, _ := fs.next("STATUS=fault: tick stalled")
	for {
		n, _ := fs.next("")
		if n.state == "WATCHDOG=1" {
			t.Fatalf("WATCHDOG=1 %s into the tick's stall: the watchdog is not fed by the tick", n.at.Sub(began.at))
		}
		if lasted, ok := stalledFor(n.state); ok && lasted >= 3*watchdog && n.at.Sub(began.at) >= 3*watchdog {
			t.Logf("no WATCHDOG=1 for %s of stall (the daemon counts %s; watchdog %s)", n.at.Sub(began.at), lasted, watchdog)
			break
		}
	}

	// Release it: the pings resume, at the tick's cadence.
	if err := os.Remove(stall); err != nil {
		t.Fatal(err)
	}
	_, skipped := fs.next("WATCHDOG=1")
	seen := false
	for _, n := range skipped {
		seen = seen || strings.HasPrefix(n.state, "STATUS=fault: tick resumed after ")
	}
	if !seen {
		t.Errorf("WATCHDOG=1 resumed without the stall's end being announced first: %v", skipped)
	}
	fs.pingsAtTheTick(12, tick)
	d.terminate(t, "serve")
}

// Issue 37, finding 4: a start that fails under socket activation closes
// the connections already waiting on the handed-over socket before it
// exits 2. Left queued, each one made systemd start the service again at
// once, until its start limit failed the socket unit and every later
// caller was refused. Both failures are seen: a configuration that does
// not load (before the daemon takes the socket) and a setup error after
// it did (an audit directory others may write).
func TestAFailedStartClosesTheCallersWaitingOnTheSocket(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name  string
		setup func(fs *fakeSystemd) string
		says  string
	}{
		{"a configuration that does not load", func(fs *fakeSystemd) string {
			cfg := fs.config("")
			writeFile(t, cfg, []byte(strings.Replace(string(mustRead(t, cfg)), `"many-per-host"`, `"bogus"`, 1)), 0o600)
			return cfg
		}, "registrar.components.review.multiplicity"},
		{"a setup error after the socket was taken", func(fs *fakeSystemd) string {
			cfg := fs.config("")
			mkdirMode(t, fs.auditDir(), 0o777)
			chmod(t, fs.auditDir(), 0o777)
			return cfg
		}, "registrar.audit_record_dir"},
		{"a setup error after the daemon took the socket", func(fs *fakeSystemd) string {
			// A certificate that does not parse fails the TLS listener,
			// opened after the unix listener is taken over.
			for _, f := range []string{"cert.pem", "key.pem", "ca.pem"} {
				writeFile(t, filepath.Join(fs.dir, f), []byte("not PEM\n"), 0o600)
			}
			return fs.config(fmt.Sprintf("tls_listen = \"127.0.0.1:0\"\ntls_cert_file = %q\ntls_key_file = %q\ntls_client_ca_file = %q\n",
				filepath.Join(fs.dir, "cert.pem"), filepath.Join(fs.dir, "key.pem"), filepath.Join(fs.dir, "ca.pem")))
		}, "TLS listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeSystemd(t, 0)
			cfg := tc.setup(fs)
			// Two callers queued before the start, as on a socket unit.
			var waiting []net.Conn
			for range 2 {
				c, err := net.Dial("unix", fs.socket)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				waiting = append(waiting, c)
			}
			cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, "serve", "--config", cfg)
			cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "LISTEN_FDNAMES=registrar-otel.socket")
			cmd.ExtraFiles = []*os.File{fs.file}
			code, _, stderr := runCmd(t, cmd)
			if code != exitUsage || !strings.Contains(stderr, tc.says) {
				t.Fatalf("serve: exit %d, want %d naming %s\n%s", code, exitUsage, tc.says, stderr)
			}
			for i, c := range waiting {
				c.SetReadDeadline(time.Now().Add(e2eIODeadline))
				if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
					t.Errorf("waiting caller %d: read %d bytes, %v; want its connection closed (EOF)", i, n, err)
				}
			}
			// Nothing left queued for systemd to start the service again for.
			fs.listener.SetDeadline(time.Now().Add(200 * time.Millisecond))
			if c, err := fs.listener.Accept(); err == nil {
				c.Close()
				t.Error("a connection is still queued on the socket after the failed start")
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
