//go:build unix

package audit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// retentionCap is a file cap that holds a rotated record and some lines.
const retentionCap = 4096

// mintOutcome is a first_mint outcome of identity.
func mintOutcome(id, identity string) *audit.Record {
	r := outcome(id, audit.Outcome{Class: vocab.ClassFirstMint})
	r.CallerIdentity = identity
	return r
}

// removed records, through the Remove hook, every file retention removes
// and what it held at that moment, and what the active file held then.
type removed struct {
	mu     sync.Mutex
	dir    string
	files  map[string][]byte
	active map[string][]byte
	fail   int // removals still to fail
	done   int // removals that succeeded
	// tamper, if set, is appended to the file of a removal that fails.
	tamper string
}

func (rm *removed) hook(path string) error {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	name := filepath.Base(path)
	content, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	active, _ := os.ReadFile(filepath.Join(rm.dir, audit.ActiveFileName))
	rm.files[name], rm.active[name] = content, active
	if rm.fail > 0 {
		rm.fail--
		if rm.tamper != "" {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			f.WriteString(rm.tamper)
			f.Close()
		}
		return errInjected
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	rm.done++
	return nil
}

func newRemoved(dir string) *removed {
	return &removed{dir: dir, files: map[string][]byte{}, active: map[string][]byte{}}
}

// rotatedRecords are the rotated records of dir's files, in file order.
func rotatedRecords(t *testing.T, dir string) []*audit.Record {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*audit.Record
	for _, n := range append(names, filepath.Join(dir, audit.ActiveFileName)) {
		content, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines(content) {
			r, err := audit.Unmarshal([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(n), err)
			}
			if r.Phase == audit.PhaseAdmin && r.Admin.Action == audit.ActionRotated {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestRetentionLeavesARotatedRecordOfWhatItDeletes: a deleted generation's
// rotated record, already written and synced to the active file when the
// file is removed, names it, its size, lines, digest and timestamps, the
// generation next, and counts exactly what its records recorded, per
// identity, verb and outcome.
func TestRetentionLeavesARotatedRecordOfWhatItDeletes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	rm := newRemoved(dir)
	clock := &fixedClock{t: t0}
	s, _ := openStore(t, audit.Options{Dir: dir, MaxFileBytes: retentionCap, MaxRetainedFiles: 1, Now: clock.Now},
		audit.TestHooks{MinFileBytes: retentionCap, Remove: rm.hook})
	for i := 0; len(rm.files) == 0; i++ {
		if i > 200 {
			t.Fatal("no generation was deleted after 200 appends")
		}
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		switch i % 4 {
		case 0, 1:
			appendOK(t, s, mintOutcome(fmt.Sprintf("a%03d", i), "unix-peer:uid=1000"))
		case 2:
			r := outcome(fmt.Sprintf("b%03d", i), audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonInvalidHost})
			r.CallerIdentity, r.Verb = "unix-peer:uid=1001", vocab.Deregister
			appendOK(t, s, r)
		case 3:
			appendOK(t, s, limited(vocab.Admission, 7))
			appendOK(t, s, intent(fmt.Sprintf("c%03d", i))) // an intent counts nothing
		}
	}
	var name string
	var content []byte
	for n, c := range rm.files {
		name, content = n, c
	}
	if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still there: %v", name, err)
	}

	// What the deleted file held, counted here on its own.
	want := map[string]uint64{}
	var first, last time.Time
	for _, l := range lines(content) {
		r, err := audit.Unmarshal([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() {
			first = r.TS
		}
		last = r.TS
		switch r.Phase {
		case audit.PhaseOutcome:
			want[fmt.Sprintf("%s %s %s", r.CallerIdentity, r.Verb, r.Outcome.Class)]++
		case audit.PhaseLimited:
			want[fmt.Sprintf("%s %s limited", r.CallerIdentity, r.Verb)] += r.Count
		}
	}
	recs := rotatedRecords(t, dir)
	if len(recs) != 1 {
		t.Fatalf("%d rotated records, want 1", len(recs))
	}
	r := recs[0]
	got := r.Admin.Rotated
	sum := sha256.Sum256(content)
	if r.CallerIdentity != audit.DaemonIdentity || got.File != name || got.Rotation != 1 || got.Folded != 0 ||
		got.Bytes != uint64(len(content)) || got.SHA256 != hex.EncodeToString(sum[:]) || got.Lines != uint64(len(lines(content))) ||
		!got.FirstTS.Equal(first) || !got.LastTS.Equal(last) || got.Others != nil {
		t.Errorf("rotated record %+v by %q\nwant file %s, rotation 1, %d bytes, %d lines, sha256 %x, ts %v..%v, by %s",
			got, r.CallerIdentity, name, len(content), len(lines(content)), sum, first, last, audit.DaemonIdentity)
	}
	if _, _, err := nextAfter(dir, name); err != nil || got.Next <= name {
		t.Errorf("next %s: %v", got.Next, err)
	}
	gotCounts := map[string]uint64{}
	for _, c := range got.Counts {
		gotCounts[fmt.Sprintf("%s %s %s", c.Identity, c.Verb, c.Result)] = c.Invocations
	}
	if fmt.Sprint(gotCounts) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", gotCounts, want)
	}
	// Written before the removal: the active file held it then.
	if !strings.Contains(string(rm.active[name]), `"action":"rotated"`) {
		t.Error("the rotated record was not in the active file when the generation was removed")
	}
}

// nextAfter is the generation that sorts after name in dir.
func nextAfter(dir, name string) (string, bool, error) {
	names, err := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if err != nil {
		return "", false, err
	}
	for _, n := range names {
		if b := filepath.Base(n); b > name {
			return b, true, nil
		}
	}
	return "", false, nil
}

// TestRotatedRecordsCarryTheirCountsForward: a rotated record in a file
// retention deletes is folded into that file's own: the store keeps, at
// all times, exactly the invocations ever recorded, between the retained
// files' records and the rotated records' counts, and the rotation
// numbers and folded counts account for every deletion.
func TestRotatedRecordsCarryTheirCountsForward(t *testing.T) {
	clock := &fixedClock{t: t0}
	s, dir := openStore(t, audit.Options{MaxFileBytes: retentionCap, MaxRetainedFiles: 2, Now: clock.Now}, audit.TestHooks{MinFileBytes: retentionCap})
	const total = 400
	for i := range total {
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		appendOK(t, s, mintOutcome(fmt.Sprintf("q%03d", i), fmt.Sprintf("unix-peer:uid=%d", 1000+i%3)))
	}
	var inFiles, inRotated uint64
	var folded, newest uint64
	recs := rotatedRecords(t, dir)
	for _, r := range recs {
		for _, c := range r.Admin.Counts {
			inRotated += c.Invocations
		}
		folded += 1 + r.Admin.Folded
		newest = max(newest, r.Admin.Rotation)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	for _, n := range append(names, filepath.Join(dir, audit.ActiveFileName)) {
		content, _ := os.ReadFile(n)
		inFiles += uint64(strings.Count(string(content), `"phase":"outcome"`))
	}
	if inFiles+inRotated != total {
		t.Errorf("%d outcomes in the files and %d in rotated records, want %d in all", inFiles, inRotated, total)
	}
	if st := s.Stats(); newest != st.RotatedRecords || folded != newest || newest < 10 {
		t.Errorf("%d rotated records kept, folding %d in all, the newest numbered %d, %d written: want every deletion accounted for (and many)",
			len(recs), folded, newest, st.RotatedRecords)
	}
}

// TestRetentionNumbersOnAcrossARestart: a reopened store finds its newest
// rotated record and numbers the next deletion one past it.
func TestRetentionNumbersOnAcrossARestart(t *testing.T) {
	clock := &fixedClock{t: t0}
	dir := filepath.Join(t.TempDir(), "audit")
	opts := audit.Options{Dir: dir, MaxFileBytes: retentionCap, MaxRetainedFiles: 1, Now: clock.Now}
	th := audit.TestHooks{MinFileBytes: retentionCap}
	n := 0
	run := func(appends int) uint64 {
		s, err := audit.OpenWithHooks(opts, th)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for range appends {
			n++
			clock.Set(t0.Add(time.Duration(n) * time.Second))
			appendOK(t, s, mintOutcome(fmt.Sprintf("q%03d", n), "unix-peer:uid=1000"))
		}
		return s.Stats().RotatedRecords
	}
	first := run(60)
	second := run(60)
	recs := rotatedRecords(t, dir)
	if first == 0 || second == 0 || len(recs) == 0 {
		t.Fatalf("%d then %d rotated records written, %d kept: want deletions in both runs", first, second, len(recs))
	}
	if newest := recs[len(recs)-1].Admin.Rotation; newest != first+second {
		t.Errorf("the newest rotated record is numbered %d, want %d (%d + %d: numbering goes on after the restart)", newest, first+second, first, second)
	}
}

// TestAnInterruptedDeletionIsCompletedWithoutASecondRecord: a removal that
// failed after its record is retried at the next rotation without writing
// another record for the same file.
func TestAnInterruptedDeletionIsCompletedWithoutASecondRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	rm := newRemoved(dir)
	rm.fail = 1
	clock := &fixedClock{t: t0}
	s, _ := openStore(t, audit.Options{Dir: dir, MaxFileBytes: retentionCap, MaxRetainedFiles: 1, Now: clock.Now},
		audit.TestHooks{MinFileBytes: retentionCap, Remove: rm.hook})
	for i := range 80 {
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		appendOK(t, s, mintOutcome(fmt.Sprintf("q%03d", i), "unix-peer:uid=1000"))
	}
	seen := map[string]int{}
	for _, r := range rotatedRecords(t, dir) {
		seen[r.Admin.File]++
	}
	for file, n := range seen {
		if n != 1 {
			t.Errorf("%s is named by %d rotated records, want 1", file, n)
		}
	}
	rm.mu.Lock()
	deleted := rm.done
	rm.mu.Unlock()
	if st := s.Stats(); st.RetentionFailures != 1 || st.RotatedRecords < 2 || st.RotatedRecords != uint64(deleted) {
		t.Errorf("stats %+v, %d files deleted: want the one failure, and one rotated record per deleted file", st, deleted)
	}
	if rep := verify(t, dir); !rep.OK() {
		t.Errorf("Verify: %+v", rep.Problems)
	}
}

// TestMinRetentionHoldsGenerationsAndRefusesMints: a generation younger
// than MinRetention is kept past the budget; meanwhile the capacity state
// is retention_held and a mint's intent is refused with the time until it
// ages out, every other record still written; once it has aged out, the
// next probe deletes it (with its record) and mints go on.
func TestMinRetentionHoldsGenerationsAndRefusesMints(t *testing.T) {
	clock := &fixedClock{t: t0}
	var logs logBuffer
	s, dir := openStore(t, audit.Options{MaxFileBytes: retentionCap, MaxRetainedFiles: 1, MinRetention: time.Hour, Now: clock.Now, Logger: newLogger(&logs)},
		audit.TestHooks{MinFileBytes: retentionCap})
	probe, err := audit.NewCapacityProbe(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	audit.SetStatfs(probe, func(string) (uint64, error) { return 1 << 40, nil })
	i := 0
	for s.Stats().HeldFiles == 0 {
		if i > 200 {
			t.Fatal("nothing held after 200 appends")
		}
		i++
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		appendOK(t, s, mintOutcome(fmt.Sprintf("q%03d", i), "unix-peer:uid=1000"))
	}
	if got := len(rotatedRecords(t, dir)); got != 0 {
		t.Fatalf("%d rotated records while every generation is younger than an hour, want none", got)
	}
	if c, _ := probe.Probe(); c.State != audit.CapacityRetentionHeld || c.HeldFiles != 1 || c.State.String() != "retention_held" {
		t.Fatalf("probe %+v (%s), want retention_held with one file held", c, c.State)
	}
	err = s.Append(context.Background(), intent("m1"))
	var held *audit.RetentionHeldError
	if !errors.As(err, &held) || !errors.Is(err, audit.ErrRetentionHeld) || held.HeldFiles != 1 {
		t.Fatalf("a mint's intent: %v, want a RetentionHeldError", err)
	}
	// The oldest generation was rotated at t0 + a few seconds: it ages out
	// an hour after, less the seconds gone since.
	if held.RetryAfter < 59*time.Minute || held.RetryAfter > time.Hour {
		t.Errorf("retry after %s, want just under an hour", held.RetryAfter)
	}
	dereg := intent("d1")
	dereg.Verb = vocab.Deregister
	appendOK(t, s, dereg)
	appendOK(t, s, limited(vocab.Admission, 3))
	if errs := s.AppendBatch(context.Background(), []*audit.Record{intent("m3"), limited(vocab.Admission, 4)}); !errors.Is(errs[0], audit.ErrRetentionHeld) || errs[1] != nil {
		t.Errorf("a batch of a mint's intent and a counted record: %v; want the intent refused, the counted record written", errs)
	}
	if st := s.Stats(); st.AppendFailures != 0 {
		t.Errorf("the refused intent counted as an append failure: %+v", st)
	}
	if !strings.Contains(logs.String(), "audit_min_retention_seconds") {
		t.Errorf("the hold was not logged: %s", logs.String())
	}

	clock.Set(t0.Add(time.Hour + time.Duration(i)*time.Second))
	if c, _ := probe.Probe(); c.State == audit.CapacityRetentionHeld || c.HeldFiles != 0 {
		t.Fatalf("probe after the hour %+v, want the held generation deleted", c)
	}
	if got := len(rotatedRecords(t, dir)); got != 1 {
		t.Errorf("%d rotated records after the release, want 1", got)
	}
	appendOK(t, s, intent("m2"))
}

// TestRetentionOfAnUnwritableRecordKeepsTheFile: when the rotated record
// cannot be written (a cap too small for it, possible only in a test),
// nothing is deleted.
func TestRetentionOfAnUnwritableRecordKeepsTheFile(t *testing.T) {
	var logs logBuffer
	s, dir := openStore(t, audit.Options{MaxFileBytes: 300, MaxRetainedFiles: 1, Logger: newLogger(&logs)}, audit.TestHooks{MinFileBytes: 256})
	for i := range 6 {
		appendOK(t, s, intent(fmt.Sprintf("q%d", i)))
	}
	names, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(names) < 3 || s.Stats().RetentionFailures == 0 || !strings.Contains(logs.String(), "no deletion without its rotated record") {
		t.Errorf("%d generations kept, stats %+v; want every one kept and the failure logged", len(names), s.Stats())
	}
}

// TestAppendsGoOnWhenRotatedRecordsFillTheFreshFile: when retention's
// rotated record leaves the fresh active file too little room for the
// line that rotated it, the store rotates once more and writes the line:
// every append completes.
func TestAppendsGoOnWhenRotatedRecordsFillTheFreshFile(t *testing.T) {
	s, dir := openStore(t, audit.Options{MaxFileBytes: 512, MaxRetainedFiles: 1}, audit.TestHooks{MinFileBytes: 512})
	for i := range 12 {
		appendOK(t, s, intent(fmt.Sprintf("q%02d", i)))
	}
	if s.Stats().RotatedRecords == 0 {
		t.Fatal("no rotated record written")
	}
	if !strings.Contains(string(readActive(t, dir)), `"request_id":"q11"`) {
		t.Errorf("the last line is not in the active file: %s", readActive(t, dir))
	}
}

// TestAFileChangedAfterItsRecordGetsARecordOfWhatIsDeleted: a deletion
// that failed is retried without a second record only for the bytes the
// record describes; a file changed meanwhile is recorded again, as it is
// deleted, and Verify names the break in the trail.
func TestAFileChangedAfterItsRecordGetsARecordOfWhatIsDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	rm := newRemoved(dir)
	rm.fail, rm.tamper = 1, "{\"forged\":true}\n"
	clock := &fixedClock{t: t0}
	s, _ := openStore(t, audit.Options{Dir: dir, MaxFileBytes: retentionCap, MaxRetainedFiles: 1, Now: clock.Now},
		audit.TestHooks{MinFileBytes: retentionCap, Remove: rm.hook})
	for i := 0; ; i++ {
		rm.mu.Lock()
		done := rm.done
		rm.mu.Unlock()
		if done > 0 {
			break
		}
		if i > 200 {
			t.Fatal("nothing deleted after 200 appends")
		}
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		appendOK(t, s, mintOutcome(fmt.Sprintf("q%03d", i), "unix-peer:uid=1000"))
	}
	var first string
	for name := range rm.files {
		if first == "" || name < first {
			first = name
		}
	}
	sum := sha256.Sum256(rm.files[first]) // the bytes removed, forged line included
	var shas []string
	for _, r := range rotatedRecords(t, dir) {
		if r.Admin.File == first {
			shas = append(shas, r.Admin.SHA256)
		}
	}
	if len(shas) != 2 || shas[1] != hex.EncodeToString(sum[:]) || shas[0] == shas[1] {
		t.Fatalf("rotated records of %s carry sha256 %v; want the first record's and then the changed file's %x", first, shas, sum)
	}
	if rep := verify(t, dir); rep.OK() {
		t.Error("Verify found nothing wrong with a file recorded twice")
	}
}

// TestARotatedRecordCountsEveryLineOfWhatItDeletes: a generation with a
// line longer than any record and a torn final line is deleted like any
// other, its record counting every line and byte, and only the record
// that decodes.
func TestARotatedRecordCountsEveryLineOfWhatItDeletes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	content := mustMarshal(t, mintOutcome("q1", "unix-peer:uid=7"))
	content = append(content, []byte(strings.Repeat("x", audit.MaxRecordBytes+10)+"\n")...)
	content = append(content, []byte(`{"record_version":1,"phase":"int`)...) // torn
	for name, b := range map[string][]byte{
		"registrar-audit-20260823T120000Z-000001.jsonl": content,
		"registrar-audit-20260823T120100Z-000002.jsonl": mustMarshal(t, intent("q2")),
	} {
		writeFile(t, filepath.Join(dir, name), b)
	}
	s, _ := openStore(t, audit.Options{Dir: dir, MaxRetainedFiles: 1}, audit.TestHooks{})
	recs := rotatedRecords(t, dir)
	if len(recs) != 1 {
		t.Fatalf("%d rotated records after Open trimmed one generation, want 1", len(recs))
	}
	got := recs[0].Admin.Rotated
	sum := sha256.Sum256(content)
	if got.Lines != 3 || got.Bytes != uint64(len(content)) || got.SHA256 != hex.EncodeToString(sum[:]) ||
		len(got.Counts) != 1 || got.Counts[0].Identity != "unix-peer:uid=7" || got.Counts[0].Invocations != 1 {
		t.Errorf("rotated record %+v; want 3 lines, %d bytes, its digest and the one outcome counted", got, len(content))
	}
	if st := s.Stats(); st.RotatedRecords != 1 {
		t.Errorf("stats %+v", st)
	}
}

// BenchmarkTallyAFullGeneration is what retention spends on one deletion
// besides the record's write: reading a full generation at the default
// cap (8 MiB of outcome records of 64 identities), decoding it, counting
// it and hashing it. -short: a 1 MiB file.
func BenchmarkTallyAFullGeneration(b *testing.B) {
	size := audit.DefaultMaxFileBytes
	if testing.Short() {
		size = 1 << 20
	}
	var buf []byte
	for i := 0; len(buf) < size; i++ {
		line, err := audit.Marshal(mintOutcome(fmt.Sprintf("q%07d", i), fmt.Sprintf("unix-peer:uid=%d", 1000+i%64)))
		if err != nil {
			b.Fatal(err)
		}
		buf = append(buf, line...)
	}
	path := filepath.Join(b.TempDir(), "registrar-audit-20260823T120000Z-000001.jsonl")
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		subj, err := audit.TallyFile(path)
		if err != nil || len(subj.Counts) != 64 {
			b.Fatalf("%d counts, %v", len(subj.Counts), err)
		}
	}
}

// gen3 sorts after gen1 and gen2 (rotated_test.go).
const gen3 = "registrar-audit-20261201T100000Z-000003.jsonl"

// afterGens is an instant after gen1, gen2 and gen3's stamps.
var afterGens = time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)

// generationsIn are the generations in dir, oldest first.
func generationsIn(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

// intentsOf are intent lines of exactly n bytes (n 0 or at least one
// line's): the last line's caller identity takes what the others leave.
func intentsOf(t *testing.T, n int) []byte {
	t.Helper()
	var b []byte
	if n == 0 {
		return b
	}
	for i := 0; ; i++ {
		r := intent(fmt.Sprintf("f%05d", i))
		l := mustMarshal(t, r)
		if rest := n - len(b); rest < 2*len(l) {
			r.CallerIdentity += strings.Repeat("x", rest-len(l))
			b = append(b, mustMarshal(t, r)...)
			break
		}
		b = append(b, l...)
	}
	if len(b) != n {
		t.Fatalf("%d bytes of intents, want %d", len(b), n)
	}
	return b
}

// retentionDir writes, in a fresh directory (or dir, if given), the
// generations gen1 and gen2 (an intent each) and an active file of
// activeBytes bytes of intents. It returns the directory and the line of
// the rotated record retention writes for gen1 at now, unchained.
func retentionDir(t *testing.T, dir string, activeBytes int, now time.Time) (string, []byte) {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "audit")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, gen1), mustMarshal(t, intent("g1")))
	writeFile(t, filepath.Join(dir, gen2), mustMarshal(t, intent("g2")))
	writeFile(t, filepath.Join(dir, audit.ActiveFileName), intentsOf(t, activeBytes))
	subj, err := audit.TallyFile(filepath.Join(dir, gen1))
	if err != nil {
		t.Fatal(err)
	}
	subj.File, subj.Next, subj.Rotation = gen1, gen2, 1
	return dir, mustMarshal(t, &audit.Record{Phase: audit.PhaseAdmin, TS: now, CallerIdentity: audit.DaemonIdentity,
		Admin: &audit.Admin{Action: audit.ActionRotated, Rotated: subj}})
}

// TestRetentionWritesItsRecordInTheActiveFileOnlyWhereItFits: a rotated
// record that fills the active file to the byte is written there and its
// generation deleted; one byte more and the active file is rotated first,
// the records written in the fresh one, and both older generations
// deleted, with no failure.
func TestRetentionWritesItsRecordInTheActiveFileOnlyWhereItFits(t *testing.T) {
	const activeBytes = 2048
	for _, tc := range []struct {
		name string
		over int // bytes the record and the active file take past the cap
	}{{"to the byte", 0}, {"one byte over", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, rec := retentionDir(t, "", activeBytes, afterGens)
			maxFile := uint64(activeBytes + len(rec) - tc.over)
			s, _ := openStore(t, audit.Options{Dir: dir, MaxFileBytes: maxFile, MaxRetainedFiles: 1, Now: func() time.Time { return afterGens }},
				audit.TestHooks{MinFileBytes: 256})
			gens := generationsIn(t, dir)
			active := readActive(t, dir)
			st := s.Stats()
			if st.RetentionFailures != 0 {
				t.Errorf("%d retention failures, want none", st.RetentionFailures)
			}
			if tc.over == 0 {
				if len(gens) != 1 || gens[0] != gen2 || st.RotatedRecords != 1 || uint64(len(active)) != maxFile || !strings.HasSuffix(string(active), string(rec)) {
					t.Errorf("generations %v, %d rotated records, a %d-byte active file of cap %d ending %q; want gen2 alone, its record closing the full active file",
						gens, st.RotatedRecords, len(active), maxFile, active[max(0, len(active)-len(rec)):])
				}
				return
			}
			if len(gens) != 1 || gens[0] <= gen2 || st.RotatedRecords != 2 || !strings.HasPrefix(string(active), string(rec)) {
				t.Errorf("generations %v, %d rotated records, active file %q; want the rotated active file alone, after the two records written in the fresh one",
					gens, st.RotatedRecords, active)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, gens[len(gens)-1])); len(b) != activeBytes {
				t.Errorf("the newest generation holds %d bytes, want the %d of the active file rotated", len(b), activeBytes)
			}
		})
	}
}

// TestSealedRetentionCountsTheDueSealBeforeItsRecord: in a sealed store
// whose start seal is due when Open's retention writes its record, the
// record fits the active file only with the seal's room, so the active
// file is rotated first and no file grows past the cap.
func TestSealedRetentionCountsTheDueSealBeforeItsRecord(t *testing.T) {
	const activeBytes = 4096
	f := newSealFixture(t)
	_, rec := retentionDir(t, f.dir, activeBytes, afterGens)
	f.clock.Set(afterGens)
	f.retained = 1
	f.maxFile = uint64(activeBytes + len(rec) + audit.ChainSuffixBytes + 1) // the record chained fits; a seal too does not
	s := f.open()
	defer s.Close()
	for _, name := range append(generationsIn(t, f.dir), audit.ActiveFileName) {
		st, err := os.Stat(filepath.Join(f.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if uint64(st.Size()) > f.maxFile {
			t.Errorf("%s holds %d bytes, past the cap of %d", name, st.Size(), f.maxFile)
		}
	}
	if st := s.Stats(); st.RetentionFailures != 0 || st.RotatedRecords != 2 {
		t.Errorf("stats %+v, want both older generations deleted, each after its record, with no failure", st)
	}
}

// TestRetentionThatDoesNotSettleStopsAtItsBound: a removal that reports
// success and leaves the file (so each look finds the same excess) is
// tried 4*MaxRetainedFiles+16 times in a round, not once more, after one
// rotated record; the round then fails and is logged.
func TestRetentionThatDoesNotSettleStopsAtItsBound(t *testing.T) {
	dir, _ := retentionDir(t, "", 0, afterGens)
	writeFile(t, filepath.Join(dir, gen3), mustMarshal(t, intent("g3")))
	var removes int
	var logs logBuffer
	const retained = 2
	s, _ := openStore(t, audit.Options{Dir: dir, MaxRetainedFiles: retained, Now: func() time.Time { return afterGens }, Logger: newLogger(&logs)},
		audit.TestHooks{Remove: func(string) error { removes++; return nil }})
	if want := 4*retained + 16; removes != want {
		t.Errorf("%d removals tried, want %d", removes, want)
	}
	if st := s.Stats(); st.RetentionFailures != 1 || st.RotatedRecords != 1 || !strings.Contains(logs.String(), "retention did not settle") {
		t.Errorf("stats %+v, log %s; want one rotated record and the round's failure logged", st, logs.String())
	}
}

// TestMinRetentionIsReachedAtItsAge: a generation whose age (since the
// stamp in its name) is exactly MinRetention is deleted; a nanosecond
// younger it is held.
func TestMinRetentionIsReachedAtItsAge(t *testing.T) {
	stamp := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC) // gen1's
	for _, tc := range []struct {
		name string
		now  time.Time
		held uint64
	}{
		{"at its age", stamp.Add(time.Hour), 0},
		{"a nanosecond younger", stamp.Add(time.Hour - time.Nanosecond), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := retentionDir(t, "", 0, tc.now)
			s, _ := openStore(t, audit.Options{Dir: dir, MaxRetainedFiles: 1, MinRetention: time.Hour, Now: func() time.Time { return tc.now }}, audit.TestHooks{})
			st := s.Stats()
			gens := generationsIn(t, dir)
			if st.HeldFiles != tc.held || st.RotatedRecords != 1-tc.held || len(gens) != 1+int(tc.held) || gens[0] != []string{gen2, gen1}[tc.held] {
				t.Errorf("stats %+v, generations %v; want %d held", st, gens, tc.held)
			}
		})
	}
}

// TestRetentionWithNoMinimumDeletesAGenerationStampedAhead: with no
// MinRetention, a generation is deleted past the budget even when the
// clock reads before the stamp in its name (a clock stepped back).
func TestRetentionWithNoMinimumDeletesAGenerationStampedAhead(t *testing.T) {
	before := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC) // gen1's stamp less an hour
	dir, _ := retentionDir(t, "", 0, before)
	s, _ := openStore(t, audit.Options{Dir: dir, MaxRetainedFiles: 1, Now: func() time.Time { return before }}, audit.TestHooks{})
	if st, gens := s.Stats(), generationsIn(t, dir); st.HeldFiles != 0 || st.RotatedRecords != 1 || len(gens) != 1 || gens[0] != gen2 {
		t.Errorf("stats %+v, generations %v; want gen1 deleted, nothing held", st, gens)
	}
}

// TestAProbeLeavesAFailedDeletionToTheNextRotation: with nothing held, a
// probe does not run retention, so a generation whose removal failed stays
// until the next rotation tries again.
func TestAProbeLeavesAFailedDeletionToTheNextRotation(t *testing.T) {
	dir, _ := retentionDir(t, "", 0, afterGens)
	rm := newRemoved(dir)
	rm.fail = 1
	s, _ := openStore(t, audit.Options{Dir: dir, MaxRetainedFiles: 1, Now: func() time.Time { return afterGens }}, audit.TestHooks{Remove: rm.hook})
	probe, err := audit.NewCapacityProbe(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	audit.SetStatfs(probe, func(string) (uint64, error) { return 1 << 40, nil })
	if _, err := probe.Probe(); err != nil {
		t.Fatal(err)
	}
	rm.mu.Lock()
	done := rm.done
	rm.mu.Unlock()
	if st, gens := s.Stats(), generationsIn(t, dir); done != 0 || st.RetentionFailures != 1 || len(gens) != 2 {
		t.Errorf("%d removals done, stats %+v, generations %v; want the failed one kept past the probes", done, st, gens)
	}
}

// TestATallyKeepsMaxRotatedKeysAndSumsTheRestInOthers: a generation of
// more keys than MaxRotatedKeys is tallied as MaxRotatedKeys counts, not
// one more, and others, per verb and result, hold the keys met past them
// and what a folded rotated record's others carried, of every result.
func TestATallyKeepsMaxRotatedKeysAndSumsTheRestInOthers(t *testing.T) {
	var content []byte
	for i := range audit.MaxRotatedKeys + 1 {
		content = append(content, mustMarshal(t, mintOutcome(fmt.Sprintf("q%05d", i), fmt.Sprintf("unix-peer:uid=%d", i)))...)
	}
	l := limited(vocab.Admission, 7)
	l.CallerIdentity = "unix-peer:uid=limited"
	folded := rotatedRec()
	folded.Admin.Counts = nil
	folded.Admin.Others = []audit.InvocationCount{{Verb: vocab.Deregister, Result: audit.ResultRefused, Invocations: 3}}
	content = append(content, mustMarshal(t, l)...)
	content = append(content, mustMarshal(t, folded)...)
	path := filepath.Join(t.TempDir(), gen1)
	writeFile(t, path, content)
	subj, err := audit.TallyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(subj.Counts) != audit.MaxRotatedKeys {
		t.Errorf("%d counts, want %d", len(subj.Counts), audit.MaxRotatedKeys)
	}
	got := map[audit.InvocationCount]bool{}
	for _, o := range subj.Others {
		got[o] = true
	}
	want := map[audit.InvocationCount]bool{
		{Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 1}:     true, // the key past the bound
		{Verb: vocab.Mint, Result: audit.ResultLimited, Invocations: 7}:       true,
		{Verb: vocab.Deregister, Result: audit.ResultRefused, Invocations: 3}: true, // carried on
	}
	if len(subj.Others) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("others %+v, want %v", subj.Others, want)
	}
}

// TestOfRotatedRecordsNumberedAlikeTheLaterIsRecovered: a reopened store
// takes, of two rotated records of the same number, the later one written
// as its newest: the generation it names with the digest it recorded is
// only removed again, with no second record.
func TestOfRotatedRecordsNumberedAlikeTheLaterIsRecovered(t *testing.T) {
	dir, rec := retentionDir(t, "", 0, afterGens)
	earlier, err := audit.Unmarshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	earlier.Admin.SHA256 = strings.Repeat("ab", 32) // what gen1 held before, say
	writeFile(t, filepath.Join(dir, audit.ActiveFileName), append(mustMarshal(t, earlier), rec...))
	s, _ := openStore(t, audit.Options{Dir: dir, MaxRetainedFiles: 1, Now: func() time.Time { return afterGens }}, audit.TestHooks{})
	if st, gens := s.Stats(), generationsIn(t, dir); st.RotatedRecords != 0 || len(gens) != 1 || gens[0] != gen2 {
		t.Errorf("stats %+v, generations %v; want gen1 removed under the later record, no record written", st, gens)
	}
}
