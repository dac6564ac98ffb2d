package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 37, finding 6, end to end: config check run as root, judging for
// the user serve runs as, agrees with serve running as that user — it
// accepts the package's layout, which serve starts on, and refuses a state
// directory of root's, which serve refuses (exit 2). Judged for root it
// would refuse the first and accept the second.
func TestConfigCheckForServesUserAgreesWithServeAsThatUser(t *testing.T) {
	needRoot(t, "running serve as another user")
	bin := buildBinary(t)
	dir, cfg := packageLayout(t, nobodyUID, "", `metrics_listen = "127.0.0.1:0"`+"\n")
	own := filepath.Join(dir, "registrar-otel")
	copyFile(t, bin, own, 0o755)

	code, stdout, stderr := runCmd(t, exec.Command(bin, "config", "check", "--config", cfg, "--user", nobody))
	if code != exitOK || !strings.Contains(stdout, "judged for: nobody (uid 65534), given by --user\n") {
		t.Fatalf("config check --user nobody of the package's layout: exit %d\nstdout:\n%s\nstderr:\n%s\nwant 0, judged for nobody", code, stdout, stderr)
	}
	p, _ := startLogged(t, "daemon", asDaemonUID(exec.Command(own, "serve", "--config", cfg)), "registrar-otel serving")
	p.terminate(t, "daemon")

	_, state, _ := packagePaths(dir)
	if err := os.Chown(state, 0, 0); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd(t, exec.Command(bin, "config", "check", "--config", cfg, "--user", nobody))
	if code != exitUsage || !strings.Contains(stderr, "registrar.state_dir "+state+": serve, running as nobody (uid 65534), could not read and write in it") ||
		!strings.Contains(stderr, "registrar.audit_record_dir "+filepath.Join(state, "audit")+": serve, running as nobody (uid 65534), could not read and write in it: it cannot search "+state) {
		t.Errorf("config check --user nobody of a state directory of root's: exit %d, stderr:\n%s\nwant 2, it and the audit directory in it refused", code, stderr)
	}
	// serve stops at the first of them it opens: the state directory (the
	// audit store's sealing key is in it).
	code, _, stderr = runCmd(t, asDaemonUID(exec.Command(own, "serve", "--config", cfg)))
	if code != exitUsage || !strings.Contains(stderr, "daemon: state directory (registrar.state_dir "+state+")") || !strings.Contains(stderr, "permission denied") {
		t.Errorf("serve as nobody on a state directory of root's: exit %d, stderr:\n%s\nwant 2, the state directory named, permission denied", code, stderr)
	}
}

// Run as another user than root, config check judges for that user, and
// --user may name only that user: it cannot see into another user's
// private directories, so its judgement for them would be wrong.
func TestConfigCheckAsAnotherUserJudgesForItself(t *testing.T) {
	needRoot(t, "running config check as another user")
	bin := buildBinary(t)
	dir, cfg := packageLayout(t, nobodyUID, "", "")
	own := filepath.Join(dir, "registrar-otel")
	copyFile(t, bin, own, 0o755)
	for _, c := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, exitOK, "judged for: nobody (uid 65534), the user running this check\n", ""},
		{[]string{"--user", nobody}, exitOK, "judged for: nobody (uid 65534), given by --user\n", ""},
		{[]string{"--user", "root"}, exitUsage, "", "--user root: only root may judge for another user (this is uid 65534"},
	} {
		code, stdout, stderr := runCmd(t, asDaemonUID(exec.Command(own, append([]string{"config", "check", "--config", cfg}, c.args...)...)))
		if code != c.code || !strings.Contains(stdout, c.stdout) || !strings.Contains(stderr, c.stderr) {
			t.Errorf("as nobody, %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant %d, %q, %q", c.args, code, stdout, stderr, c.code, c.stdout, c.stderr)
		}
	}
}
