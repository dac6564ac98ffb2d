//go:build unix

package audit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
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
	paired := line(t, intent("p1"), old) + line(t, outcome("p1", audit.Outcome{Class: audit.ClassFirstMint}), old)
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
		{"an outcome alone (its intent trimmed)", line(t, outcome("o1", audit.Outcome{Class: audit.ClassFirstMint}), old), 0, 0, ""},
		{"a torn final line", paired + goodIntent[:50], 0, 1, audit.RuleTornFinalLine},
		{"invalid JSON", paired + "{not json}\n", 0, 1, audit.RuleInvalidJSON},
		{"an unknown key", paired + sub(t, goodLimited, `"count":3`, `"count":3,"extra":true`) + "\n", 0, 1, audit.RuleUnknownKey},
		{"a wrong version", paired + sub(t, goodLimited, `"record_version":1`, `"record_version":2`) + "\n", 0, 1, audit.RuleWrongVersion},
		{"a +00:00 timestamp", paired + sub(t, goodLimited, `"ts":"2026-08-23T12:35:57.789Z"`, `"ts":"2026-08-23T12:35:57.789+00:00"`) + "\n", 0, 1, audit.RuleNonCanonicalTimestamp},
		{"a phase inconsistency", paired + sub(t, goodLimited, `"verb"`, `"request_id":"z","verb"`) + "\n", 0, 1, audit.RulePhaseInconsistency},
		{"a duplicate intent request_id, paired", paired + line(t, intent("p1"), old), 0, 1, audit.RuleDuplicateRequestID},
		{"a duplicate outcome request_id", paired + line(t, outcome("p1", audit.Outcome{Class: audit.ClassFirstMint}), old), 0, 1, audit.RuleDuplicateRequestID},
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
		r := limited(limiter.Bucket(i%2), uint64(i+1))
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
	var want [limiter.NumBuckets]audit.LimitedSummary
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
	r := limited(limiter.Admission, 9)
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
		line(t, limited(limiter.Admission, 4), now.Add(-40*24*time.Hour)))
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
	if rep.Limited[limiter.Admission].Records != 0 {
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
	dir := writeStore(t, line(t, outcome("x", audit.Outcome{Class: audit.ClassFirstMint}), now.Add(-time.Minute*2)))
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
	content := line(t, intent("a"), old) + strings.Repeat("x", huge) + "\n" + line(t, outcome("a", audit.Outcome{Class: audit.ClassFirstMint}), old) +
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
