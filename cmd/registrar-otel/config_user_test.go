package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// nobodyUID is the unprivileged user the judged-for tests take as the
// unit's User= (Debian's nobody, in group nogroup).
const (
	nobody    = "nobody"
	nobodyUID = 65534
)

// packageLayout is the Debian package's layout for the daemon's user
// under a fresh directory of root's that everyone may traverse: the state
// directory lib/ and the audit directory lib/audit/ in it (so the state
// directory is one of the audit directory's ancestors) the user's, 0700;
// the socket's directory run/ too. It returns the directory and a
// configuration of it (packagePaths) written 0644 by root, as the package
// installs it.
func packageLayout(t *testing.T, uid int, registrarExtra, telemetry string) (dir, cfg string) {
	t.Helper()
	dir = shortTempDir(t)
	chmod(t, dir, 0o755)
	socket, state, audit := packagePaths(dir)
	for _, d := range []string{filepath.Dir(socket), state, audit} {
		mkdirOwned(t, d, 0o700, uid)
	}
	return dir, writeConfig(t, dir, serveDocAt(socket, state, audit, registrarExtra, telemetry), 0o644)
}

// packagePaths are packageLayout's socket, state and audit paths under dir.
func packagePaths(dir string) (socket, state, audit string) {
	socket, state, _ = daemonPaths(dir)
	return socket, state, filepath.Join(state, "audit")
}

// unitAs installs, in a unit directory of the test's own, a service unit
// running serve as user (with the extra [Service] lines), and returns the
// unit's path.
func unitAs(t *testing.T, user, extra string) string {
	t.Helper()
	dir := t.TempDir()
	useUnitDirs(t, dir)
	return writeUnit(t, dir, serviceUnitName, "[Service]\nExecStart=/usr/bin/registrar-otel serve\nUser="+user+"\n"+extra)
}

func errorsWith(res checkResult, key, part string) int {
	n := 0
	for _, e := range res.Errors {
		if e.Key == key && strings.Contains(e.Message, part) {
			n++
		}
	}
	return n
}

// Issue 37, finding 6: following the install page, config check run as
// root judged the package's directories for root and refused all three,
// "owned by uid 103, not by this user (0) or root". Run as root it now
// judges for the installed unit's User=, accepts them, and says for whom.
func TestConfigCheckAsRootJudgesForTheUnitsUser(t *testing.T) {
	needRoot(t, "directories of another user")
	_, cfg := packageLayout(t, nobodyUID, "", "")
	foreign := fmt.Sprintf("is owned by uid %d, not by this user (0) or root", nobodyUID)

	// No unit installed: judged for root, as before, and refused.
	code, res := checkJSON(t, "--config", cfg)
	if code != configCheckInvalid || len(res.Errors) != 3 || res.JudgedFor == nil || res.JudgedFor.UID != 0 || res.JudgedFor.Source != judgeSelf {
		t.Fatalf("no unit: exit %d, judged for %+v, errors %+v; want 2, root, the three directories refused", code, res.JudgedFor, res.Errors)
	}
	for _, key := range []string{"registrar.socket_path", "registrar.state_dir", "registrar.audit_record_dir"} {
		if errorsWith(res, key, foreign) != 1 {
			t.Errorf("no unit: no %s error saying it %s: %+v", key, foreign, res.Errors)
		}
	}

	// The unit runs serve as nobody: judged for nobody, accepted.
	unit := unitAs(t, nobody, "")
	code, res = checkJSON(t, "--config", cfg)
	want := judgedFor{User: nobody, UID: nobodyUID, Source: judgeUnit, Unit: unit}
	if code != configCheckOK || !res.OK || !sameJudge(res.JudgedFor, want) {
		t.Fatalf("unit User=nobody: exit %d, judged for %+v, errors %+v; want 0 and %+v", code, res.JudgedFor, res.Errors, want)
	}
	code, stdout, stderr := configCheckOutput([]string{"--config", cfg}, nil)
	if line := "judged for: nobody (uid 65534), the User= of " + unit + "\n"; code != configCheckOK || !strings.HasPrefix(stdout, "configuration OK: "+cfg+"\n"+line) {
		t.Errorf("text: exit %d, stdout:\n%s\nstderr:\n%s\nwant the second line %q", code, stdout, stderr, line)
	}

	// --user wins over the unit, and is said so.
	code, _, stderr = configCheckOutput([]string{"--config", cfg, "--user", "root"}, nil)
	if code != configCheckInvalid || !strings.Contains(stderr, foreign) || !strings.Contains(stderr, "judged for: root (uid 0), given by --user\nconfig check: 3 errors in "+cfg+"\n") {
		t.Errorf("--user root: exit %d, stderr:\n%s\nwant 2, the directories refused, judged for root given by --user", code, stderr)
	}
	useUnitDirs(t)
	for _, name := range []string{nobody, strconv.Itoa(nobodyUID)} {
		code, res = checkJSON(t, "--config", cfg, "--user", name)
		if code != configCheckOK || !sameJudge(res.JudgedFor, judgedFor{User: nobody, UID: nobodyUID, Source: judgeFlag}) {
			t.Errorf("--user %s, no unit: exit %d, judged for %+v, errors %+v; want 0, nobody given by the flag", name, code, res.JudgedFor, res.Errors)
		}
	}
}

// A unit without User= runs serve as root; a unit whose User= the host
// lacks cannot start at all (an error), and the rest is judged for root.
func TestConfigCheckReadsTheUnitsUserOrSaysWhyNot(t *testing.T) {
	needRoot(t, "reading the unit happens as root only")
	dir := shortTempDir(t)
	cfg := writeConfig(t, dir, serveDoc(dir, "", ""), 0o600)
	unit := unitAs(t, "", "")
	writeUnit(t, filepath.Dir(unit), serviceUnitName, "[Service]\nExecStart=/usr/bin/registrar-otel serve\n")
	code, stdout, stderr := configCheckOutput([]string{"--config", cfg}, nil)
	if want := "judged for: root (uid 0), as " + unit + " sets no User=\n"; code != configCheckOK || !strings.Contains(stdout, want) {
		t.Errorf("no User=: exit %d, stdout:\n%s\nstderr:\n%s\nwant %q", code, stdout, stderr, want)
	}
	writeUnit(t, filepath.Dir(unit), serviceUnitName, "[Service]\nUser=no-such-user-registrar-test\n")
	code, res := checkJSON(t, "--config", cfg)
	if code != configCheckInvalid || res.JudgedFor.UID != 0 || len(res.Errors) != 1 || res.Errors[0].Key != "" ||
		!strings.HasPrefix(res.Errors[0].Message, unit+" runs serve as User=no-such-user-registrar-test, which this host does not have: systemd cannot start it (status 217/USER)") {
		t.Errorf("unknown User=: exit %d, judged for %+v, errors %+v", code, res.JudgedFor, res.Errors)
	}
}

// Judged for another user, what serve needs of each path and file is
// judged for that user: a directory of root's it could not write in, a
// file only root reads, a privileged port.
func TestConfigCheckJudgesTheAccessServesUserNeeds(t *testing.T) {
	needRoot(t, "files of root's and directories of another user")
	dir, cfg := packageLayout(t, nobodyUID, tlsLines(shortTempDirAll(t), "127.0.0.1:443"), "")
	tlsDir := filepath.Dir(strings.Split(strings.Split(string(mustRead(t, cfg)), "tls_cert_file = \"")[1], "\"")[0])
	writeTestPKI(t, tlsDir) // root's, 0600: nobody cannot read them
	chmod(t, cfg, 0o600)    // root's configuration, readable by root alone
	_, state, _ := packagePaths(dir)
	if err := os.Chown(state, 0, 0); err != nil { // root's 0700 state directory
		t.Fatal(err)
	}
	unitAs(t, nobody, "")
	code, res := checkJSON(t, "--config", cfg)
	if code != configCheckInvalid {
		t.Fatalf("exit %d, want 2; errors %+v", code, res.Errors)
	}
	for _, w := range []struct{ key, part string }{
		{"", cfg + ": serve, running as nobody (uid 65534), could not read the configuration file: " + cfg + " is owner uid 0, group gid 0, mode 0600"},
		{"registrar.state_dir", "serve, running as nobody (uid 65534), could not read and write in it: " + state + " is owner uid 0, group gid 0, mode 0700"},
		{"registrar.tls_key_file", "could not read the private key"},
		{"registrar.tls_cert_file", "could not read the certificate"},
		{"registrar.tls_client_ca_file", "could not read the client CA"},
		{"registrar.tls_listen", "registrar.tls_listen 127.0.0.1:443: serve, running as nobody (uid 65534), could not listen there: port 443 is privileged"},
	} {
		if errorsWith(res, w.key, w.part) != 1 {
			t.Errorf("no %q error saying %q; errors:\n%s", w.key, w.part, findingsText(res.Errors))
		}
	}
	// Judged for root, none of these stops serve.
	if code, res := checkJSON(t, "--config", cfg, "--user", "root"); code != configCheckInvalid || errorsWith(res, "", "could not read") != 0 || errorsWith(res, "registrar.tls_listen", "privileged") != 0 {
		t.Errorf("--user root: exit %d, errors:\n%s\nwant only the ownership refusals", code, findingsText(res.Errors))
	}
}

// Judged for the unit's user, what systemd prepares before serve starts is
// taken into account: a RuntimeDirectory= or StateDirectory= is the user's
// with the directive's mode at each start, whatever it is now, and a socket
// the socket unit binds is handed over, so serve neither binds it nor
// writes in its directory.
func TestConfigCheckTakesWhatSystemdPreparesFromTheUnit(t *testing.T) {
	needRoot(t, "a directory under /run and the unit's user")
	run, err := os.MkdirTemp("/run", "reg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	chmod(t, run, 0o755) // root's now, as the socket unit leaves it
	dir, _ := packageLayout(t, nobodyUID, "", "")
	_, state, audit := packagePaths(dir)
	socket := filepath.Join(run, "r.sock")
	cfg := writeConfig(t, dir, serveDocAt(socket, state, audit, "", ""), 0o644)
	unit := unitAs(t, nobody, "RuntimeDirectory="+filepath.Base(run)+"\nRuntimeDirectoryMode=0750\n")
	code, res := checkJSON(t, "--config", cfg)
	if st, d := pathState(res, run); code != configCheckOK || st != pathOK || d != "directory; owned by nobody (uid 65534) with mode 0750 (RuntimeDirectory= of "+unit+")" {
		t.Errorf("RuntimeDirectory=: exit %d, %s: %q %q, errors %+v", code, run, st, d, res.Errors)
	}
	// Named by --user, the unit's user is judged the same way: the unit
	// runs serve as that user (runuser -u nobody -- … config check, too).
	code, stdout, stderr := configCheckOutput([]string{"--config", cfg, "--user", nobody}, nil)
	if want := "judged for: nobody (uid 65534), given by --user and the User= of " + unit + "\n"; code != configCheckOK || !strings.Contains(stdout, want) {
		t.Errorf("--user nobody: exit %d\nstdout:\n%s\nstderr:\n%s\nwant 0 and %q", code, stdout, stderr, want)
	}
	// Owned by another uid now (a user removed and made again), it is
	// still nobody's at start: so is the state directory below it.
	below := filepath.Join(run, "state")
	mkdirOwned(t, below, 0o700, nobodyUID)
	if err := os.Chown(run, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	belowCfg := filepath.Join(dir, "below.toml")
	writeFile(t, belowCfg, []byte(serveDocAt(socket, below, audit, "", "")), 0o644)
	if code, res := checkJSON(t, "--config", belowCfg); code != configCheckOK {
		t.Errorf("a state directory under a RuntimeDirectory= of uid 4242: exit %d, errors:\n%s", code, findingsText(res.Errors))
	}
	if code, res := checkJSON(t, "--config", belowCfg, "--user", "root"); code != configCheckInvalid || errorsWith(res, "registrar.socket_path", run+" is owned by uid 4242") != 1 {
		t.Errorf("the same, judged for root, whom no unit runs serve as: exit %d, errors:\n%s\nwant uid 4242's directory refused", code, findingsText(res.Errors))
	}
	os.RemoveAll(run)
	code, res = checkJSON(t, "--config", cfg)
	if st, d := pathState(res, run); code != configCheckOK || st != pathCreate || !strings.HasPrefix(d, "missing; systemd creates it at each start, owned by nobody") {
		t.Errorf("RuntimeDirectory= missing: exit %d, %s: %q %q", code, run, st, d)
	}

	// Not a RuntimeDirectory=: a root's 0755 socket directory nobody may
	// not bind in; handed over by the socket unit, it binds nothing there.
	mkdir(t, run, 0o755)
	writeUnit(t, filepath.Dir(unit), serviceUnitName, "[Service]\nUser=nobody\n")
	code, res = checkJSON(t, "--config", cfg)
	if code != configCheckInvalid || errorsWith(res, "registrar.socket_path", "serve, running as nobody (uid 65534), could not read and write in it: "+run+" is owner uid 0, group gid 0, mode 0755") != 1 {
		t.Errorf("root's socket directory, serve binding: exit %d, errors:\n%s", code, findingsText(res.Errors))
	}
	writeUnit(t, filepath.Dir(unit), socketUnitName, "[Socket]\nListenStream="+socket+"\nSocketGroup=nogroup\n")
	code, res = checkJSON(t, "--config", cfg)
	if st, d := pathState(res, socket); code != configCheckOK || st != pathOK || !strings.HasPrefix(d, "systemd's socket unit ("+filepath.Join(filepath.Dir(unit), socketUnitName)+") binds it") {
		t.Errorf("socket unit: exit %d, %s: %q %q, errors %+v", code, socket, st, d, res.Errors)
	}
}

// The socket group: serve, binding the socket itself, gives it to
// registrar.socket_group, which its user may only do as a member (issue
// 37, finding 3: "lchown … operation not permitted", exit 2).
func TestConfigCheckSocketGroupNeedsTheUsersMembership(t *testing.T) {
	needRoot(t, "the unit's user")
	dir, _ := packageLayout(t, nobodyUID, "", "")
	socket, state, audit := packagePaths(dir)
	if err := os.Chown(filepath.Dir(socket), nobodyUID, 0); err != nil {
		t.Fatal(err)
	}
	chmod(t, filepath.Dir(socket), 0o750) // group root may traverse it
	cfg := writeConfig(t, dir, serveDocAt(socket, state, audit, `socket_group = "root"`, ""), 0o644)
	unit := unitAs(t, nobody, "")
	code, res := checkJSON(t, "--config", cfg)
	want := "registrar.socket_group root: serve, running as nobody (uid 65534), could not give the socket to this group: the user is not a member of it"
	if code != configCheckInvalid || len(res.Errors) != 1 || errorsWith(res, "registrar.socket_group", want) != 1 {
		t.Errorf("not a member: exit %d, errors:\n%s\nwant the one error %q", code, findingsText(res.Errors), want)
	}
	writeUnit(t, filepath.Dir(unit), serviceUnitName+".d/groups.conf", "[Service]\nSupplementaryGroups=root\n")
	if code, res := checkJSON(t, "--config", cfg); code != configCheckOK {
		t.Errorf("SupplementaryGroups=root: exit %d, errors:\n%s", code, findingsText(res.Errors))
	}
	// A directory the group cannot traverse: server.CheckGroupDir's words.
	chmod(t, filepath.Dir(socket), 0o700)
	if code, res := checkJSON(t, "--config", cfg); code != configCheckInvalid || errorsWith(res, "registrar.socket_group", "wire: socket group: the socket directory "+filepath.Dir(socket)+" (mode 0700, group id 0) does not let group root (id 0) traverse it") != 1 {
		t.Errorf("0700 socket directory: exit %d, errors:\n%s", code, findingsText(res.Errors))
	}
}

func TestConfigCheckUserFlagUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "no-such-user-registrar-test"}, `--user "no-such-user-registrar-test": no such user on this host`},
		{[]string{"--user="}, "--user needs a user name or uid"},
	} {
		code, stdout, stderr := configCheckOutput(c.args, nil)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// sameJudge compares the members config check --json shows.
func sameJudge(got *judgedFor, want judgedFor) bool {
	return got != nil && got.User == want.User && got.UID == want.UID && got.Source == want.Source && got.Unit == want.Unit
}

// findingsText is findings one per line, for a failure message.
func findingsText(fs []finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  [%s] %s\n", f.Key, f.Message)
	}
	return b.String()
}

// shortTempDirAll is shortTempDir everyone may traverse.
func shortTempDirAll(t *testing.T) string {
	dir := shortTempDir(t)
	chmod(t, dir, 0o755)
	return dir
}

// The owner rule of the files serve reads (the configuration, the openbao
// token) is judged for the same user: a configuration of serve's own user
// passes, as serve running as that user accepts it.
func TestConfigCheckJudgesTheFilesOwnerRuleForServesUser(t *testing.T) {
	needRoot(t, "a file of another user")
	_, cfg := packageLayout(t, nobodyUID, "", "")
	chmod(t, cfg, 0o600)
	if err := os.Chown(cfg, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
	unitAs(t, nobody, "")
	if code, res := checkJSON(t, "--config", cfg); code != configCheckOK {
		t.Errorf("nobody's configuration judged for nobody: exit %d, errors:\n%s", code, findingsText(res.Errors))
	}
	code, res := checkJSON(t, "--config", cfg, "--user", "root")
	if code != configCheckInvalid || errorsWith(res, "", "is owned by uid 65534, neither root nor this user (uid 0)") != 1 {
		t.Errorf("nobody's configuration judged for root: exit %d, errors:\n%s", code, findingsText(res.Errors))
	}
}
