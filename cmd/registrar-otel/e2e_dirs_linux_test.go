package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// attackerUID is the other local uid of issue 27's attacks on the
// directories: it is neither root nor the daemon's.
const attackerUID = 4242

// Issue 27, item 3, at start: each of the three private directories owned
// by another uid (at a mode that lets the daemon in, 0755) is refused:
// serve exits 2 naming the key and the directory, and config check reports
// it under the same key, also exit 2.
func TestServeAndConfigCheckRefuseAForeignOwnedPrivateDirectory(t *testing.T) {
	needRoot(t, "chown to another uid and running as one")
	bin := buildBinary(t)
	for _, c := range []struct{ key, dir string }{
		{"registrar.audit_record_dir", "audit"},
		{"registrar.state_dir", "lib"},
		{"registrar.socket_path", "run"},
	} {
		t.Run(c.key, func(t *testing.T) {
			dir := shortTempDir(t)
			theirs := mkdirOwned(t, filepath.Join(dir, c.dir), 0o755, attackerUID)
			cfg := writeConfig(t, dir, serveDoc(dir, "", ""), 0o600)
			want := fmt.Sprintf("is owned by uid %d, not by this user (0) or root", attackerUID)
			// serve runs as root here: config check judges for root
			// too, whatever unit this host may have installed.
			for _, args := range [][]string{{"serve", "--config", cfg}, {"config", "check", "--config", cfg, "--user", "root"}} {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				var out bytes.Buffer
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Stdout, cmd.Stderr = &out, &out
				err := cmd.Run()
				timedOut := ctx.Err() != nil
				cancel()
				ee, ok := err.(*exec.ExitError)
				if timedOut || !ok || ee.ExitCode() != 2 {
					t.Fatalf("%v with %s of uid %d: %v, want exit 2\n%s", args[:1], theirs, attackerUID, err, out.String())
				}
				for _, s := range []string{c.key, theirs, want} {
					if !strings.Contains(out.String(), s) {
						t.Errorf("%v output lacks %q:\n%s", args[:1], s, out.String())
					}
				}
			}
		})
	}
}

// unsafeGauge reads registrar_directory_unsafe{directory=dir} from an
// exposition, -1 when absent.
func unsafeGauge(exposition, dir string) float64 {
	re := regexp.MustCompile(`(?m)^registrar_directory_unsafe\{[^}]*directory="` + dir + `"[^}]*\} ([0-9.e+-]+)$`)
	m := re.FindStringSubmatch(exposition)
	if m == nil {
		return -1
	}
	var v float64
	fmt.Sscan(m[1], &v)
	return v
}

// waitGauge polls the daemon's /metrics (bounded: the tick runs every
// 100 ms) until registrar_directory_unsafe{directory=dir} is want.
func (d *daemonProc) waitGauge(dir string, want float64) {
	d.t.Helper()
	var got float64
	if !poll(30*time.Second, func() bool { got = unsafeGauge(d.scrape(), dir); return got == want }) {
		d.t.Fatalf("registrar_directory_unsafe{directory=%q} still %v 30 s on, want %v\nlog:\n%s", dir, got, want, d.logs.String())
	}
}

// Issue 27, item 3, at runtime, for each directory: `chmod 0777` while
// serving is found by the tick through the open descriptor — the gauge
// turns 1 for that directory, one ERROR line names its key, a mint is
// refused AuditUnwritable and the store reads unwritable — and `chmod 0700`
// puts everything back without a restart.
func TestALoosenedPrivateDirectoryIsFoundOnTheTickAndRecovers(t *testing.T) {
	d := startDaemon(t, "maintenance_interval_ms = 100\n", "")
	caller := wire.NewUnixClient(d.socket, wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
	mintOK(t, caller)
	for i, c := range []struct{ label, key, path string }{
		{"audit", "registrar.audit_record_dir", d.auditDir},
		{"state", "registrar.state_dir", filepath.Join(d.dir, "lib")},
		{"socket", "registrar.socket_path", filepath.Dir(d.socket)},
	} {
		for _, l := range []string{"audit", "state", "socket"} {
			if got := unsafeGauge(d.scrape(), l); got != 0 {
				t.Fatalf("before the chmod of %s: registrar_directory_unsafe{directory=%q} = %v, want 0", c.path, l, got)
			}
		}
		chmod(t, c.path, 0o777)
		d.waitGauge(c.label, 1)
		exp := d.scrape()
		if !strings.Contains(exp, `registrar_audit_store_state{`) || !regexp.MustCompile(`(?m)^registrar_audit_store_state\{[^}]*state="unwritable"[^}]*\} 1$`).MatchString(exp) {
			t.Errorf("%s at 0777: the audit store state is not unwritable", c.label)
		}
		lines := d.logs.Lines("level=ERROR", "is no longer private: appends fail until it is put right", c.key+"="+c.path)
		if len(lines) != 1 {
			t.Errorf("%s at 0777: ERROR lines %q, want one naming %s=%s", c.label, lines, c.key, c.path)
		}
		req := reviewMint(fmt.Sprintf("loose-%d", i), 1)
		res, err := caller.Mint(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.OK() || res.ErrorID != wire.RegistrarUnavailable || res.Reason != "AuditUnwritable" {
			t.Errorf("a mint with %s at 0777: %+v, want RegistrarUnavailable AuditUnwritable", c.path, res)
		}
		chmod(t, c.path, 0o700)
		d.waitGauge(c.label, 0)
		req.Host = fmt.Sprintf("fixed-%d", i)
		if res, err := caller.Mint(context.Background(), req); err != nil || !res.OK() {
			t.Fatalf("a mint after %s was put right: %+v, %v; want it recorded", c.path, res, err)
		}
	}
	d.stop()
}

// startRotatingDaemonAs starts serve as the daemon uid (65534) with the
// smallest audit files, so a few hundred mints rotate generations, every
// path under a directory that uid owns.
func startRotatingDaemonAs(t *testing.T) (p *loggedProc, dir, socket, auditDir string) {
	t.Helper()
	needRoot(t, "chown to another uid and running as one")
	dir, own := daemonUIDDir(t)
	socket, _, auditDir = daemonPaths(dir)
	cfg := writeConfig(t, dir, serveDoc(dir, "audit_max_file_bytes = 65536\nrate_limit_admission_burst = 100000", ""), 0o644)
	p, _ = startLogged(t, "daemon", asDaemonUID(exec.Command(own, "serve", "--config", cfg)), "registrar-otel serving")
	return p, dir, socket, auditDir
}

// storeScan is the part of `audit scan --json` scanStoreJSON reads.
type storeScan struct {
	Anomalies      bool `json:"anomalies"`
	StoreAnomalies []struct {
		Kind, File, Detail string
	} `json:"store_anomalies"`
}

// scanStoreJSON runs `audit scan --json` on dir, as root or (asDaemon) as the
// daemon's uid, and returns the exit status and the decoded report.
func scanStoreJSON(t *testing.T, bin, dir string, asDaemon bool) (int, storeScan) {
	t.Helper()
	cmd := exec.Command(bin, "audit", "scan", "--dir", dir, "--json")
	if asDaemon {
		asDaemonUID(cmd)
	}
	code, out, errOut := runCmd(t, cmd)
	var rep storeScan
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit scan --json: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	return code, rep
}

// The attack of issue 27, item 3, on the evidence: the daemon (uid 65534)
// rotated generations; while the directory was open to every uid another
// uid deleted a generation and wrote a forged one in its place (a
// well-formed first_mint for uid 1000). `audit scan --json` said
// anomalies: false. It now reports the forged file, by name and path, as
// wrong_owner, exit 1, whether root or the daemon's uid scans.
func TestAuditScanReportsAForgedGenerationWrittenByAnotherUID(t *testing.T) {
	p, dir, socket, auditDir := startRotatingDaemonAs(t)
	bin := filepath.Join(dir, "registrar-otel")
	caller := wire.NewUnixClient(socket, wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
	var gens []string
	for i := 0; len(gens) < 2; i++ {
		if i == 2000 {
			t.Fatalf("no two rotated generations after %d mints", i)
		}
		req := reviewMint(fmt.Sprintf("h%d", i), 1)
		if res, err := caller.Mint(context.Background(), req); err != nil || !res.OK() {
			t.Fatalf("mint %d: %+v, %v", i, res, err)
		}
		gens, _ = filepath.Glob(filepath.Join(auditDir, "registrar-audit-*-*.jsonl"))
	}
	p.terminate(t, "daemon")
	for _, asDaemon := range []bool{false, true} {
		if code, rep := scanStoreJSON(t, bin, auditDir, asDaemon); code != 0 || rep.Anomalies {
			t.Fatalf("the daemon's own store (scanned as daemon uid: %v): exit %d, %+v; want clean", asDaemon, code, rep)
		}
	}

	// The forgery, by the other uid, through a directory left open to all.
	victim := gens[len(gens)-1]
	at := time.Now().UTC().Add(-time.Minute)
	forged := forgedMint(t, at)
	// Open to all: the record directory, and its parent for traversal.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o755}, {auditDir, 0o777}} {
		chmod(t, d.path, d.mode)
	}
	attacker := exec.Command("/bin/sh", "-c", `rm -f "$1" && cat > "$1"`, "sh", victim)
	attacker.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: attackerUID, Gid: attackerUID}}
	attacker.Stdin = bytes.NewReader(forged)
	if out, err := attacker.CombinedOutput(); err != nil {
		t.Fatalf("the attacker's forgery: %v\n%s", err, out)
	}
	for _, d := range []string{auditDir, dir} { // the modes put right: only the owner tells
		chmod(t, d, 0o700)
	}

	for _, asDaemon := range []bool{false, true} {
		code, rep := scanStoreJSON(t, bin, auditDir, asDaemon)
		if code != auditScanAnomalies || !rep.Anomalies {
			t.Errorf("forged store scanned as daemon uid %v: exit %d anomalies %v, want 1 and true", asDaemon, code, rep.Anomalies)
		}
		found := false
		for _, a := range rep.StoreAnomalies {
			if a.Kind == string(audit.AnomalyWrongOwner) && a.File == filepath.Base(victim) &&
				strings.Contains(a.Detail, victim+fmt.Sprintf(" is owned by uid %d", attackerUID)) {
				found = true
			}
		}
		if !found {
			t.Errorf("scanned as daemon uid %v: store anomalies %+v, want wrong_owner naming %s", asDaemon, rep.StoreAnomalies, victim)
		}
	}
}

// forgedMint is a well-formed intent and first_mint outcome for uid 1000:
// records that pass every line rule.
func forgedMint(t *testing.T, at time.Time) []byte {
	t.Helper()
	in := &audit.Record{Phase: audit.PhaseIntent, TS: at, RequestID: "forged-0001", Verb: vocab.Mint,
		CallerIdentity: "unix-peer:uid=1000", Requested: &audit.Requested{ServiceName: "review", Host: "forged", Instance: 1}}
	out := *in
	out.Phase, out.TS, out.RegistrationID = audit.PhaseOutcome, at.Add(time.Millisecond), "forged-review-001"
	out.Outcome = &audit.Outcome{Class: vocab.ClassFirstMint}
	var b []byte
	for _, r := range []*audit.Record{in, &out} {
		line, err := audit.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, line...)
	}
	return b
}
