package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

func TestStartRefusesAMalformedSubuidFileNamingTheKey(t *testing.T) {
	cfg := testConfig(t)
	cfg.Registrar.SubuidFile = filepath.Join(t.TempDir(), "subuid")
	if err := os.WriteFile(cfg.Registrar.SubuidFile, []byte("alice:100000:65536\nbob:1:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := newDaemon(cfg, nil, Options{}, seams{})
	if !IsSetupError(err) {
		t.Fatalf("New = %v, want a setup error (exit 2)", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "registrar.subuid_file must be a subordinate uid file") || !strings.Contains(msg, `line 2: has the count ""`) {
		t.Errorf("New error %q does not name the key and the line", msg)
	}
	if _, ok := errors.AsType[*config.KeyError](err); !ok {
		t.Errorf("New error %v carries no *config.KeyError", err)
	}
}

// subuidRig is a daemon started from a file whose registrar.subuid_file
// is rig.subuid, its socket open to every uid (for callers run as
// subordinate uids), with no caller policy: every caller but root is
// refused no_policy, charged to its own predecision_refusal bucket.
type subuidRig struct {
	*reloadRig
	subuid string
	bin    string
}

func startWithSubuids(t *testing.T, ranges string) *subuidRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run callers as subordinate uids")
	}
	dir, err := os.MkdirTemp("", "sub-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sr := &subuidRig{reloadRig: &reloadRig{dir: dir, path: filepath.Join(dir, "registrar.toml")}, subuid: filepath.Join(dir, "subuid")}
	sr.setRanges(t, ranges)
	sr.write(t, sr.file(), 0o600)
	cfg, err := config.Load(sr.path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sr.running, sr.logs = startLogged(t, cfg, seams{})
	// Open the socket to the callers: its directory and the socket (no
	// tick runs to judge them; the test's own directory is 0700).
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o755}, {filepath.Join(dir, "run"), 0o755}, {cfg.Registrar.SocketPath, 0o666}} {
		if err := os.Chmod(p.path, p.mode); err != nil {
			t.Fatal(err)
		}
	}
	sr.bin = helperBinary(t)
	return sr
}

func (sr *subuidRig) file() string {
	return reloadFile(sr.dir, startLimits+fmt.Sprintf("subuid_file = %q\n", sr.subuid), twoComponents)
}

func (sr *subuidRig) setRanges(t *testing.T, ranges string) {
	t.Helper()
	if err := os.WriteFile(sr.subuid, []byte(ranges), 0o644); err != nil {
		t.Fatal(err)
	}
}

// callAs runs a mint as uid over the socket and returns its error id.
func (sr *subuidRig) callAs(t *testing.T, uid uint32) string {
	t.Helper()
	cmd := exec.Command(sr.bin, "-test.run=^TestHelperSubuidCaller$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SUBUID_CALLER_SOCKET="+filepath.Join(sr.dir, "run", "r.sock"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("caller as uid %d: %v\n%s", uid, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "ANSWER "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("caller as uid %d gave no answer:\n%s", uid, out)
	return ""
}

// identities are the limiter's entries.
func (sr *subuidRig) identities() []string {
	ids := sr.d.limiter.Identities()
	slices.Sort(ids)
	return ids
}

// helperBinary copies the test binary where any uid may run it.
func helperBinary(t *testing.T) string {
	t.Helper()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sub-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "daemon.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestHelperSubuidCaller is the caller of callAs: it mints once and prints
// the answer's error id ("ok" for none). It does nothing unless run so.
func TestHelperSubuidCaller(t *testing.T) {
	path := os.Getenv("SUBUID_CALLER_SOCKET")
	if path == "" {
		t.Skip("helper process only")
	}
	c := wire.NewUnixClient(path)
	defer c.CloseIdleConnections()
	resp, err := c.Mint(context.Background(), mint("review"))
	if err != nil {
		t.Fatal(err)
	}
	id := string(resp.ErrorID)
	if resp.OK() {
		id = "ok"
	}
	fmt.Println("ANSWER", id)
}

func TestTheSubuidFileIsReadAtStartAndAgainOnEveryReload(t *testing.T) {
	sr := startWithSubuids(t, "1000:100000:10\n")
	if !strings.Contains(sr.logs.String(), `msg="subordinate uid ranges read: a uid inside one is its owner's identity" component=config key=registrar.subuid_file file=`+sr.subuid+" ranges=1") {
		t.Fatalf("no INFO line of the ranges read at start:\n%s", sr.logs)
	}
	if got := sr.callAs(t, 100009); got != string(wire.CallerNotPermitted) {
		t.Fatalf("uid 100009: %s, want CallerNotPermitted (no_policy)", got)
	}
	if got, want := sr.identities(), []string{"unix-peer:uid=1000"}; !slices.Equal(got, want) {
		t.Fatalf("limiter entries %v after uid 100009's call, want its owner's alone %v", got, want)
	}

	// The file changes, the key does not: the reload reads it again.
	sr.setRanges(t, "1000:200000:10\n")
	changes, err := sr.d.Reload(context.Background())
	if err != nil || len(changes) != 0 {
		t.Fatalf("Reload = %v, %v; want no changed key and no error", changes, err)
	}
	sr.callAs(t, 100009)
	sr.callAs(t, 200000)
	if got, want := sr.identities(), []string{"unix-peer:uid=1000", "unix-peer:uid=100009"}; !slices.Equal(got, want) {
		t.Fatalf("limiter entries %v after the reload, want %v (100009 in no range now, 200000 its owner's)", got, want)
	}

	// A malformed file refuses the reload; the ranges in force stay.
	sr.setRanges(t, "1000:300000:10\n1000:x:1\n")
	if _, err := sr.d.Reload(context.Background()); !errors.Is(err, ErrReloadInvalid) ||
		!strings.Contains(err.Error(), "registrar.subuid_file must be a subordinate uid file (name:start:count lines, no two ranges overlapping): line 2: ") {
		t.Fatalf("Reload of a malformed file = %v, want ErrReloadInvalid naming the key and the line", err)
	}
	sr.callAs(t, 200009)
	sr.callAs(t, 300000)
	if got, want := sr.identities(), []string{"unix-peer:uid=1000", "unix-peer:uid=100009", "unix-peer:uid=300000"}; !slices.Equal(got, want) {
		t.Fatalf("limiter entries %v after a refused reload, want %v (the old ranges in force)", got, want)
	}

	// Missing, then off.
	if err := os.Remove(sr.subuid); err != nil {
		t.Fatal(err)
	}
	if _, err := sr.d.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "registrar.subuid_file cannot be read: no such file or directory") {
		t.Fatalf("Reload of a missing named file = %v, want it refused", err)
	}
	sr.write(t, strings.Replace(sr.file(), fmt.Sprintf("subuid_file = %q", sr.subuid), `subuid_file = ""`, 1), 0o600)
	if _, err := sr.d.Reload(context.Background()); err != nil {
		t.Fatalf("Reload turning the mapping off: %v", err)
	}
	sr.callAs(t, 200001)
	if got := sr.identities(); !slices.Contains(got, "unix-peer:uid=200001") {
		t.Fatalf("limiter entries %v with the mapping off, want uid 200001 its own", got)
	}
}

func TestARangeOfAnOperatorIsLeftOutAndNeverAnOperator(t *testing.T) {
	sr := startWithSubuids(t, "root:300000:10\n1000:0:10\nghost-of-registrar:400000:1\n1001:500000:10\n")
	logs := sr.logs.String()
	for _, want := range []string{
		`level=WARN msg="subordinate uid range left out: its owner is an operator, whose identity is unrestricted; its uids stay themselves" component=config key=registrar.subuid_file file=` + sr.subuid + ` line=1 range=300000-300009 owner=0`,
		`level=WARN msg="an operator's uid lies in a subordinate uid range: it stays the operator, not the range's owner" component=config key=registrar.subuid_file file=` + sr.subuid + ` line=2 range=0-9 owner=1000 uid=0`,
		`level=WARN msg="subordinate uid range of a name no account has: its uids stay themselves until a reload finds the account" component=config key=registrar.subuid_file file=` + sr.subuid + ` line=3 name=ghost-of-registrar range=400000-400000`,
		"ranges=2",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks\n%s\nin\n%s", want, logs)
		}
	}
	// A uid of root's range is itself, refused no_policy: not root, whom
	// the operators rule would admit.
	if got := sr.callAs(t, 300005); got != string(wire.CallerNotPermitted) {
		t.Fatalf("uid 300005 of root's range: %s, want CallerNotPermitted (no_policy), not an operator's admission", got)
	}
	// Root, inside 1000's range, is still root: admitted.
	if resp := mintAs(t, sr.client, "review", 1); !resp.OK() {
		t.Fatalf("root inside a range: %+v, want admitted as the operator", resp)
	}
	sr.callAs(t, 500000)
	if got, want := sr.identities(), []string{"unix-peer:uid=0", "unix-peer:uid=1001", "unix-peer:uid=300005"}; !slices.Equal(got, want) {
		t.Fatalf("limiter entries %v, want %v", got, want)
	}
}
