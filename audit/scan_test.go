//go:build unix

package audit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// now is the scan instant of these tests: well after t0.
var now = t0.Add(10 * time.Minute)

// line is the serialized line of r with its ts moved to at.
func line(t testing.TB, r *audit.Record, at time.Time) string {
	t.Helper()
	r.TS = at
	return string(mustMarshal(t, r))
}

func scan(t *testing.T, dir string) *audit.Report {
	t.Helper()
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return rep
}

func TestScanClassifiesEachLine(t *testing.T) {
	old := now.Add(-2 * time.Minute) // older than the 60 s grace
	fresh := now.Add(-10 * time.Second)
	paired := line(t, intent("p1"), old) + line(t, outcome("p1", audit.Outcome{Class: vocab.ClassFirstMint}), old)
	cases := []struct {
		name      string
		content   string
		unpaired  uint64
		malformed uint64
		rule      audit.Rule
	}{
		{"a paired intent and outcome", paired, 0, 0, ""},
		{"a crash mid-mint: intent older than the grace", paired + line(t, intent("c1"), old), 1, 0, ""},
		{"a fresh intent inside the grace", paired + line(t, intent("c1"), fresh), 0, 0, ""},
		{"an outcome alone (its intent trimmed)", line(t, outcome("o1", audit.Outcome{Class: vocab.ClassFirstMint}), old), 0, 0, ""},
		{"a torn final line", paired + goodIntent[:50], 0, 1, audit.RuleTornFinalLine},
		{"invalid JSON", paired + "{not json}\n", 0, 1, audit.RuleInvalidJSON},
		{"an unknown key", paired + sub(t, goodLimited, `"count":3`, `"count":3,"extra":true`) + "\n", 0, 1, audit.RuleUnknownKey},
		{"a wrong version", paired + sub(t, goodLimited, `"record_version":1`, `"record_version":2`) + "\n", 0, 1, audit.RuleWrongVersion},
		{"a +00:00 timestamp", paired + sub(t, goodLimited, `"ts":"2026-08-23T12:35:57.789Z"`, `"ts":"2026-08-23T12:35:57.789+00:00"`) + "\n", 0, 1, audit.RuleNonCanonicalTimestamp},
		{"a phase inconsistency", paired + sub(t, goodLimited, `"verb"`, `"request_id":"z","verb"`) + "\n", 0, 1, audit.RulePhaseInconsistency},
		{"a duplicate intent request_id, paired", paired + line(t, intent("p1"), old), 0, 1, audit.RuleDuplicateRequestID},
		{"a duplicate outcome request_id", paired + line(t, outcome("p1", audit.Outcome{Class: vocab.ClassFirstMint}), old), 0, 1, audit.RuleDuplicateRequestID},
		{"a duplicate never hides an unpaired intent", line(t, intent("d1"), old) + line(t, intent("d1"), old), 1, 1, audit.RuleDuplicateRequestID},
		{"three intents, no outcome", line(t, intent("d1"), old) + line(t, intent("d1"), old) + line(t, intent("d1"), old), 1, 2, audit.RuleDuplicateRequestID},
		{"an empty line", paired + "\n", 0, 1, audit.RuleInvalidJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := scan(t, writeStore(t, tc.content))
			if rep.IntentWithoutOutcome != tc.unpaired || rep.MalformedRecords != tc.malformed {
				t.Fatalf("got intent_without_outcome %d, malformed %d (%+v); want %d, %d",
					rep.IntentWithoutOutcome, rep.MalformedRecords, rep.Malformed, tc.unpaired, tc.malformed)
			}
			if tc.rule != "" && (len(rep.Malformed) == 0 || rep.Malformed[0].Rule != tc.rule) {
				t.Errorf("got malformed %+v, want rule %s", rep.Malformed, tc.rule)
			}
			if got := rep.Anomalies(); got != (tc.unpaired+tc.malformed > 0) {
				t.Errorf("Anomalies() = %v, want %v", got, !got)
			}
		})
	}
}

func TestScanReportsLocations(t *testing.T) {
	old := now.Add(-time.Hour)
	content := line(t, intent("a"), old) + "garbage\n" + line(t, intent("b"), old)
	rep := scan(t, writeStore(t, content))
	if len(rep.Malformed) != 1 || rep.Malformed[0].File != audit.ActiveFileName || rep.Malformed[0].Line != 2 {
		t.Errorf("got malformed %+v, want %s line 2", rep.Malformed, audit.ActiveFileName)
	}
	if len(rep.Unpaired) != 2 || rep.Unpaired[0].RequestID != "a" || rep.Unpaired[1].Line != 3 {
		t.Errorf("got unpaired %+v, want a (line 1) then b (line 3)", rep.Unpaired)
	}
}

// TestScanCountedRecords is seed 002's reader classification: counted
// records raise neither signal, while a crash mid-mint and an unparseable
// line are each still counted by the right one.
func TestScanCountedRecords(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	const floods = 50
	for i := range floods {
		r := limited(vocab.Bucket(i%2), uint64(i+1))
		r.TS = now.Add(-time.Duration(floods-i) * time.Minute)
		r.WindowStart, r.WindowEnd = r.TS.Add(-time.Minute), r.TS
		if i%7 == 0 {
			r.CallerIdentity = overLimitedCaller // truncated counted records too
		}
		appendOK(t, s, r)
	}
	rep := scan(t, dir)
	if rep.IntentWithoutOutcome != 0 || rep.MalformedRecords != 0 || rep.Anomalies() {
		t.Fatalf("counted records alone: got intent_without_outcome %d, malformed %d (%+v); want 0, 0",
			rep.IntentWithoutOutcome, rep.MalformedRecords, rep.Malformed)
	}
	var want [vocab.NumBuckets]audit.LimitedSummary
	for i := range floods {
		want[i%2].Records++
		want[i%2].Count += uint64(i + 1)
	}
	if rep.Limited != want {
		t.Errorf("got limited summary %+v, want %+v", rep.Limited, want)
	}

	// Now a genuine crash mid-mint and an unparseable line among them.
	crash := intent("crash")
	crash.TS = now.Add(-5 * time.Minute)
	appendOK(t, s, crash)
	f, err := os.OpenFile(filepath.Join(dir, audit.ActiveFileName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{\"record_version\":1,\"phase\":\"limited\",\x00garbage\n")
	f.Close()
	r := limited(vocab.Admission, 9)
	r.TS = now.Add(-time.Minute)
	appendOK(t, s, r)

	rep = scan(t, dir)
	if rep.IntentWithoutOutcome != 1 || rep.MalformedRecords != 1 || rep.Unpaired[0].RequestID != "crash" {
		t.Errorf("got intent_without_outcome %d (%+v), malformed %d (%+v); want 1 (crash), 1",
			rep.IntentWithoutOutcome, rep.Unpaired, rep.MalformedRecords, rep.Malformed)
	}
	if rep.MalformedByRule[audit.RuleDuplicateRequestID] != 0 || rep.MalformedByRule[audit.RuleMissingField] != 0 {
		t.Errorf("counted records raised %v", rep.MalformedByRule)
	}
}

func TestScanWindow(t *testing.T) {
	dir := writeStore(t, line(t, intent("ancient"), now.Add(-31*24*time.Hour))+
		line(t, limited(vocab.Admission, 4), now.Add(-40*24*time.Hour)))
	// A generation rotated before the window is not even read.
	oldGen := "registrar-audit-20200101T000000Z-000000.jsonl"
	must(t, os.WriteFile(filepath.Join(dir, oldGen), []byte("garbage\n"), 0o600))
	// One rotated inside it is.
	newGen := "registrar-audit-" + now.Add(-time.Hour).UTC().Format("20060102T150405Z") + "-000000.jsonl"
	must(t, os.WriteFile(filepath.Join(dir, newGen), []byte(line(t, intent("recent"), now.Add(-2*time.Hour))), 0o600))

	rep := scan(t, dir)
	if rep.IntentWithoutOutcome != 1 || rep.Unpaired[0].RequestID != "recent" || rep.MalformedRecords != 0 {
		t.Errorf("got %d unpaired %+v, %d malformed; want only \"recent\"", rep.IntentWithoutOutcome, rep.Unpaired, rep.MalformedRecords)
	}
	if rep.Limited[vocab.Admission].Records != 0 {
		t.Errorf("a limited record older than the window was counted: %+v", rep.Limited)
	}
	if want := []string{newGen, audit.ActiveFileName}; strings.Join(rep.Files, ",") != strings.Join(want, ",") {
		t.Errorf("got files %v, want %v", rep.Files, want)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Name != oldGen {
		t.Errorf("got skipped %+v, want %s", rep.Skipped, oldGen)
	}
}

func TestScanPairsAcrossGenerations(t *testing.T) {
	dir := writeStore(t, line(t, outcome("x", audit.Outcome{Class: vocab.ClassFirstMint}), now.Add(-time.Minute*2)))
	gen := "registrar-audit-" + now.Add(-time.Minute*3).UTC().Format("20060102T150405Z") + "-000000.jsonl"
	must(t, os.WriteFile(filepath.Join(dir, gen), []byte(line(t, intent("x"), now.Add(-time.Minute*4))), 0o600))
	if rep := scan(t, dir); rep.IntentWithoutOutcome != 0 || rep.MalformedRecords != 0 {
		t.Errorf("got %+v, want the intent paired with the next file's outcome", rep)
	}
}

func TestScanNeverFollowsSymlinks(t *testing.T) {
	base := t.TempDir()
	dir := writeStore(t, line(t, intent("a"), now.Add(-time.Hour)))
	must(t, os.Symlink(dir, filepath.Join(base, "link")))
	_, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: filepath.Join(base, "link"), Now: now})
	if !errors.Is(err, audit.ErrUnsafeStore) {
		t.Errorf("Scan of a symlinked directory = %v, want ErrUnsafeStore", err)
	}

	// A symlinked generation is skipped and reported, not read.
	outside := filepath.Join(base, "outside.jsonl")
	must(t, os.WriteFile(outside, []byte("garbage\n"), 0o600))
	name := "registrar-audit-" + now.UTC().Format("20060102T150405Z") + "-000000.jsonl"
	must(t, os.Symlink(outside, filepath.Join(dir, name)))
	rep := scan(t, dir)
	if rep.MalformedRecords != 0 || len(rep.Skipped) != 1 || rep.Skipped[0].Name != name {
		t.Errorf("got malformed %d, skipped %+v; want the symlink skipped", rep.MalformedRecords, rep.Skipped)
	}
}

func TestScanUnreadableStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o600))
	for name, dir := range map[string]string{
		"missing":       filepath.Join(t.TempDir(), "nope"),
		"not a dir":     file,
		"no dir at all": "",
	} {
		t.Run(name, func(t *testing.T) {
			if rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now}); err == nil {
				t.Errorf("Scan = %+v, nil; want an error", rep)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := audit.Scan(ctx, audit.ScanOptions{Dir: writeStore(t, goodIntent+"\n"), Now: now}); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestScanSkipsOversizedLinesWithoutHoldingThem scans a 16 MiB line: it
// counts once, the lines around it are read normally, and the scan's
// allocations stay far below the line's size.
func TestScanSkipsOversizedLinesWithoutHoldingThem(t *testing.T) {
	const huge = 16 << 20
	old := now.Add(-time.Hour)
	content := line(t, intent("a"), old) + strings.Repeat("x", huge) + "\n" + line(t, outcome("a", audit.Outcome{Class: vocab.ClassFirstMint}), old) +
		strings.Repeat("y", huge) // and an oversized torn final line
	dir := writeStore(t, content)
	content = ""

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep := scan(t, dir)
	runtime.ReadMemStats(&after)

	if rep.MalformedRecords != 2 || rep.MalformedByRule[audit.RuleOversizedLine] != 2 || rep.IntentWithoutOutcome != 0 {
		t.Fatalf("got %+v, want two oversized lines and the pair around them", rep)
	}
	if rep.Malformed[0].Line != 2 || rep.Malformed[1].Line != 4 {
		t.Errorf("got malformed at %+v, want lines 2 and 4", rep.Malformed)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("scan allocated %d bytes for a %d-byte line; want under 1 MiB", alloc, huge)
	}
}

func TestScanBoundsItsLists(t *testing.T) {
	var b strings.Builder
	for i := range 250 {
		b.WriteString(line(t, intent(fmt.Sprintf("q%03d", i)), now.Add(-time.Hour)))
		b.WriteString("bad\n")
	}
	rep := scan(t, writeStore(t, b.String()))
	if rep.IntentWithoutOutcome != 250 || rep.MalformedRecords != 250 {
		t.Errorf("got %d unpaired, %d malformed; want 250 each", rep.IntentWithoutOutcome, rep.MalformedRecords)
	}
	if len(rep.Unpaired) != audit.MaxReportedLines || len(rep.Malformed) != audit.MaxReportedLines || rep.Unpaired[0].RequestID != "q000" {
		t.Errorf("got lists of %d and %d (first %+v), want %d each, oldest first", len(rep.Unpaired), len(rep.Malformed), rep.Unpaired[0], audit.MaxReportedLines)
	}
}

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
	dir := writeStore(t, line(t, intent("a"), now.Add(-time.Hour))+line(t, outcome("a", audit.Outcome{Class: vocab.ClassFirstMint}), now.Add(-time.Hour)))
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
			must(t, os.WriteFile(filepath.Join(dir, g), []byte(line(t, outcome("z", audit.Outcome{Class: vocab.ClassFirstMint}), now.Add(-2*time.Hour))), 0o600))
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
	must(t, os.WriteFile(filepath.Join(dir, audit.ActiveFileName), []byte(line(t, intent("a"), now.Add(-time.Hour))+line(t, outcome("a", audit.Outcome{Class: vocab.ClassFirstMint}), now.Add(-time.Hour))), 0o644))
	locked := gen(now.Add(-2*time.Hour).UTC().Format("20060102T150405Z"), "000001")
	must(t, os.WriteFile(filepath.Join(dir, locked), []byte("x\n"), 0o000))
	if os.Geteuid() != 0 {
		rep := scan(t, dir)
		checkUnreadable(t, rep)
		return
	}
	runAsNobody(t, base, "TestScanListsAnUnreadableFile", "AUDIT_SCAN_UNREADABLE_DIR="+dir)
}

// runAsNobody runs the test named test of this binary again, as the
// unprivileged user nobody (uid 65534), from a copy in base (a directory
// nobody may enter), with env added; it fails unless that run passes. Root
// reads every file: an unreadable one is seen only as another user.
func runAsNobody(t *testing.T, base, test string, env ...string) {
	t.Helper()
	self, err := os.Executable()
	must(t, err)
	bin := filepath.Join(base, "audit.test")
	copyFile(t, self, bin)
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = base
	cmd.SysProcAttr = nobody()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot run the check as user nobody here (%v): an unreadable file cannot be made for root", err)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as nobody: %v\n%s", test, err, out)
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

// nobody runs a child process as uid/gid 65534.
func nobody() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// TestScanByIdentitySumsLimitedRecordsPerIdentityAndBucket: with
// ByIdentity the limited records are summed per (caller identity, bucket),
// the most limited invocations first; the per-bucket totals are
// unchanged, and without ByIdentity there is no breakdown.
func TestScanByIdentitySumsLimitedRecordsPerIdentityAndBucket(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	rec := func(id string, b vocab.Bucket, n uint64) *audit.Record {
		r := limited(b, n)
		r.CallerIdentity = id
		return r
	}
	for _, r := range []*audit.Record{
		rec("unix-peer:uid=1000", vocab.Admission, 5),
		rec("unix-peer:uid=2000", vocab.Admission, 40),
		rec("unix-peer:uid=1000", vocab.PredecisionRefusal, 3),
		rec("unix-peer:uid=1000", vocab.Admission, 2),
		rec("unix-peer:uid=3000", vocab.PredecisionRefusal, 7),
	} {
		appendOK(t, s, r)
	}
	now := t0.Add(time.Hour)
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now, ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []audit.IdentityLimited{
		{CallerIdentity: "unix-peer:uid=2000", Bucket: vocab.Admission, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 40}},
		{CallerIdentity: "unix-peer:uid=1000", Bucket: vocab.Admission, LimitedSummary: audit.LimitedSummary{Records: 2, Count: 7}},
		{CallerIdentity: "unix-peer:uid=3000", Bucket: vocab.PredecisionRefusal, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 7}},
		{CallerIdentity: "unix-peer:uid=1000", Bucket: vocab.PredecisionRefusal, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 3}},
	}
	if !slices.Equal(rep.LimitedByIdentity, want) {
		t.Errorf("LimitedByIdentity =\n%+v\nwant\n%+v", rep.LimitedByIdentity, want)
	}
	if got := rep.Limited[vocab.Admission]; got != (audit.LimitedSummary{Records: 3, Count: 47}) {
		t.Errorf("admission total %+v, want 3 records, 47 invocations", got)
	}
	rep, err = audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LimitedByIdentity != nil {
		t.Errorf("without ByIdentity: LimitedByIdentity %+v, want none", rep.LimitedByIdentity)
	}
}

// TestScanByIdentityIsBounded: past MaxScanIdentities keys, the records of
// new keys are summed in LimitedOtherIdentities, and nothing is lost.
func TestScanByIdentityIsBounded(t *testing.T) {
	s, dir := openStore(t, audit.Options{MaxFileBytes: 64 << 20}, audit.TestHooks{})
	const extra = 10
	recs := make([]*audit.Record, audit.MaxScanIdentities+extra)
	for i := range recs {
		r := limited(vocab.Admission, 1)
		r.CallerIdentity = fmt.Sprintf("unix-peer:uid=%d", i)
		recs[i] = r
	}
	for i, err := range s.AppendBatch(context.Background(), recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.LimitedByIdentity); n != audit.MaxScanIdentities {
		t.Errorf("%d keys kept, want %d", n, audit.MaxScanIdentities)
	}
	if got := rep.LimitedOtherIdentities[vocab.Admission]; got != (audit.LimitedSummary{Records: extra, Count: extra}) {
		t.Errorf("other identities %+v, want %d records and invocations", got, extra)
	}
}

// TestScanDetailNamesTheFieldAndItsProblem holds the wording of a malformed
// line's detail in the scan report: the key and what is wrong with it when
// the reader knows both ("request_id: …"), the problem alone when there is
// no key (invalid JSON: no leading ": "), the quoted key alone when the key
// is the problem (an unknown key).
func TestScanDetailNamesTheFieldAndItsProblem(t *testing.T) {
	cases := []struct {
		name    string
		content string
		rule    audit.Rule
		check   func(detail string) bool
		want    string
	}{
		{"a key and its problem", sub(t, goodLimited, `"verb"`, `"request_id":"z","verb"`) + "\n", audit.RulePhaseInconsistency,
			func(d string) bool {
				return strings.HasPrefix(d, "request_id: ") && strings.Contains(d, "must be absent")
			},
			`"request_id: " then the phase's rule ("must be absent")`},
		{"the problem alone", "{not json}\n", audit.RuleInvalidJSON,
			func(d string) bool { return d != "" && !strings.HasPrefix(d, ":") && !strings.HasPrefix(d, " ") },
			"the JSON error, with no empty key before it"},
		{"the key alone", sub(t, goodLimited, `"count":3`, `"count":3,"extra":true`) + "\n", audit.RuleUnknownKey,
			func(d string) bool { return d == `"extra"` },
			`"extra", quoted`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := scan(t, writeStore(t, tc.content))
			if len(rep.Malformed) != 1 || rep.Malformed[0].Rule != tc.rule {
				t.Fatalf("got malformed %+v, want one line breaking %s", rep.Malformed, tc.rule)
			}
			if d := rep.Malformed[0].Detail; !tc.check(d) {
				t.Errorf("detail %q, want %s", d, tc.want)
			}
		})
	}
}

// agreeScan runs both scans over a store made of the given files (oldest
// first, the last one active) and compares their whole reports.
func agreeScan(t *testing.T, files ...string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, content := range files {
		name := audit.ActiveFileName
		if i < len(files)-1 {
			name = "registrar-audit-" + now.Add(-time.Hour).Add(time.Duration(i)*time.Second).UTC().Format("20060102T150405Z") + "-000000.jsonl"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := audit.ScanOptions{Dir: dir, Now: now}
	got, err := audit.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := audit.ScanReference(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scan reports differ:\n got %+v\nwant %+v", got, want)
	}
}

// TestScanAgreesWithReference: the scan with the single-pass decoder and
// waiting-only state reports exactly what the reference scan (token decoder,
// every request_id in a map) reports: duplicates of paired and unpaired
// ids, outcomes before their intent, ids outside the registrar's form,
// malformed lines, across generations.
func TestScanAgreesWithReference(t *testing.T) {
	at := func(r *audit.Record, min int) string { return line(t, r, t0.Add(time.Duration(min)*time.Minute)) }
	var lines []string
	for _, tc := range decodeCases(t) {
		lines = append(lines, tc.line)
	}
	malformed := strings.Join(lines, "\n") + "\n"
	ids := []string{"AAAAAAAAAAAA.1", "AAAAAAAAAAAA.2", "AAAAAAAAAAAA.70000", "BBBBBBBBBBBB.1", "q1", "no-dot", "x.01", "AAAAAAAAAAAA.18446744073709551615"}
	var a, b strings.Builder
	for i, id := range ids {
		a.WriteString(at(intent(id), i))
		if i%2 == 0 {
			a.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), i))
		}
	}
	for i, id := range ids {
		b.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), i)) // pairs the odd ones, duplicates the even ones
		b.WriteString(at(intent(id), i))                                              // a duplicate intent each
	}
	b.WriteString(at(outcome("CCCCCCCCCCCC.5", audit.Outcome{Class: vocab.ClassFirstMint}), 1)) // outcome first
	b.WriteString(at(intent("CCCCCCCCCCCC.5"), 2))
	b.WriteString(at(intent("CCCCCCCCCCCC.6"), 9)) // within the grace: not unpaired
	old := intent("DDDDDDDDDDDD.1")
	b.WriteString(line(t, old, t0.Add(-40*24*time.Hour))) // before the window
	agreeScan(t, a.String(), b.String())
	agreeScan(t, malformed, a.String()+malformed)
	agreeScan(t, goodIntent+"\n"+goodIntent+"\n"+goodOutcome+"\n"+goodOutcome+"\n"+goodLimited+"\n"+goodIntent)
	// Many ids in one chunk of the compact set, out of order: past the
	// sorted array's size, into the bitmap.
	var big strings.Builder
	for i := 9000; i > 0; i-- { // ids up to 63000: one chunk of 2^16
		id := fmt.Sprintf("EEEEEEEEEEEE.%d", i*7)
		big.WriteString(at(intent(id), 0))
		if i%3 != 0 {
			big.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), 0))
		}
		if i%500 == 0 {
			big.WriteString(at(intent(id), 0))
			big.WriteString(at(outcome(id, audit.Outcome{Class: vocab.ClassFirstMint}), 0))
		}
	}
	agreeScan(t, big.String())
}

// TestScanShowsShadowTotalsApartFromLimited: shadow records are summed in
// ShadowLimited, never in Limited or LimitedByIdentity; every counted
// record, shadow or not, is in ByPolicy under its policy; they raise no
// anomaly.
func TestScanShowsShadowTotalsApartFromLimited(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	rec := func(id, policy string, shadow bool, b vocab.Bucket, n uint64) *audit.Record {
		r := limited(b, n)
		r.CallerIdentity, r.Policy, r.Shadow = id, policy, shadow
		return r
	}
	for _, r := range []*audit.Record{
		rec("agent-1", "", false, vocab.Admission, 5),
		rec("agent-1", "agents", true, vocab.Admission, 11),
		rec("agent-2", "agents", true, vocab.Admission, 4),
		rec("agent-2", "agents", true, vocab.PredecisionRefusal, 2),
		rec("cp", "control-plane", false, vocab.Admission, 30),
		rec("agent-2", "default", false, vocab.PredecisionRefusal, 1),
	} {
		appendOK(t, s, r)
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Anomalies() {
		t.Fatalf("anomalies in a store of counted records: %+v", rep)
	}
	wantLimited := [vocab.NumBuckets]audit.LimitedSummary{
		vocab.PredecisionRefusal: {Records: 1, Count: 1},
		vocab.Admission:          {Records: 2, Count: 35},
	}
	wantShadow := [vocab.NumBuckets]audit.LimitedSummary{
		vocab.PredecisionRefusal: {Records: 1, Count: 2},
		vocab.Admission:          {Records: 2, Count: 15},
	}
	if rep.Limited != wantLimited || rep.ShadowLimited != wantShadow {
		t.Errorf("Limited %+v, ShadowLimited %+v; want %+v, %+v", rep.Limited, rep.ShadowLimited, wantLimited, wantShadow)
	}
	wantPolicy := []audit.PolicyLimited{
		{Policy: "control-plane", Bucket: vocab.Admission, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 30}},
		{Policy: "agents", Bucket: vocab.Admission, Shadow: true, LimitedSummary: audit.LimitedSummary{Records: 2, Count: 15}},
		{Policy: "default", Bucket: vocab.Admission, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 5}},
		{Policy: "agents", Bucket: vocab.PredecisionRefusal, Shadow: true, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 2}},
		{Policy: "default", Bucket: vocab.PredecisionRefusal, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 1}},
	}
	if !slices.Equal(rep.ByPolicy, wantPolicy) {
		t.Errorf("ByPolicy =\n%+v\nwant\n%+v", rep.ByPolicy, wantPolicy)
	}
	for _, row := range rep.LimitedByIdentity {
		if row.CallerIdentity == "agent-1" && row.Count != 5 || row.CallerIdentity == "agent-2" && row.Count != 1 {
			t.Errorf("LimitedByIdentity row %+v counts shadow records", row)
		}
	}
	if rep.Records[audit.PhaseLimited-1] != 6 {
		t.Errorf("limited records %d, want 6 (shadow ones included)", rep.Records[audit.PhaseLimited-1])
	}
}

// TestScanListsAdminRecords: admin records are counted by action and
// listed with who acted on what; they are not anomalies and not limited.
func TestScanListsAdminRecords(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, adminReset("unix-peer:uid=0", "agent-1", []vocab.Verb{vocab.Mint}, []vocab.Bucket{vocab.Admission}))
	appendOK(t, s, limited(vocab.Admission, 3))
	appendOK(t, s, adminReset("unix-peer:uid=998", "agent-2", []vocab.Verb{vocab.Deregister, vocab.Mint}, []vocab.Bucket{vocab.Admission, vocab.PredecisionRefusal}))
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Anomalies() || rep.MalformedRecords != 0 {
		t.Fatalf("admin records read as anomalies: %+v", rep.Malformed)
	}
	if rep.Admin[audit.ActionLimitsReset] != 2 || rep.Records[audit.PhaseAdmin-1] != 2 {
		t.Errorf("admin by action %v, records %v; want 2 limits_reset", rep.Admin, rep.Records)
	}
	if len(rep.AdminRecords) != 2 {
		t.Fatalf("AdminRecords %+v, want 2", rep.AdminRecords)
	}
	second := rep.AdminRecords[1]
	if second.Line != 3 || second.File != audit.ActiveFileName || second.CallerIdentity != "unix-peer:uid=998" ||
		second.Admin.Identity != "agent-2" || !slices.Equal(second.Admin.Verbs, []vocab.Verb{vocab.Mint, vocab.Deregister}) ||
		!slices.Equal(second.Admin.Buckets, []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission}) || !second.TS.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("second admin entry %+v", second)
	}
	if rep.Limited[vocab.Admission].Count != 3 {
		t.Errorf("limited admission %+v, want the one counted record's 3", rep.Limited[vocab.Admission])
	}
}

// TestScanBoundsItsAdminList: the admin list stops at MaxReportedLines,
// the count does not.
func TestScanBoundsItsAdminList(t *testing.T) {
	var b strings.Builder
	for range audit.MaxReportedLines + 5 {
		b.WriteString(line(t, adminReset("unix-peer:uid=0", "agent-1", []vocab.Verb{vocab.Mint}, []vocab.Bucket{vocab.Admission}), now.Add(-time.Minute)))
	}
	rep := scan(t, writeStore(t, b.String()))
	if rep.Admin[audit.ActionLimitsReset] != audit.MaxReportedLines+5 || len(rep.AdminRecords) != audit.MaxReportedLines {
		t.Errorf("counted %d, listed %d; want %d and %d", rep.Admin[audit.ActionLimitsReset], len(rep.AdminRecords), audit.MaxReportedLines+5, audit.MaxReportedLines)
	}
}

// TestScanByPolicyIsBounded: past MaxScanPolicyKeys keys, records are
// summed in OtherPolicies, and nothing is lost.
func TestScanByPolicyIsBounded(t *testing.T) {
	var b strings.Builder
	const extra = 3
	for i := range audit.MaxScanPolicyKeys + extra {
		r := limited(vocab.Admission, 2)
		r.Policy, r.Shadow = fmt.Sprintf("p%05d", i), true
		b.WriteString(line(t, r, now.Add(-time.Minute)))
	}
	rep := scan(t, writeStore(t, b.String()))
	if len(rep.ByPolicy) != audit.MaxScanPolicyKeys {
		t.Errorf("%d policy keys, want %d", len(rep.ByPolicy), audit.MaxScanPolicyKeys)
	}
	if got := rep.OtherPolicies[1][vocab.Admission]; got != (audit.LimitedSummary{Records: extra, Count: 2 * extra}) {
		t.Errorf("OtherPolicies shadow admission %+v, want %d records", got, extra)
	}
	if got := rep.ShadowLimited[vocab.Admission].Count; got != 2*(audit.MaxScanPolicyKeys+extra) {
		t.Errorf("shadow total %d, want every record", got)
	}
}

// TestScanByPolicyOrdersEnforcedBeforeShadowOnATie: two keys equal in
// invocations, records, policy and bucket are the enforced one, then the
// shadow one, so the report's order is the same on every run.
func TestScanByPolicyOrdersEnforcedBeforeShadowOnATie(t *testing.T) {
	var b strings.Builder
	for _, shadow := range []bool{true, false} {
		r := limited(vocab.Admission, 5)
		r.Policy, r.Shadow = "agents", shadow
		b.WriteString(line(t, r, now.Add(-time.Minute)))
	}
	rep := scan(t, writeStore(t, b.String()))
	if len(rep.ByPolicy) != 2 || rep.ByPolicy[0].Shadow || !rep.ByPolicy[1].Shadow {
		t.Errorf("ByPolicy %+v, want the enforced key before the shadow one", rep.ByPolicy)
	}
}
