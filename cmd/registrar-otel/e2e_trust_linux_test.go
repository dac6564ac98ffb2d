package main

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Issue 41, item 5, inside a user namespace: the real daemon runs as its
// uid on the host; a backup run as root of a user namespace that maps one
// other uid sees the daemon and its socket directory's owner as the
// overflow uid, as it would any unmapped user's process. It cannot
// tell the daemon from a stranger, so it refuses it (exit 3, saying why),
// and creates no --out. The same command outside the namespace works.
func TestEndToEndBackupFromAUserNamespaceRefusesAnUnmappedServer(t *testing.T) {
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
	dir, own := daemonUIDDir(t)
	cfg := writeConfig(t, dir, serveDoc(dir, "", ""), 0o644)
	startLogged(t, "daemon", asDaemonUID(exec.Command(own, "serve", "--config", cfg)), "registrar-otel serving")

	// As a socket group would let it, the namespace's uid may connect.
	if err := os.Chmod(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "run", "r.sock"), 0o666); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(shortTempDir(t), "out")
	mkdir(t, outDir, 0o777)
	// The namespace's uid may run the binary and read the configuration
	// (as any caller may), and write its --out.
	for _, leaf := range []string{dir, outDir} {
		for d := leaf; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	os.Chmod(outDir, 0o777) // past the umask
	out := filepath.Join(outDir, "registry.db")
	// --socket: with --config the command already stops at the
	// configuration file, owned (it sees) by the overflow uid.
	cmd := exec.Command(own, "backup", "--socket", filepath.Join(dir, "run", "r.sock"), "--out", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: mapped, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: mapped, Size: 1}},
		// Root inside the namespace: on the host, the mapped uid.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
	}
	code, stdout, stderr := runCmd(t, cmd)
	if code == exitOK || !strings.Contains(stderr, "not mapped into this user namespace") || !strings.Contains(stderr, "nothing was sent") {
		t.Fatalf("backup from a user namespace: exit %d\nstdout:\n%s\nstderr:\n%s\nwant a refusal saying the server's uid is unmapped", code, stdout, stderr)
	}
	if code != 3 {
		t.Errorf("exit %d, want 3 (the daemon could not be used)", code)
	}
	if left, _ := filepath.Glob(filepath.Join(outDir, "*")); len(left) != 0 {
		t.Fatalf("the refused backup left %v", left)
	}
	code, stdout, stderr = runCmd(t, exec.Command(own, "backup", "--config", cfg, "--out", out))
	if code != exitOK || !strings.Contains(stdout, "from the running daemon") {
		t.Fatalf("the same backup outside the namespace: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
