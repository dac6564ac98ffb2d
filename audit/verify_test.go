//go:build unix

package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// The caller whose mint retention rotates away, and the others who keep
// the store busy.
const (
	trailCaller = "unix-peer:uid=4242"
	trailMintID = "mint-of-4242"
)

// rotatedAway builds a store whose first generation held trailCaller's
// one mint (its intent and outcome) and was deleted by retention, and
// returns its directory and the bytes of every file retention deleted.
func rotatedAway(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	rm := newRemoved(dir)
	clock := &fixedClock{t: t0}
	s, err := audit.OpenWithHooks(audit.Options{Dir: dir, MaxFileBytes: retentionCap, MaxRetainedFiles: 2, Now: clock.Now},
		audit.TestHooks{MinFileBytes: retentionCap, Remove: rm.hook})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := intent(trailMintID)
	in.CallerIdentity = trailCaller
	appendOK(t, s, in)
	appendOK(t, s, mintOutcome(trailMintID, trailCaller))
	for i := 0; ; i++ {
		if i > 2000 {
			t.Fatal("the caller's mint was not rotated away after 2000 appends")
		}
		if i > 0 && !storeHolds(t, dir, trailMintID) && s.Stats().RotatedRecords >= 6 {
			break // gone, and its count carried on more than once
		}
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		id := fmt.Sprintf("q%04d", i)
		appendOK(t, s, mintOutcome(id, fmt.Sprintf("unix-peer:uid=%d", 1000+i%3)))
	}
	return dir, rm.files
}

// storeHolds reports whether a file of dir holds the text s.
func storeHolds(t *testing.T, dir, s string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// copyStore copies dir (its regular files) to a fresh directory.
func copyStore(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func verify(t *testing.T, dir string) *audit.VerifyReport {
	t.Helper()
	rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: dir})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

// TestAMintRotatedAwayIsStillCountedAndTheTrailVerifies is issue 41's
// acceptance at the store: a caller mints, the store rotates until the file
// holding the mint is deleted; the scan by identity still counts the
// mint, and Verify finds the trail whole.
func TestAMintRotatedAwayIsStillCountedAndTheTrailVerifies(t *testing.T) {
	dir, deleted := rotatedAway(t)
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	var got *audit.IdentityInvocations
	for i, r := range rep.InvocationsByIdentity {
		if r.CallerIdentity == trailCaller {
			if got != nil {
				t.Fatalf("%s has two rows: %+v and %+v", trailCaller, *got, r)
			}
			got = &rep.InvocationsByIdentity[i]
		}
	}
	if got == nil || got.Verb != vocab.Mint || got.Result != audit.ResultFirstMint || got.Invocations != 1 || got.Rotated != 1 {
		t.Fatalf("%s's invocations: %+v; want its one first_mint, counted by a rotated record", trailCaller, got)
	}
	if rep.Anomalies() {
		t.Errorf("the scan found anomalies: %+v", rep.StoreAnomalies)
	}
	v := verify(t, dir)
	if !v.OK() || v.RotatedRecords == 0 || v.NewestRotation < 6 || len(deleted) < 6 {
		t.Fatalf("Verify: %+v; want no problem, and rotated records of every deletion", v)
	}
}

// TestVerifyNamesEachBreakOfTheTrail: each way of breaking the trail, on
// a copy of the store, is found and named; the store itself still
// verifies.
func TestVerifyNamesEachBreakOfTheTrail(t *testing.T) {
	dir, deleted := rotatedAway(t)
	records := func(d string) []*audit.Record { return rotatedRecords(t, d) }
	recs := records(dir)
	newest, oldest := recs[len(recs)-1], recs[0]
	cases := []struct {
		name   string
		tamper func(t *testing.T, d string)
		want   audit.VerifyProblemKind
	}{
		{"the rotated record carrying the mint removed", func(t *testing.T, d string) {
			removeLine(t, d, func(r *audit.Record) bool { return carries(r, trailCaller) })
		}, audit.VerifyRotatedRecordMissing},
		{"the oldest rotated record kept removed", func(t *testing.T, d string) {
			removeLine(t, d, func(r *audit.Record) bool { return r.Admin.Rotation == oldest.Admin.Rotation })
		}, audit.VerifyRotatedRecordMissing},
		{"the newest rotated record removed", func(t *testing.T, d string) {
			removeLine(t, d, func(r *audit.Record) bool { return r.Admin.Rotation == newest.Admin.Rotation })
		}, audit.VerifyUnrecordedDeletion},
		{"a deleted file's bytes kept under its name", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, newest.Admin.File), deleted[newest.Admin.File])
		}, audit.VerifyDeletedFilePresent},
		{"the first deleted file put back", func(t *testing.T, d string) {
			for name, b := range deleted {
				if strings.Contains(string(b), trailMintID) {
					writeFile(t, filepath.Join(d, name), b)
				}
			}
		}, audit.VerifyUnexpectedGeneration},
		{"other bytes under a deleted file's name", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, newest.Admin.File), []byte("{}\n"))
		}, audit.VerifyDeletedFilePresent},
		{"a rotated record replayed", func(t *testing.T, d string) {
			appendTo(t, filepath.Join(d, audit.ActiveFileName), mustMarshalRecord(t, newest))
		}, audit.VerifyRotationDuplicate},
		{"a rotated record between two others removed", func(t *testing.T, d string) {
			if len(recs) < 3 {
				t.Skip("fewer than three rotated records kept")
			}
			removeLine(t, d, func(r *audit.Record) bool { return r.Admin.Rotation == recs[1].Admin.Rotation })
		}, audit.VerifyRotatedRecordMissing},
		{"a rotated record naming another next", func(t *testing.T, d string) {
			// The oldest record kept says the next generation was one
			// that is not the file its successor deleted.
			rewriteRotated(t, d, oldest.Admin.Rotation, func(r *audit.Record) { r.Admin.Next = "registrar-audit-99991231T235959Z-999999.jsonl" })
		}, audit.VerifyChainBroken},
		{"the oldest generation deleted without a record", func(t *testing.T, d string) {
			names, _ := filepath.Glob(filepath.Join(d, "registrar-audit-*.jsonl"))
			if err := os.Remove(names[0]); err != nil {
				t.Fatal(err)
			}
		}, audit.VerifyUnrecordedDeletion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := copyStore(t, dir)
			tc.tamper(t, d)
			rep := verify(t, d)
			if rep.OK() {
				t.Fatalf("Verify found nothing wrong; want %s", tc.want)
			}
			kinds := map[audit.VerifyProblemKind]bool{}
			for _, p := range rep.Problems {
				kinds[p.Kind] = true
				if p.File == "" || p.Detail == "" {
					t.Errorf("problem %+v names no file or says nothing", p)
				}
			}
			if !kinds[tc.want] {
				t.Errorf("problems %+v; want one %s", rep.Problems, tc.want)
			}
			if strings.Contains(tc.name, "between") && !strings.Contains(rep.Problems[0].Detail, fmt.Sprintf("hole among the numbers present is between %d and %d", recs[0].Admin.Rotation, recs[2].Admin.Rotation)) {
				t.Errorf("the first problem %+v does not name the hole", rep.Problems[0])
			}
		})
	}
	if rep := verify(t, dir); !rep.OK() {
		t.Errorf("the untouched store: %+v", rep.Problems)
	}
}

// TestVerifyOfAStoreWithoutRotatedRecords: a store retention never
// deleted from verifies; one whose oldest generations are gone with no
// record does not.
func TestVerifyOfAStoreWithoutRotatedRecords(t *testing.T) {
	clock := &fixedClock{t: t0}
	s, dir := openStore(t, audit.Options{MaxFileBytes: retentionCap, MaxRetainedFiles: 50, Now: clock.Now}, audit.TestHooks{MinFileBytes: retentionCap})
	for i := range 80 {
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		appendOK(t, s, mintOutcome(fmt.Sprintf("q%03d", i), "unix-peer:uid=1000"))
	}
	if rep := verify(t, dir); !rep.OK() || rep.RotatedRecords != 0 {
		t.Fatalf("a store never trimmed: %+v", rep)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(names) < 2 {
		t.Fatalf("%d generations, want several", len(names))
	}
	if err := os.Remove(names[0]); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, dir)
	if rep.OK() || rep.Problems[0].Kind != audit.VerifyUnrecordedDeletion || rep.Problems[0].File != filepath.Base(names[1]) {
		t.Errorf("after deleting the first generation by hand: %+v; want unrecorded_deletion at %s", rep.Problems, filepath.Base(names[1]))
	}
}

func TestVerifyRefusesWhatIsNotAStore(t *testing.T) {
	if _, err := audit.Verify(context.Background(), audit.VerifyOptions{}); err == nil {
		t.Error("Verify without a directory succeeded")
	}
	if _, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("Verify of a missing directory succeeded")
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: link}); err == nil {
		t.Error("Verify followed a symlinked directory")
	}
}

// carries reports whether a rotated record counts identity.
func carries(r *audit.Record, identity string) bool {
	for _, c := range r.Admin.Counts {
		if c.Identity == identity {
			return true
		}
	}
	return false
}

// removeLine removes from the files of d the rotated records match picks.
func removeLine(t *testing.T, d string, match func(*audit.Record) bool) {
	t.Helper()
	entries, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		path := filepath.Join(d, e.Name())
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, l := range lines(content) {
			if r, err := audit.Unmarshal([]byte(l)); err == nil && r.Phase == audit.PhaseAdmin && r.Admin.Action == audit.ActionRotated && match(r) {
				n++
				continue
			}
			kept = append(kept, l)
		}
		writeFile(t, path, []byte(strings.Join(kept, "")))
	}
	if n == 0 {
		t.Fatal("no rotated record matched")
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// mustMarshalRecord re-encodes a decoded record as its line.
func mustMarshalRecord(t *testing.T, r *audit.Record) []byte {
	t.Helper()
	return audit.Encode(r)
}

// rewriteRotated rewrites, in d, the rotated record numbered rotation with
// edit applied, as a valid line.
func rewriteRotated(t *testing.T, d string, rotation uint64, edit func(*audit.Record)) {
	t.Helper()
	entries, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		path := filepath.Join(d, e.Name())
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ls := lines(content)
		for i, l := range ls {
			r, err := audit.Unmarshal([]byte(l))
			if err != nil || r.Phase != audit.PhaseAdmin || r.Admin.Action != audit.ActionRotated || r.Admin.Rotation != rotation {
				continue
			}
			edit(r)
			ls[i] = string(audit.Encode(r))
			if _, err := audit.Unmarshal([]byte(ls[i])); err != nil {
				t.Fatalf("the edited record does not decode: %v", err)
			}
			writeFile(t, path, []byte(strings.Join(ls, "")))
			return
		}
	}
	t.Fatalf("no rotated record numbered %d", rotation)
}
