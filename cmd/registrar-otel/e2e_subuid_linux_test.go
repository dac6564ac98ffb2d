package main

// Issue 41's first finding, on the real binary with a real user namespace:
// an account of the socket group with a subordinate uid range makes a user
// namespace with unshare --user and newuidmap, and calls the daemon from
// ten processes of ten subordinate uids. They must be one caller: one
// account's burst, one entry in the limiter's map, and a victim account
// answered throughout.
//
// newuidmap reads /etc/subuid and the daemon reads it by default, and
// neither may be the host's: the test runs its scenario in a private mount
// namespace (unshare --mount, as root) where a test subuid file and a test
// passwd file (the host's with the test account added) are bind-mounted
// over /etc/subuid and /etc/passwd. Nothing of the host's files is
// written; the mounts die with the namespace.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/server"
)

// The scenario's environment, set by the outer test for the inner one.
const (
	subuidWorkEnv = "REGISTRAR_E2E_SUBUID_WORK"
	subuidBinEnv  = "REGISTRAR_E2E_SUBUID_BIN"
	subuidIDsEnv  = "REGISTRAR_E2E_SUBUID_IDS" // account uid, victim uid, the group's gid and name
)

// The account's subordinate range, far from any real uid, and how many
// of its uids call.
const (
	subuidFirst   = 3000000000
	subuidCount   = 65536
	subuidCallers = 10
	subuidAccount = "regotel-subuid"
	// Each caller makes this many calls of each kind: 10 × 4 = 40, past
	// one account's burst of 32 and within ten uids' 320.
	callsPerCaller = 4
	accountBurst   = 32
)

// TestEndToEndTenSubordinateUIDsOfOneAccountAreOneCaller: see the file's
// comment. It needs root, unshare, newuidmap (Debian's uidmap, make deps)
// and setpriv; without them it skips, except in CI.
func TestEndToEndTenSubordinateUIDsOfOneAccountAreOneCaller(t *testing.T) {
	bin := buildBinary(t)
	needRoot(t, "the scenario mounts over /etc/subuid in a private mount namespace and runs callers as other uids")
	for _, tool := range []string{"unshare", "newuidmap", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing := fmt.Sprintf("%s not found: install Debian's uidmap (newuidmap) and util-linux (unshare, setpriv); make deps installs uidmap", tool)
			if os.Getenv("CI") != "" {
				t.Fatal(missing)
			}
			t.Skip(missing)
		}
	}
	group, gid := existingGroup(t)
	ids := unusedIDs(t, 2)
	work := shortTempDir(t)
	chmod(t, work, 0o755)
	chmod(t, filepath.Dir(bin), 0o755) // the namespace's uids exec the binary

	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	passwd = fmt.Appendf(passwd, "%s:x:%d:%d:registrar-otel e2e:/nonexistent:/usr/sbin/nologin\n", subuidAccount, ids[0], gid)
	writeFile(t, filepath.Join(work, "passwd"), passwd, 0o644)
	writeFile(t, filepath.Join(work, "subuid"), fmt.Appendf(nil, "# registrar-otel e2e: the test account's range\n%s:%d:%d\n", subuidAccount, subuidFirst, subuidCount), 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--",
		os.Args[0], "-test.run=^TestHelperSubuidNamespace$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), subuidWorkEnv+"="+work, subuidBinEnv+"="+bin,
		fmt.Sprintf("%s=%d,%d,%d,%s", subuidIDsEnv, ids[0], ids[1], gid, group))
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHelperSubuidNamespace") {
		t.Fatalf("the scenario in its mount namespace: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "subuid_test.go") || strings.Contains(line, "subuid_linux_test.go") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// TestHelperSubuidNamespace is the scenario, run by the test above inside
// its private mount namespace; it does nothing otherwise.
func TestHelperSubuidNamespace(t *testing.T) {
	work := os.Getenv(subuidWorkEnv)
	if work == "" {
		t.Skip("run by TestEndToEndTenSubordinateUIDsOfOneAccountAreOneCaller only")
	}
	bin := os.Getenv(subuidBinEnv)
	var account, victim, gid int
	var group string
	if _, err := fmt.Sscanf(strings.ReplaceAll(os.Getenv(subuidIDsEnv), ",", " "), "%d %d %d %s", &account, &victim, &gid, &group); err != nil {
		t.Fatalf("%s: %v", subuidIDsEnv, err)
	}
	for _, m := range [][2]string{{"passwd", "/etc/passwd"}, {"subuid", "/etc/subuid"}} {
		if err := syscall.Mount(filepath.Join(work, m[0]), m[1], "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind-mounting the test %s over %s (in the private mount namespace): %v", m[0], m[1], err)
		}
	}
	if got, _ := os.ReadFile("/etc/subuid"); !strings.Contains(string(got), subuidAccount+":") {
		t.Fatalf("/etc/subuid in the namespace is not the test's:\n%s", got)
	}

	// The daemon, as root, its socket shared with the group; the account
	// may mint review only (so an edge-proxy call is a predecision
	// refusal, out_of_scope), the victim review. subuid_file is left at
	// its default, /etc/subuid: the test's.
	dir := shortTempDir(t)
	d := &daemonProc{t: t, bin: bin, dir: dir}
	d.socket, _, d.auditDir = daemonPaths(dir)
	d.config = writeConfig(t, dir, serveDoc(dir, fmt.Sprintf(`socket_group = %q
log_level = "debug"
rate_limit_admission_burst = %d
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_predecision_refusal_burst = %d
rate_limit_predecision_refusal_refill_interval_ms = 3600000

[registrar.callers.account]
identities = [%q]
scope_components = ["review"]

[registrar.callers.victim]
identities = [%q]
scope_components = ["review"]
`, group, accountBurst, accountBurst, server.UnixIdentity(uint32(account)), server.UnixIdentity(uint32(victim))), `
[registrar.components.edge-proxy]
multiplicity = "one-per-host"
`), 0o600)
	d.loggedProc, d.ready = startLogged(t, "daemon", exec.Command(bin, "serve", "--config", d.config), "registrar-otel serving")
	chmod(t, dir, 0o755) // the callers traverse it to run/ (0750, the group's)
	if !strings.Contains(d.logs.String(), "subordinate uid ranges read") || !strings.Contains(d.logs.String(), "ranges=1") {
		t.Fatalf("the daemon did not read the test's range:\n%s", d.logs)
	}

	// The victim, a uid of its own, calls before, throughout and after.
	victimCall := func(n int) cliAnswer {
		return member{uid: victim, gid: gid, bin: bin}.call(t, d.socket, "mint", "victim", n)
	}
	if a := victimCall(1); a.code != exitOK {
		t.Fatalf("the victim before the flood: %v", a)
	}
	stop := make(chan struct{})
	var victimAnswers []cliAnswer
	var victimWG sync.WaitGroup
	victimWG.Go(func() {
		for n := 2; n < accountBurst-2; n++ { // within its own burst
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			victimAnswers = append(victimAnswers, victimCall(n))
		}
	})

	ns := startNamespace(t, bin, d.socket, account, gid)
	mints := ns.phase(t, "review")
	refusals := ns.phase(t, "edge-proxy")
	close(stop)
	victimWG.Wait()
	if a := victimCall(accountBurst - 1); a.code != exitOK {
		t.Fatalf("the victim after the flood: %v", a)
	}

	// One account's burst, for the ten uids together. A mint past the
	// admission burst is RegistrarBusy (exit 75); a refusal past the
	// predecision_refusal burst is answered the same refusal (exit 1) and
	// only counted, not recorded: the audit store tells them apart below.
	calls := subuidCallers * callsPerCaller
	if got := mints.codes(); got[exitOK] != accountBurst || got[exitRetryable] != calls-accountBurst {
		t.Errorf("the ten uids' %d mints: exit statuses %v, want %d admitted (exit 0) and %d RegistrarBusy (exit 75): one account's admission burst",
			calls, got, accountBurst, calls-accountBurst)
	}
	if got := refusals.codes(); got[exitPermanent] != calls {
		t.Errorf("the ten uids' %d out-of-scope calls: exit statuses %v, want %d refusals (exit 1)", calls, got, calls)
	}
	for _, a := range victimAnswers {
		if a.code != exitOK {
			t.Errorf("the victim during the flood: %v", a)
		}
	}
	if len(victimAnswers) == 0 {
		t.Error("the victim made no call during the flood")
	}

	// Ten distinct uids, as the kernel reported them, all the account.
	peers := map[string]bool{}
	for _, m := range peerLine.FindAllStringSubmatch(d.logs.String(), -1) {
		if m[1] != server.UnixIdentity(uint32(account)) {
			t.Errorf("peer uid %s identified as %s, want the account's %s", m[2], m[1], server.UnixIdentity(uint32(account)))
		}
		peers[m[2]] = true
	}
	for i := range subuidCallers {
		if uid := strconv.Itoa(subuidFirst + i); !peers[uid] {
			t.Errorf("no connection of peer uid %s in the daemon's debug log (got %v)", uid, slices.Sorted(maps.Keys(peers)))
		}
	}

	// One entry in the limiter's map for the ten, beside the victim's.
	code, out, errOut := d.run("limits", "show", "--socket", d.socket, "--json")
	if code != exitOK {
		t.Fatalf("limits show: exit %d\n%s\n%s", code, out, errOut)
	}
	var lim struct {
		Identities []struct {
			Identity string `json:"identity"`
		} `json:"identities"`
		Overflow []struct {
			Pool    string `json:"pool"`
			Entries int    `json:"entries"`
		} `json:"overflow"`
	}
	if err := json.Unmarshal([]byte(out), &lim); err != nil {
		t.Fatalf("limits show --json: %v\n%s", err, out)
	}
	var entries []string
	for _, id := range lim.Identities {
		entries = append(entries, id.Identity)
	}
	slices.Sort(entries)
	want := []string{server.UnixIdentity(uint32(account)), server.UnixIdentity(uint32(victim))}
	slices.Sort(want)
	if !slices.Equal(entries, want) {
		t.Errorf("the limiter's entries %v, want the account's and the victim's alone %v", entries, want)
	}
	// An entry is one (identity, verb, bucket): the account's mint has
	// both buckets, the victim's its admission one.
	for _, o := range lim.Overflow {
		if o.Pool == "local" && o.Entries != 3 {
			t.Errorf("the local pool holds %d entries, want 3: the account's two keys and the victim's one", o.Entries)
		}
	}
	// The stop closes the coalescing windows: the counted records.
	d.stop()
	var admitted, refused int
	var limited [2]uint64 // predecision_refusal, admission
	subuids := map[uint32]int{}
	for _, r := range readSubuidAudit(t, d.auditDir) {
		if r.CallerIdentity != server.UnixIdentity(uint32(account)) {
			if strings.HasPrefix(r.CallerIdentity, "unix-peer:uid=3") {
				t.Errorf("a record of a subordinate uid's own identity: %+v", r)
			}
			continue
		}
		if r.Phase == "intent" || r.Phase == "outcome" {
			if r.CallerSubuid < subuidFirst || r.CallerSubuid >= subuidFirst+subuidCallers {
				t.Errorf("the account's %s record %s has caller_subuid %d, want one of its ten uids", r.Phase, r.RequestID, r.CallerSubuid)
			}
			subuids[r.CallerSubuid]++
		} else if r.CallerSubuid != 0 {
			t.Errorf("a %s record carries caller_subuid %d", r.Phase, r.CallerSubuid)
		}
		switch {
		case r.Phase == "outcome" && r.Outcome != nil && r.Outcome.Class == "first_mint":
			admitted++
		case r.Phase == "outcome" && r.Outcome != nil && r.Outcome.Class == "refused":
			refused++
			if r.Outcome.Reason != "out_of_scope" {
				t.Errorf("the account's refusal %+v, want out_of_scope", r.Outcome)
			}
		case r.Phase == "limited" && r.LimitedBucket == "predecision_refusal":
			limited[0] += r.Count
		case r.Phase == "limited" && r.LimitedBucket == "admission":
			limited[1] += r.Count
		}
	}
	if admitted != accountBurst || limited[1] != uint64(calls-accountBurst) {
		t.Errorf("the account's records: %d first mints and %d limited admissions, want %d and %d", admitted, limited[1], accountBurst, calls-accountBurst)
	}
	if refused != accountBurst || limited[0] != uint64(calls-accountBurst) {
		t.Errorf("the account's records: %d refusals recorded and %d limited, want %d recorded then %d limited", refused, limited[0], accountBurst, calls-accountBurst)
	}
	if len(subuids) != subuidCallers {
		t.Errorf("the account's records name %d subordinate uids (caller_subuid), want %d: %v", len(subuids), subuidCallers, subuids)
	}
	t.Logf("ten subordinate uids, one caller: mints %v (%d recorded, %d limited), out-of-scope calls %v (%d recorded, %d limited); victim answered %d times during the flood; limiter entries %v",
		mints.codes(), admitted, limited[1], refusals.codes(), refused, limited[0], len(victimAnswers), entries)
}

// subuidAuditLine is the part of an audit record the scenario reads.
type subuidAuditLine struct {
	auditLine
	CallerSubuid uint32 `json:"caller_subuid"`
}

// readSubuidAudit parses every record of the audit directory.
func readSubuidAudit(t *testing.T, dir string) []subuidAuditLine {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("audit files in %s: %v %v", dir, files, err)
	}
	var out []subuidAuditLine
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if line == "" {
				continue
			}
			var r subuidAuditLine
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: %v: %s", f, err, line)
			}
			out = append(out, r)
		}
	}
	return out
}

// peerLine is the daemon's debug line for a connection of a subordinate
// uid: the identity and the uid the kernel reported.
var peerLine = regexp.MustCompile(`msg="unix peer identified as the owner of its subordinate uid range".* identity="?([^"\s]+)"? peer_uid=(\d+)`)

// userNamespace is a user namespace the account made with unshare --user:
// newuidmap maps its uid 0 to the account itself and its uids 1..10 to
// the first ten of the account's range. Its first process runs a phase of
// calls each time it is told one.
type userNamespace struct {
	cmd   *exec.Cmd
	in    io.Writer
	lines *bufio.Scanner
}

// namespaceScript is what the namespace's first process runs: it says it
// is ready (unshare has made the namespace), waits for its uid map, and
// executes phaseScript, as uid 0 of the namespace now: an execve by uid 0
// gains the namespace's capabilities, which setuid needs (the first exec,
// by unshare, was by an unmapped uid and kept none).
const namespaceScript = `echo ready
read mapped
exec sh -c "$PHASES"
`

// phaseScript reads phase lines (a component) and for each starts ten
// processes, each under its own uid 1..10 (setpriv), each making its calls
// with the binary's client, and prints one line per call, "call <uid> <n>
// <exit status>", then "phase done".
const phaseScript = `while read component; do
	i=1
	while [ $i -le 10 ]; do
		setpriv --reuid=$i -- sh -c '
			n=1
			while [ $n -le $4 ]; do
				inst=$n
				[ "$3" = review ] || inst=0 # one per host
				"$1" mint --socket "$2" --service-name review --host "ns$0-$n" --instance $inst --component "$3" --timeout 60s >/dev/null 2>&1
				echo "call $0 $n $?"
				n=$((n + 1))
			done' $i "$BIN" "$SOCK" "$component" "$CALLS" &
		i=$((i + 1))
	done
	wait
	echo "phase done"
done
`

func startNamespace(t *testing.T, bin, socket string, account, gid int) *userNamespace {
	t.Helper()
	cmd := exec.Command("unshare", "--user", "--", "sh", "-c", namespaceScript)
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "PHASES=" + phaseScript, "BIN=" + bin, "SOCK=" + socket, "CALLS=" + strconv.Itoa(callsPerCaller)}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(account), Gid: uint32(gid)}, Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the namespace's processes, whatever their uid
		cmd.Wait()
	})
	ns := &userNamespace{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	if line := ns.next(t); line != "ready" {
		t.Fatalf("unshare --user as uid %d: %q, want ready (can this kernel make user namespaces? /proc/sys/user/max_user_namespaces)\n%s", account, line, stderr.String())
	}
	// newuidmap, run by the account itself, checks its range in
	// /etc/subuid (the test's) and writes the map.
	m := exec.Command("newuidmap", strconv.Itoa(cmd.Process.Pid), "0", strconv.Itoa(account), "1", "1", strconv.Itoa(subuidFirst), strconv.Itoa(subuidCallers))
	m.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(account), Gid: uint32(gid)}}
	if code, stdout, errOut := runCmd(t, m); code != 0 {
		t.Fatalf("newuidmap as uid %d: exit %d\n%s%s", account, code, stdout, errOut)
	}
	uidMap, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", cmd.Process.Pid))
	if f := strings.Fields(string(uidMap)); err != nil || !slices.Equal(f, []string{"0", strconv.Itoa(account), "1", "1", strconv.Itoa(subuidFirst), strconv.Itoa(subuidCallers)}) {
		t.Fatalf("the namespace's uid map: %q, %v; want 0 %d 1 and 1 %d %d", uidMap, err, account, subuidFirst, subuidCallers)
	}
	fmt.Fprintln(in, "mapped")
	return ns
}

func (ns *userNamespace) next(t *testing.T) string {
	t.Helper()
	if !ns.lines.Scan() {
		t.Fatalf("the namespace's first process ended: %v", ns.lines.Err())
	}
	return ns.lines.Text()
}

// phaseResult is each call's exit status, by the namespace's uid (1..10).
type phaseResult map[int][]int

func (p phaseResult) codes() map[int]int {
	out := map[int]int{}
	for _, codes := range p {
		for _, c := range codes {
			out[c]++
		}
	}
	return out
}

// phase runs one phase of calls for component and collects its lines.
func (ns *userNamespace) phase(t *testing.T, component string) phaseResult {
	t.Helper()
	fmt.Fprintln(ns.in, component)
	res := phaseResult{}
	for {
		line := ns.next(t)
		if line == "phase done" {
			break
		}
		var uid, n, code int
		if _, err := fmt.Sscanf(line, "call %d %d %d", &uid, &n, &code); err != nil {
			t.Fatalf("the namespace said %q", line)
		}
		res[uid] = append(res[uid], code)
	}
	if len(res) != subuidCallers {
		t.Fatalf("%s: calls from %d uids, want %d: %v", component, len(res), subuidCallers, res)
	}
	for uid, codes := range res {
		if len(codes) != callsPerCaller {
			t.Fatalf("%s: uid %d made %d calls, want %d", component, uid, len(codes), callsPerCaller)
		}
	}
	return res
}
