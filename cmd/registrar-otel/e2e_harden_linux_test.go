package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// daemonUID is the unprivileged uid the hardening tests run the daemon and
// its attacker as (nobody).
const daemonUID = 65534

func asDaemonUID(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: daemonUID, Gid: daemonUID}}
	return cmd
}

// startDaemonAs starts serve as uid 65534 with environ added to its
// environment, every path under a directory that uid owns, and the binary
// copied there (the e2e binary's own directory is root's 0700).
func startDaemonAs(t *testing.T, environ ...string) (*loggedProc, string) {
	t.Helper()
	needRoot(t, "running the daemon as another uid")
	dir, own := daemonUIDDir(t)
	cfg := writeConfig(t, dir, serveDoc(dir, "", `metrics_listen = "127.0.0.1:0"`+"\n"), 0o644) // root's, readable: accepted
	cmd := asDaemonUID(exec.Command(own, "serve", "--config", cfg))
	cmd.Env = append(os.Environ(), environ...)
	p, _ := startLogged(t, "daemon", cmd, "registrar-otel serving")
	return p, dir
}

// daemonUIDDir is a short temporary directory owned by the daemon uid,
// with the e2e binary copied in as own.
func daemonUIDDir(t *testing.T) (dir, own string) {
	t.Helper()
	bin := buildBinary(t)
	dir = shortTempDir(t)
	if err := os.Chown(dir, daemonUID, daemonUID); err != nil {
		t.Fatal(err)
	}
	own = filepath.Join(dir, "registrar-otel")
	copyFile(t, bin, own, 0o755)
	return dir, own
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// The attack of issue 27, item 1: a process of the daemon's own uid read
// BAO_TOKEN out of /proc/PID/environ and two copies of the token out of
// /proc/PID/mem. Serving, the daemon is not dumpable: both are refused to
// that uid, and its core size limit is 0.
func TestTheServingProcessIsUnreadableByItsOwnUID(t *testing.T) {
	const marker = "hvs.issue27-marker-token"
	p, _ := startDaemonAs(t, "BAO_TOKEN="+marker)
	pid := strconv.Itoa(p.cmd.Process.Pid)

	for _, f := range []string{"environ", "mem"} {
		path := "/proc/" + pid + "/" + f
		// The attacker: a shell of the daemon's uid opening the file.
		var out bytes.Buffer
		cmd := asDaemonUID(exec.Command("/bin/sh", "-c", `exec 3<"$1" && cat <&3 | tr '\0' '\n' | grep -c BAO_TOKEN`, "sh", path))
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err == nil || !strings.Contains(out.String(), "Permission denied") {
			t.Errorf("uid %d opening %s: %v, output %q; want permission denied", daemonUID, path, err, out.String())
		}
		if strings.Contains(out.String(), marker) {
			t.Errorf("uid %d read the token out of %s", daemonUID, path)
		}
	}
	limits, err := os.ReadFile("/proc/" + pid + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	var core string
	for line := range strings.SplitSeq(string(limits), "\n") {
		if strings.HasPrefix(line, "Max core file size") {
			core = strings.Join(strings.Fields(line), " ")
		}
	}
	if core != "Max core file size 0 0 bytes" {
		t.Errorf("core limit %q, want 0 soft and hard", core)
	}
	p.terminate(t, "daemon")
}

// The attack of issue 27, item 6: a FIFO as the configuration file hung
// `config check` and `serve` forever. Both now refuse it at once, naming
// the path, with status 2.
func TestAFIFOConfigurationIsRefusedAtOnce(t *testing.T) {
	bin := buildBinary(t)
	fifo := filepath.Join(t.TempDir(), "registrar.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // release a reader stuck on it when the test fails
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	for _, args := range [][]string{{"config", "check", "--config", fifo}, {"serve", "--config", fifo}} {
		// Bounded by the start-up of a race-built binary on a loaded
		// machine; the FIFO itself is refused without blocking.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stderr = &errOut
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%v: still running after 20 s (blocked on the FIFO)", args)
		}
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(errOut.String(), fifo+": cannot read configuration file: is a named pipe (FIFO), not a regular file") {
			t.Errorf("%v: %v, stderr %q; want status 2 naming the FIFO", args, err, errOut.String())
		}
	}
}

// The attack of issue 27, item 3: with audit_record_dir owned by another
// uid at mode 0755, serve started, and that uid deleted a generation and
// forged one. serve now refuses to start, naming the directory and owner;
// and so for a directory under another uid's directory.
func TestServeRefusesAForeignOwnedAuditDirectoryAtStart(t *testing.T) {
	needRoot(t, "chown to another uid")
	bin := buildBinary(t)
	for _, c := range []struct {
		name  string
		setup func(dir string) (auditDir string)
		want  string
	}{
		{"owned by another uid", func(dir string) string {
			return mkdirOwned(t, filepath.Join(dir, "audit"), 0o755, 4242)
		}, "is owned by uid 4242, not by this user (0) or root"},
		{"under another uid's directory", func(dir string) string {
			theirs := mkdirOwned(t, filepath.Join(dir, "theirs"), 0o755, 4242)
			a := filepath.Join(theirs, "audit")
			mkdir(t, a, 0o700)
			return a
		}, ", which is owned by uid 4242, not by this user (0) or root"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := shortTempDir(t)
			auditDir := c.setup(dir)
			socket, stateDir, _ := daemonPaths(dir)
			cfg := writeConfig(t, dir, serveDocAt(socket, stateDir, auditDir, "", ""), 0o600)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var errOut bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg)
			cmd.Stderr = &errOut
			err := cmd.Run()
			if _, ok := err.(*exec.ExitError); !ok || ctx.Err() != nil {
				t.Fatalf("serve with %s: %v, want it to refuse to start\n%s", auditDir, err, errOut.String())
			}
			if !strings.Contains(errOut.String(), auditDir) || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("stderr %q, want it to name %s and %q", errOut.String(), auditDir, c.want)
			}
		})
	}
}

// The attack of issue 27, item 3, at runtime: `chmod 0777` of the audit
// directory while serving let appends continue without a warning. Now the
// next mint's append fails closed (an append failure, which the audit
// alerts count), the tick logs an ERROR naming the directory, and once the
// mode is put right mints are recorded again.
func TestAnAuditDirectoryLoosenedWhileServingFailsAppendsClosed(t *testing.T) {
	d := startDaemon(t, "maintenance_interval_ms = 100\n", "")
	unixCaller := wire.NewUnixClient(d.socket, wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
	mintOK(t, unixCaller)
	chmod(t, d.auditDir, 0o777)
	req := reviewMint("h2", 1)
	res, err := unixCaller.Mint(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() {
		t.Fatalf("a mint with the audit directory at 0777 was answered OK: its records went to a directory anyone can change")
	}
	// The tick's ERROR line, read from the daemon's own log (bounded: the
	// tick runs every 100 ms).
	const line = "audit record directory is no longer private"
	if !poll(30*time.Second, func() bool { return strings.Contains(d.logs.String(), line) }) {
		t.Fatalf("no %q line within 30 s of the chmod", line)
	}
	if !strings.Contains(d.logs.String(), "level=ERROR") {
		t.Errorf("the line is not at ERROR")
	}
	chmod(t, d.auditDir, 0o700)
	req.Host = "h3"
	if res, err := unixCaller.Mint(context.Background(), req); err != nil || !res.OK() {
		t.Fatalf("a mint after the mode was put right: %+v, %v; want it recorded again", res, err)
	}
	d.stop()
}
