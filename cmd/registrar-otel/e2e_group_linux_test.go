package main

// Issue 36's attacks by members of the socket group, on the real binary:
// the daemon (root) binds its socket shared with registrar.socket_group,
// and two real uids of that group, A and B, call it with the binary's own
// client subcommands. Then the operators with no policy at all, with the
// daemon on a uid of its own.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// groupDaemon is a daemon whose socket is shared with a group, and two
// members of it.
type groupDaemon struct {
	*daemonProc
	group string
	gid   int
	a, b  member
}

// member is a uid of the socket group that runs the client subcommands.
type member struct {
	uid, gid int
	bin      string
}

func (m member) identity() string { return server.UnixIdentity(uint32(m.uid)) }

// existingGroup is a group of the host's group database for
// registrar.socket_group (serve looks the name up, so it must exist; the
// test creates none). nogroup (Debian) or nobody: the socket is in a
// temporary directory, and only the test's uids are given it.
func existingGroup(t *testing.T) (string, int) {
	t.Helper()
	for _, name := range []string{"nogroup", "nobody"} {
		if g, err := user.LookupGroup(name); err == nil {
			gid, err := strconv.Atoi(g.Gid)
			if err != nil {
				t.Fatal(err)
			}
			return name, gid
		}
	}
	t.Skip("no group nogroup or nobody on this host for registrar.socket_group")
	return "", 0
}

// startGroupDaemon picks two unused uids as members A and B (their
// primary group the socket's) and starts serve as root with
// registrar.socket_group and the lines of [registrar] extra returns for
// them.
func startGroupDaemon(t *testing.T, extra func(a, b member) string) *groupDaemon {
	t.Helper()
	needRoot(t, "the members run as two other uids")
	bin := buildBinary(t)
	group, gid := existingGroup(t)
	ids := unusedIDs(t, 2)
	g := &groupDaemon{group: group, gid: gid,
		a: member{uid: ids[0], gid: gid, bin: bin}, b: member{uid: ids[1], gid: gid, bin: bin}}
	d := startDaemon(t, fmt.Sprintf("socket_group = %q\n", group)+extra(g.a, g.b), "")
	g.daemonProc = d
	chmod(t, d.dir, 0o755)             // the members traverse it to run/ (0750, the group's)
	chmod(t, filepath.Dir(bin), 0o755) // and exec the binary
	fi, err := os.Stat(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || int(st.Gid) != gid {
		t.Fatalf("socket mode %v group %d, want 0660 and the group %s (%d)", fi.Mode().Perm(), st.Gid, group, gid)
	}
	return g
}

// cliAnswer is what `registrar-otel mint|deregister` printed, parsed.
type cliAnswer struct {
	code                         int
	outcome, registration        string
	roleID, secret               string // a mint's material
	errorID, reason              string // a refusal's
	status                       int    // a refusal's HTTP status
	refusedRegistration, request string
	stdout, stderr               string
}

var (
	cliOK      = regexp.MustCompile(`^(\S+) (\S+) \(request (\S+)\)\n`)
	cliRole    = regexp.MustCompile(`(?m)^  role_id: +(\S+)$`)
	cliSecret  = regexp.MustCompile(`(?m)^  wrapped_secret_id: +(\S+)$`)
	cliRefused = regexp.MustCompile(`^(?:mint|deregister): (\w+)(?:: (\w+)(?: \(\w+\))?)? \(permanent; HTTP (\d+); request ([^,)]+)(?:, registration ([^)]+))?\)\n`)
)

// call runs `registrar-otel <verb>` as m for the review component's
// instance on host, over the unix socket.
func (m member) call(t *testing.T, socket, verb, host string, instance int) cliAnswer {
	t.Helper()
	cmd := exec.Command(m.bin, verb, "--socket", socket, "--service-name", "review", "--host", host,
		"--instance", strconv.Itoa(instance), "--component", "review", "--timeout", "30s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.gid)}}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	a := cliAnswer{}
	a.code, a.stdout, a.stderr = runCmd(t, cmd)
	if mm := cliOK.FindStringSubmatch(a.stdout); a.code == exitOK && mm != nil {
		a.outcome, a.registration, a.request = mm[1], mm[2], mm[3]
		if r := cliRole.FindStringSubmatch(a.stdout); r != nil {
			a.roleID = r[1]
		}
		if s := cliSecret.FindStringSubmatch(a.stdout); s != nil {
			a.secret = s[1]
		}
	}
	if mm := cliRefused.FindStringSubmatch(a.stderr); a.code == exitPermanent && mm != nil {
		a.errorID, a.reason, a.request, a.refusedRegistration = mm[1], mm[2], mm[4], mm[5]
		a.status, _ = strconv.Atoi(mm[3])
	}
	return a
}

// refused reports whether a is a CallerNotPermitted refusal (HTTP 403)
// for reason, naming registration ("" for none).
func (a cliAnswer) refused(reason, registration string) bool {
	return a.code == exitPermanent && a.status == 403 && a.errorID == string(wire.CallerNotPermitted) &&
		a.reason == reason && a.refusedRegistration == registration
}

func (a cliAnswer) String() string {
	return fmt.Sprintf("exit %d\nstdout: %sstderr: %s", a.code, a.stdout, a.stderr)
}

// onlyRefusals checks that the audit store holds nothing of identity but
// calls intents and as many refused outcomes of reason naming
// registration.
func onlyRefusals(t *testing.T, d *daemonProc, identity string, calls int, reason, registration string) {
	t.Helper()
	var intents, refused int
	for _, r := range readAudit(t, d.auditDir) {
		if r.CallerIdentity != identity {
			continue
		}
		switch {
		case r.Phase == "intent":
			intents++
		case r.Phase == "outcome" && r.Outcome != nil && r.Outcome.Class == "refused" && r.Outcome.Reason == reason && r.RegistrationID == registration:
			refused++
		default:
			t.Errorf("a record of %s beyond its intents and %s refusals: %+v", identity, reason, r)
		}
	}
	if intents != calls || refused != calls {
		t.Fatalf("records of %s: %d intents and %d %s outcomes, want %d of each", identity, intents, refused, reason, calls)
	}
}

// TestEndToEndASocketGroupMemberWithNoPolicyIsRefused: with the socket
// shared with a group, a member that matches no caller policy is refused
// CallerNotPermitted no_policy (HTTP 403) on both verbs; the audit store
// holds its intents and refused outcomes and nothing else, and the
// registry holds nothing of it (the registrations gauge and the registry
// itself, through an online backup). Twice: with no policy at all (serve
// warns that the group's members will be refused, and root, an operator,
// is served), and with a policy naming only member A (A is served: the
// refusal is the policy table's, not the group's).
func TestEndToEndASocketGroupMemberWithNoPolicyIsRefused(t *testing.T) {
	buildBinary(t) // skip in -short mode here, not in each subtest
	needRoot(t, "the members run as two other uids")
	check := func(t *testing.T, g *groupDaemon, stranger member) {
		t.Helper()
		mint := stranger.call(t, g.socket, "mint", "h1", 1)
		dereg := stranger.call(t, g.socket, "deregister", "h1", 1)
		for verb, a := range map[string]cliAnswer{"mint": mint, "deregister": dereg} {
			if !a.refused("no_policy", "") {
				t.Fatalf("%s by uid %d, of no policy: %v\nwant exit 1, HTTP 403 CallerNotPermitted no_policy", verb, stranger.uid, a)
			}
		}
		onlyRefusals(t, g.daemonProc, stranger.identity(), 2, "no_policy", "")
		// Nobody else has called yet: the store holds those four alone.
		if records := readAudit(t, g.auditDir); len(records) != 4 {
			t.Fatalf("the audit store holds %d records, want the stranger's 4: %+v", len(records), records)
		}
		if got := sampleIn(t, g.scrape(), `registrar_registrations{component="review"}`); got != 0 {
			t.Fatalf("live registrations after the refused calls: %v, want 0", got)
		}
		if _, held := registrySnapshot(t, g.daemonProc); len(held) != 0 {
			t.Fatalf("the registry holds %v after the refused calls, want nothing", held)
		}
	}

	t.Run("no policy at all", func(t *testing.T) {
		g := startGroupDaemon(t, func(member, member) string { return "" })
		if !strings.Contains(g.logs.String(), `registrar.socket_group \"`+g.group+`\" lets the group's members call the daemon, but no caller policy can match them`) {
			t.Errorf("serve did not warn that no policy matches the group's members:\n%s", g.logs.String())
		}
		check(t, g, g.b)
		// The operators need no policy: root (this test) mints and
		// deregisters.
		root := wire.NewUnixClient(g.socket, wire.WithTimeout(e2eIODeadline))
		defer root.CloseIdleConnections()
		mintOKOn(t, root, "h1")
		if resp, err := root.Deregister(context.Background(), wire.DeregisterRequest{ServiceName: "review", Host: "h1", Instance: 1, Component: "review"}); err != nil || resp.Outcome != "removed" {
			t.Fatalf("root's deregister with no policy: %+v, %v", resp, err)
		}
	})

	t.Run("another member's policy", func(t *testing.T) {
		g := startGroupDaemon(t, func(a, _ member) string {
			return fmt.Sprintf("\n[registrar.callers.member-a]\nidentities = [%q]\n", a.identity())
		})
		check(t, g, g.b)
		if a := g.a.call(t, g.socket, "mint", "h2", 1); a.code != exitOK || a.outcome != "first_mint" {
			t.Fatalf("member A's mint under its own policy: %v", a)
		}
	})
}

// TestEndToEndASocketGroupMemberCannotTakeAnothersRegistration is the
// review's ownership attack by two members of the socket group under the
// catch-all policy (identity_prefixes = [""]): A mints; B's remint and
// deregister of A's registration are refused CallerNotPermitted not_owner
// (HTTP 403, naming the registration) and written as such, and A's
// registration is unchanged: still counted, still A's with its role in the
// registry, and A's secret still logs in. On the embedded backend "logs in"
// is VerifySecret (the backend's own check that a wrapped secret id is the
// registration's current, unexpired one: what a login with it would be
// judged by), asked of the registry through an online backup; a remint by
// B would have replaced the secret, a deregister removed it. Once a reload
// gives the policy scope_owner = "policy", B's remint succeeds with A's
// role (and A's secret no longer verifies: the check can tell), and B's
// deregister removes it.
func TestEndToEndASocketGroupMemberCannotTakeAnothersRegistration(t *testing.T) {
	g := startGroupDaemon(t, func(member, member) string { return "\n[registrar.callers.everyone]\nidentity_prefixes = [\"\"]\n" })
	first := g.a.call(t, g.socket, "mint", "h1", 7)
	if first.outcome != "first_mint" || first.roleID == "" || first.secret == "" {
		t.Fatalf("A's mint: %v", first)
	}
	id := first.registration
	for _, verb := range []string{"mint", "deregister"} {
		if a := g.b.call(t, g.socket, verb, "h1", 7); !a.refused("not_owner", id) {
			t.Fatalf("B's %s of A's registration: %v\nwant exit 1, HTTP 403 CallerNotPermitted not_owner naming %s", verb, a, id)
		}
	}
	onlyRefusals(t, g.daemonProc, g.b.identity(), 2, "not_owner", id)
	if got := sampleIn(t, g.scrape(), `registrar_registrations{component="review"}`); got != 1 {
		t.Fatalf("live review registrations after B's refused calls: %v, want 1", got)
	}
	verify := func(when, secret string, want bool) {
		t.Helper()
		reg, held := registrySnapshot(t, g.daemonProc)
		b, ok := held[id]
		if !ok || b.Owner != g.a.identity() || b.RoleID != first.roleID || len(held) != 1 {
			t.Fatalf("%s: the registry holds %+v, want only %s, A's (%s) with role %s", when, held, id, g.a.identity(), first.roleID)
		}
		if valid, err := reg.VerifySecret(id, secret, time.Now()); err != nil || valid != want {
			t.Fatalf("%s: the secret verifies: %v (%v), want %v", when, valid, err, want)
		}
	}
	verify("after B's refused calls, A's secret", first.secret, true)

	g.rewrite(`identity_prefixes = [""]`, "identity_prefixes = [\"\"]\nscope_owner = \"policy\"", 0o600)
	if code, out, errOut := g.run("reload", "--config", g.config); code != exitOK {
		t.Fatalf("reload: exit %d\n%s\n%s", code, out, errOut)
	}
	remint := g.b.call(t, g.socket, "mint", "h1", 7)
	if remint.outcome != "idempotent_remint" || remint.registration != id || remint.roleID != first.roleID {
		t.Fatalf("B's remint under scope_owner = \"policy\": %v\nwant idempotent_remint of %s with role %s", remint, id, first.roleID)
	}
	verify("after B's remint under scope_owner = \"policy\", A's secret", first.secret, false)
	if a := g.b.call(t, g.socket, "deregister", "h1", 7); a.code != exitOK || a.outcome != "removed" || a.registration != id {
		t.Fatalf("B's deregister under scope_owner = \"policy\": %v", a)
	}
	if got := sampleIn(t, g.scrape(), `registrar_registrations{component="review"}`); got != 0 {
		t.Fatalf("live review registrations after B's deregister: %v, want 0", got)
	}
}

// TestEndToEndTheOperatorsNeedNoPolicy: with no caller policy configured,
// the daemon running as a uid of its own (65534), that uid (with the
// binary's client subcommands) and root (with the wire client) both mint
// and deregister, root a service no policy could have named for it.
// (Root on a daemon running as root is TestEndToEndMintDeregisterScan's
// and the no-policy subtest above; the daemon's uid other than root's is
// here.)
func TestEndToEndTheOperatorsNeedNoPolicy(t *testing.T) {
	p, dir := startDaemonAs(t)
	socket, _, _ := daemonPaths(dir)
	self := member{uid: daemonUID, gid: daemonUID, bin: filepath.Join(dir, "registrar-otel")}
	if a := self.call(t, socket, "mint", "h1", 1); a.code != exitOK || a.outcome != "first_mint" {
		t.Fatalf("the daemon's uid's mint with no policy: %v", a)
	}
	if a := self.call(t, socket, "deregister", "h1", 1); a.code != exitOK || a.outcome != "removed" {
		t.Fatalf("the daemon's uid's deregister with no policy: %v", a)
	}
	root := wire.NewUnixClient(socket, wire.WithTimeout(e2eIODeadline))
	defer root.CloseIdleConnections()
	ctx := context.Background()
	req := reviewMint("h2", 1)
	req.ServiceName, req.Spec.ServiceName = "payments", "payments"
	if resp, err := root.Mint(ctx, req); err != nil || resp.Outcome != "first_mint" {
		t.Fatalf("root's mint with no policy: %+v, %v", resp, err)
	}
	if resp, err := root.Deregister(ctx, wire.DeregisterRequest{ServiceName: "payments", Host: "h2", Instance: 1, Component: "review"}); err != nil || resp.Outcome != "removed" {
		t.Fatalf("root's deregister with no policy: %+v, %v", resp, err)
	}
	p.terminate(t, "daemon")
}
