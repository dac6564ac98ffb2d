package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/peertest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// startForeignServer runs the test binary as uid daemonUID, serving on
// socket as another user's server would (peertest).
func startForeignServer(t *testing.T, socket string) func(want int) []string {
	t.Helper()
	dir, _ := daemonUIDDir(t)
	self := filepath.Join(dir, "e2e.test")
	copyFile(t, os.Args[0], self, 0o755)
	return peertest.Start(t, self, socket, daemonUID)
}

// Issue 41, item 5: root's backup, told a socket where another user's
// server answers (in a shared sticky directory root owns, as /tmp),
// refuses it naming the server's uid, sends it nothing, and creates no
// --out; the real daemon, run by that uid and named by its configuration
// (whose state directory the uid owns), still gives its backup.
func TestEndToEndBackupRefusesAServerRunByAnotherUser(t *testing.T) {
	needRoot(t, "the servers run as another uid")
	shared := filepath.Join(shortTempDir(t), "shared")
	mkdir(t, shared, 0o1777)
	for _, d := range []string{filepath.Dir(shared), shared} {
		if err := os.Chmod(d, map[bool]os.FileMode{true: 0o1777, false: 0o755}[d == shared]); err != nil {
			t.Fatal(err)
		}
	}
	socket := filepath.Join(shared, "registrar.sock")
	requests := startForeignServer(t, socket)
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "registry.db")
	code, stdout, stderr := runCmd(t, exec.Command(bin, "backup", "--socket", socket, "--out", out))
	if code == exitOK || !strings.Contains(stderr, "uid "+strconv.Itoa(daemonUID)) || !strings.Contains(stderr, "nothing was sent") {
		t.Fatalf("backup from a server of uid %d in a directory root owns: exit %d\nstdout:\n%s\nstderr:\n%s\nwant a refusal naming the uid", daemonUID, code, stdout, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "*")); len(left) != 0 {
		t.Fatalf("the refused backup left %v", left)
	}

	// The real daemon as that uid, its files in a directory it owns.
	dir, own := daemonUIDDir(t)
	cfg := writeConfig(t, dir, serveDoc(dir, "", ""), 0o644)
	startLogged(t, "daemon", asDaemonUID(exec.Command(own, "serve", "--config", cfg)), "registrar-otel serving")
	code, stdout, stderr = runCmd(t, exec.Command(bin, "backup", "--config", cfg, "--out", out))
	if code != exitOK || !strings.Contains(stdout, "from the running daemon") {
		t.Fatalf("backup with the daemon's configuration: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Fatalf("the backup: %v, %v", fi, err)
	}
	// The foreign server was never sent a request: its first would come
	// before this health probe.
	wire.NewUnixClient(socket, wire.WithServerUIDs(daemonUID)).Health(context.Background())
	if got := requests(1); len(got) != 1 || got[0] != wire.PathHealth {
		t.Fatalf("the foreign server got %q, want only the trusting probe's health request", got)
	}
}

// Issue 41, item 5: root does not use the embedded default socket path,
// which is relative to the working directory (whoever controls the
// directory controls what answers there): every client command refuses it
// with exit 2 and a pointer to --config, before connecting.
func TestEndToEndRootRefusesTheRelativeDefaultSocket(t *testing.T) {
	needRoot(t, "the rule is root's")
	bin := buildBinary(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"backup", "--out", filepath.Join(dir, "b.db")},
		{"reload"},
		{"limits", "show"},
		{"limits", "reset", "--identity", "unix-peer:uid=0"},
		{"mint", "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"},
		{"deregister", "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"},
		{"load", "wave", "--hosts", "1", "--modules-per-host", "1"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		code, stdout, stderr := runCmd(t, cmd)
		if code != exitUsage || !strings.Contains(stderr, "--config FILE") || !strings.Contains(stderr, "relative") {
			t.Errorf("%s as root with the relative default socket: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 2 pointing at --config", args[0], code, stdout, stderr)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("the refused commands left %v", left)
	}
}

// unprivileged makes cmd run as uid daemonUID when the test runs as root
// (root refuses the relative default socket path; the messages for
// everyone else are what the caller tests), from a copy of the binary that
// uid may run, in dir, which it is made able to enter.
func unprivileged(t *testing.T, cmd *exec.Cmd, dir string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		return cmd
	}
	_, own := daemonUIDDir(t)
	cmd.Path, cmd.Args[0] = own, own
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
				t.Fatal(err)
			}
		}
	}
	return asDaemonUID(cmd)
}
