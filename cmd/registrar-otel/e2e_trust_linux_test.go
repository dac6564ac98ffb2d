package main

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

// inUserNamespace makes cmd run as root of a new user namespace that maps
// only uid (on the host, the command runs as uid).
func inUserNamespace(cmd *exec.Cmd, uid int) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		// Root inside the namespace: on the host, the mapped uid.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
	}
	return cmd
}

// Issue 41, item 5, inside a user namespace: there the kernel reports every
// unmapped uid as the overflow uid, the server's and the directories'
// owners' alike. A backup run in a user namespace that maps one other uid,
// told a socket in a shared sticky directory (as /tmp) where another
// user's server answers, cannot tell it from the daemon: it refuses it
// (exit 3, saying why), sends nothing and creates no --out. Told the real
// daemon's socket, in a directory only the daemon writes, it is not
// refused by the trust check (the daemon then answers as it answers any
// caller that is not an operator).
func TestEndToEndBackupFromAUserNamespaceRefusesAnUnmappedServerInASharedDirectory(t *testing.T) {
	needRoot(t, "the client runs in a user namespace root makes")
	mapped := 0
	for id := 61100; id < 62000; id++ {
		if _, err := user.LookupId(strconv.Itoa(id)); err != nil {
			mapped = id
			break
		}
	}
	if mapped == 0 {
		t.Skip("no unused uid in 61100-61999")
	}
	// The foreign server, in a shared sticky directory root owns.
	shared := filepath.Join(shortTempDir(t), "shared")
	mkdir(t, shared, 0o1777)
	for _, d := range []string{filepath.Dir(shared), shared} {
		if err := os.Chmod(d, map[bool]os.FileMode{true: 0o1777, false: 0o755}[d == shared]); err != nil {
			t.Fatal(err)
		}
	}
	foreign := filepath.Join(shared, "registrar.sock")
	requests := startForeignServer(t, foreign)
	chmod(t, foreign, 0o666) // anyone may connect: the attack is who answers

	// The real daemon, as its uid, its socket in a directory it alone
	// writes; as a socket group would let it, the namespace's uid may
	// connect.
	dir, own := daemonUIDDir(t)
	cfg := writeConfig(t, dir, serveDoc(dir, "", ""), 0o644)
	startLogged(t, "daemon", asDaemonUID(exec.Command(own, "serve", "--config", cfg)), "registrar-otel serving")
	chmod(t, filepath.Join(dir, "run"), 0o755)
	chmod(t, filepath.Join(dir, "run", "r.sock"), 0o666)
	outDir := filepath.Join(shortTempDir(t), "out")
	mkdir(t, outDir, 0o777)
	// The namespace's uid may run the binary and write its --out.
	for _, leaf := range []string{dir, outDir} {
		for d := leaf; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	chmod(t, outDir, 0o777) // past the umask
	out := filepath.Join(outDir, "registry.db")

	code, stdout, stderr := runCmd(t, inUserNamespace(exec.Command(own, "backup", "--socket", foreign, "--out", out), mapped))
	if code != 3 || !strings.Contains(stderr, "not mapped into this user namespace") || !strings.Contains(stderr, "nothing was sent") {
		t.Fatalf("backup from a user namespace, a server in a shared directory: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 3, a refusal saying the server's uid is unmapped", code, stdout, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(outDir, "*")); len(left) != 0 {
		t.Fatalf("the refused backup left %v", left)
	}
	// Nothing reached the foreign server: its first request would come
	// before this trusting probe's.
	wire.NewUnixClient(foreign, wire.WithServerUIDs(daemonUID)).Health(context.Background())
	if got := requests(1); len(got) != 1 || got[0] != wire.PathHealth {
		t.Fatalf("the foreign server got %q, want only the trusting probe's health request", got)
	}

	code, stdout, stderr = runCmd(t, inUserNamespace(exec.Command(own, "backup", "--socket", filepath.Join(dir, "run", "r.sock"), "--out", out), mapped))
	if strings.Contains(stderr, "not mapped") || !strings.Contains(stderr, "AdminForbidden") {
		t.Fatalf("backup from a user namespace, the daemon's own socket: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the daemon's own answer (AdminForbidden: not an operator), not the client's refusal", code, stdout, stderr)
	}
}
