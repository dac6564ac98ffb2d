package audit_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

func gen(stamp string, seq string) string { return "registrar-audit-" + stamp + "-" + seq + ".jsonl" }

func skipped(rep *audit.Report) map[string]string {
	out := map[string]string{}
	for _, s := range rep.Skipped {
		out[s.Name] = s.Reason
	}
	return out
}

func kinds(rep *audit.Report) []string {
	var out []string
	for _, a := range rep.StoreAnomalies {
		out = append(out, string(a.Kind)+" "+a.File)
	}
	return out
}

func TestScanListsEveryFileItDidNotReadWithTheReason(t *testing.T) {
	dir := writeStore(t, line(t, intent("a"), now.Add(-time.Hour))+line(t, outcome("a", audit.Outcome{Class: audit.ClassFirstMint}), now.Add(-time.Hour)))
	must(t, os.WriteFile(filepath.Join(dir, audit.ActiveFileName+".1"), []byte("rotated by logrotate\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	must(t, os.Mkdir(filepath.Join(dir, gen("20260823T000000Z", "000001")), 0o700)) // a directory with a store name
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "elsewhere")))

	rep := scan(t, dir)
	want := map[string]string{
		audit.ActiveFileName + ".1":       audit.SkipUnrecognisedName,
		"notes.txt":                       audit.SkipUnrecognisedName,
		"sub":                             audit.SkipUnrecognisedName,
		gen("20260823T000000Z", "000001"): audit.SkipNotRegular,
		"elsewhere":                       audit.SkipSymlink,
	}
	got := skipped(rep)
	if len(got) != len(want) {
		t.Errorf("skipped %v, want %v", got, want)
	}
	for name, reason := range want {
		if got[name] != reason {
			t.Errorf("skipped[%s] = %q, want %q", name, got[name], reason)
		}
	}
	// Listing is not an anomaly: the records in the active file are clean.
	if rep.Anomalies() {
		t.Errorf("anomalies %v for a clean store with unrelated files beside it", kinds(rep))
	}
}

func TestScanReportsRecordsThatStopWithoutAnActiveFile(t *testing.T) {
	for name, setup := range map[string]func(dir string){
		"active file deleted": func(dir string) {
			must(t, os.Remove(filepath.Join(dir, audit.ActiveFileName)))
		},
		"active file renamed away": func(dir string) {
			must(t, os.Rename(filepath.Join(dir, audit.ActiveFileName), filepath.Join(dir, audit.ActiveFileName+".1")))
		},
		"active file replaced by a symlink": func(dir string) {
			must(t, os.Remove(filepath.Join(dir, audit.ActiveFileName)))
			must(t, os.Symlink("/dev/null", filepath.Join(dir, audit.ActiveFileName)))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeStore(t, line(t, intent("a"), now.Add(-time.Hour)))
			g := gen(now.Add(-2*time.Hour).UTC().Format("20060102T150405Z"), "000007")
			must(t, os.WriteFile(filepath.Join(dir, g), []byte(line(t, outcome("z", audit.Outcome{Class: audit.ClassFirstMint}), now.Add(-2*time.Hour))), 0o600))
			setup(dir)
			rep := scan(t, dir)
			if got := kinds(rep); len(got) != 1 || got[0] != "missing_active_file "+audit.ActiveFileName {
				t.Fatalf("store anomalies %v, want missing_active_file", got)
			}
			if !strings.Contains(rep.StoreAnomalies[0].Detail, g) || !rep.Anomalies() {
				t.Errorf("detail %q does not name the last generation %s, or Anomalies() false", rep.StoreAnomalies[0].Detail, g)
			}
		})
	}
	// An empty directory is not an anomaly: nothing was ever recorded there.
	empty := filepath.Join(t.TempDir(), "audit")
	must(t, os.Mkdir(empty, 0o700))
	if rep := scan(t, empty); rep.Anomalies() {
		t.Errorf("empty directory: %v", kinds(rep))
	}
}

func TestScanReportsAGapInTheGenerationNumbers(t *testing.T) {
	cases := []struct {
		name  string
		gens  []string
		wantN int
	}{
		{"consecutive", []string{gen("20260823T100000Z", "000004"), gen("20260823T110000Z", "000005"), gen("20260823T110000Z", "000006")}, 0},
		{"one missing", []string{gen("20260823T100000Z", "000004"), gen("20260823T120000Z", "000006")}, 1},
		{"two gaps", []string{gen("20260823T100000Z", "000001"), gen("20260823T100001Z", "000003"), gen("20260823T100002Z", "000004"), gen("20260823T100003Z", "000009")}, 2},
		{"backwards", []string{gen("20260823T100000Z", "000004"), gen("20260823T100001Z", "000002")}, 1},
		{"wrap after 999999", []string{gen("20260823T100000Z", "999999"), gen("20260823T100001Z", "000000")}, 0},
		// Stores written before generation numbers: 0 under each new stamp.
		{"older naming", []string{gen("20260823T100000Z", "000000"), gen("20260823T100000Z", "000001"), gen("20260823T110000Z", "000000")}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeStore(t, "")
			for _, g := range tc.gens {
				must(t, os.WriteFile(filepath.Join(dir, g), nil, 0o600))
			}
			rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: time.Date(2026, 8, 24, 0, 0, 0, 0, time.UTC)})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(rep.StoreAnomalies); got != tc.wantN || rep.Anomalies() != (tc.wantN > 0) {
				t.Fatalf("anomalies %v, want %d generation gaps", kinds(rep), tc.wantN)
			}
			for _, a := range rep.StoreAnomalies {
				if a.Kind != audit.AnomalyGenerationGap {
					t.Errorf("kind %s", a.Kind)
				}
			}
		})
	}
}

// The store numbers its generations so that a deleted one shows: rotate a
// real store through several generations, delete one from the middle.
func TestAGenerationDeletedFromARealStoreIsAGap(t *testing.T) {
	clock := &fixedClock{t: t0}
	s, dir := openStore(t, audit.Options{MaxFileBytes: 1024, MaxRetainedFiles: 20, Now: clock.Now}, audit.TestHooks{MinFileBytes: 1024})
	for i := range 40 {
		clock.Set(t0.Add(time.Duration(i) * 7 * time.Second)) // new stamps: the sequence must not restart
		appendOK(t, s, intent("r"+string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	gens, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*-*.jsonl"))
	if len(gens) < 4 {
		t.Fatalf("only %d generations", len(gens))
	}
	scanAt := func() *audit.Report {
		rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := scanAt(); len(rep.StoreAnomalies) != 0 {
		t.Fatalf("a store that only rotated and trimmed shows %v", kinds(rep))
	}
	must(t, os.Remove(gens[2]))
	rep := scanAt()
	if got := kinds(rep); len(got) != 1 || got[0] != "generation_gap "+filepath.Base(gens[3]) {
		t.Fatalf("after deleting %s: %v, want one gap before %s", filepath.Base(gens[2]), got, filepath.Base(gens[3]))
	}
}

// An unreadable store file is listed, reported, and does not stop the scan
// of the others. Root reads everything, so as root the check runs in a
// child process as the unprivileged user nobody (uid 65534).
func TestScanListsAnUnreadableFile(t *testing.T) {
	if dir := os.Getenv("AUDIT_SCAN_UNREADABLE_DIR"); dir != "" {
		rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		checkUnreadable(t, rep)
		return
	}
	base, err := os.MkdirTemp("", "i11-unreadable-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	dir := filepath.Join(base, "audit")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, audit.ActiveFileName), []byte(line(t, intent("a"), now.Add(-time.Hour))+line(t, outcome("a", audit.Outcome{Class: audit.ClassFirstMint}), now.Add(-time.Hour))), 0o644))
	locked := gen(now.Add(-2*time.Hour).UTC().Format("20060102T150405Z"), "000001")
	must(t, os.WriteFile(filepath.Join(dir, locked), []byte("x\n"), 0o000))
	if os.Geteuid() != 0 {
		rep := scan(t, dir)
		checkUnreadable(t, rep)
		return
	}
	// Root: copy this test binary where nobody can run it, and run this
	// test there as nobody.
	self, err := os.Executable()
	must(t, err)
	bin := filepath.Join(base, "audit.test")
	copyFile(t, self, bin)
	cmd := exec.Command(bin, "-test.run=^TestScanListsAnUnreadableFile$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "AUDIT_SCAN_UNREADABLE_DIR="+dir)
	cmd.Dir = base
	cmd.SysProcAttr = nobody()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot run the check as user nobody here (%v): an unreadable file cannot be made for root", err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestScanListsAnUnreadableFile") {
		t.Fatalf("the scan as nobody: %v\n%s", err, out)
	}
}

func checkUnreadable(t *testing.T, rep *audit.Report) {
	t.Helper()
	locked := ""
	for _, s := range rep.Skipped {
		if strings.HasPrefix(s.Reason, "unreadable: ") && strings.Contains(s.Reason, "permission denied") {
			locked = s.Name
		}
	}
	if locked == "" {
		t.Fatalf("skipped %+v, want the locked generation listed as unreadable", rep.Skipped)
	}
	if got := kinds(rep); len(got) != 1 || got[0] != "unreadable_file "+locked {
		t.Fatalf("anomalies %v, want unreadable_file %s", got, locked)
	}
	if rep.Records[audit.PhaseIntent-1] != 1 || rep.Records[audit.PhaseOutcome-1] != 1 {
		t.Errorf("the readable active file was not scanned: %v", rep.Records)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	must(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	must(t, err)
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	must(t, dst.Close())
}
