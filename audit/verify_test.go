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
	"syscall"
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
	// rotation is recs[i]'s number (0 past the records kept: the cases
	// that need it are skipped); hole is how Verify names a first hole.
	rotation := func(i int) uint64 {
		if i < 0 || i >= len(recs) {
			return 0
		}
		return recs[i].Admin.Rotation
	}
	hole := func(a, b uint64) string {
		return fmt.Sprintf("hole among the numbers present is between %d and %d", a, b)
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, d string)
		want   audit.VerifyProblemKind
		detail string // what a problem of the kind wanted says, when set
	}{
		{"the rotated record carrying the mint removed", func(t *testing.T, d string) {
			removeLine(t, d, func(r *audit.Record) bool { return carries(r, trailCaller) })
		}, audit.VerifyRotatedRecordMissing, ""},
		{"the oldest rotated record kept removed", func(t *testing.T, d string) {
			removeLine(t, d, func(r *audit.Record) bool { return r.Admin.Rotation == oldest.Admin.Rotation })
		}, audit.VerifyRotatedRecordMissing, ""},
		{"the newest rotated record removed", func(t *testing.T, d string) {
			removeLine(t, d, func(r *audit.Record) bool { return r.Admin.Rotation == newest.Admin.Rotation })
		}, audit.VerifyUnrecordedDeletion, ""},
		{"a deleted file's bytes kept under its name", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, newest.Admin.File), deleted[newest.Admin.File])
		}, audit.VerifyDeletedFilePresent, "present with the bytes the record describes"},
		{"the first deleted file put back", func(t *testing.T, d string) {
			for name, b := range deleted {
				if strings.Contains(string(b), trailMintID) {
					writeFile(t, filepath.Join(d, name), b)
				}
			}
		}, audit.VerifyUnexpectedGeneration, ""},
		{"other bytes under a deleted file's name", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, newest.Admin.File), []byte("{}\n"))
		}, audit.VerifyDeletedFilePresent, "present with other bytes than the record describes (sha256 " + sha256Hex([]byte("{}\n"))},
		{"a rotated record replayed", func(t *testing.T, d string) {
			appendTo(t, filepath.Join(d, audit.ActiveFileName), mustMarshalRecord(t, newest))
		}, audit.VerifyRotationDuplicate, ""},
		{"a rotated record between two others removed", func(t *testing.T, d string) {
			if len(recs) < 3 {
				t.Skip("fewer than three rotated records kept")
			}
			removeLine(t, d, func(r *audit.Record) bool { return r.Admin.Rotation == recs[1].Admin.Rotation })
		}, audit.VerifyRotatedRecordMissing, hole(rotation(0), rotation(2))},
		{"the newest rotated record renumbered past a hole", func(t *testing.T, d string) {
			if len(recs) < 3 {
				t.Skip("fewer than three rotated records kept")
			}
			rewriteRotated(t, d, newest.Admin.Rotation, func(r *audit.Record) { r.Admin.Rotation++ })
		}, audit.VerifyRotatedRecordMissing, hole(rotation(len(recs)-2), newest.Admin.Rotation+1)},
		{"a rotated record naming another next", func(t *testing.T, d string) {
			// The oldest record kept says the next generation was one
			// that is not the file its successor deleted.
			rewriteRotated(t, d, oldest.Admin.Rotation, func(r *audit.Record) { r.Admin.Next = "registrar-audit-99991231T235959Z-999999.jsonl" })
		}, audit.VerifyChainBroken, ""},
		{"the oldest generation deleted without a record", func(t *testing.T, d string) {
			names, _ := filepath.Glob(filepath.Join(d, "registrar-audit-*.jsonl"))
			if err := os.Remove(names[0]); err != nil {
				t.Fatal(err)
			}
		}, audit.VerifyUnrecordedDeletion, ""},
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
			said := false
			for _, p := range rep.Problems {
				kinds[p.Kind] = true
				if p.File == "" || p.Detail == "" {
					t.Errorf("problem %+v names no file or says nothing", p)
				}
				said = said || (p.Kind == tc.want && strings.Contains(p.Detail, tc.detail))
			}
			if !kinds[tc.want] {
				t.Errorf("problems %+v; want one %s", rep.Problems, tc.want)
			} else if !said {
				t.Errorf("problems %+v; want the %s one to say %q", rep.Problems, tc.want, tc.detail)
			}
			if strings.Contains(tc.name, "between") && !strings.Contains(rep.Problems[0].Detail, tc.detail) {
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
	fresh := t.TempDir() // the active file alone, not a generation yet
	writeFile(t, filepath.Join(fresh, audit.ActiveFileName), mustMarshal(t, intent("q1")))
	if rep := verify(t, fresh); !rep.OK() || len(rep.Files) != 1 {
		t.Fatalf("a store of its active file alone: %+v", rep)
	}
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

// TestVerifyNamesAStoreFileItCannotRead: under a store name, a symbolic
// link, a directory or a FIFO (never followed nor read), and a file Verify
// may not open, are each named unreadable_file, and the readable rest is
// still checked. Root opens every file, so the last case runs in a child
// process as the unprivileged user nobody (uid 65534).
func TestVerifyNamesAStoreFileItCannotRead(t *testing.T) {
	if d := os.Getenv("AUDIT_VERIFY_UNREADABLE_DIR"); d != "" {
		checkVerifyUnreadable(t, verify(t, d), os.Getenv("AUDIT_VERIFY_UNREADABLE_NAME"), "could not be opened (permission denied)")
		return
	}
	dir, _ := rotatedAway(t)
	names, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(names) < 2 {
		t.Fatalf("%d generations, want at least 2", len(names))
	}
	victim := filepath.Base(names[len(names)-1])
	replace := func(t *testing.T, path string, make func(string) error) {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := make(path); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, detail string
		break_       func(t *testing.T, path string)
	}{
		{"a symbolic link", "is a symbolic link, not a regular file", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, target, b)
			replace(t, path, func(p string) error { return os.Symlink(target, p) })
		}},
		{"a directory", "is a directory, not a regular file", func(t *testing.T, path string) {
			replace(t, path, func(p string) error { return os.Mkdir(p, 0o700) })
		}},
		{"a FIFO", "is a named pipe (FIFO), not a regular file", func(t *testing.T, path string) {
			replace(t, path, func(p string) error { return syscall.Mkfifo(p, 0o600) })
		}},
		{"a socket", "is a socket, not a regular file", func(t *testing.T, path string) {
			replace(t, path, func(p string) error { return syscall.Mknod(p, syscall.S_IFSOCK|0o600, 0) })
		}},
		{"a device", "is a character device, not a regular file", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mknod(path, syscall.S_IFCHR|0o600, 0x103); err != nil { // /dev/null's numbers
				t.Skipf("cannot make a device node here: %v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := copyStore(t, dir)
			tc.break_(t, filepath.Join(d, victim))
			checkVerifyUnreadable(t, verify(t, d), victim, tc.detail)
		})
	}
	// The active file is a store name too; a directory or a symbolic link
	// under a name that is not the store's is none of Verify's business.
	t.Run("the active file a FIFO, beside others' entries", func(t *testing.T) {
		d := copyStore(t, dir)
		replace(t, filepath.Join(d, audit.ActiveFileName), func(p string) error { return syscall.Mkfifo(p, 0o600) })
		if err := os.Mkdir(filepath.Join(d, "lost+found"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(d, victim), filepath.Join(d, "notes")); err != nil {
			t.Fatal(err)
		}
		checkVerifyUnreadable(t, verify(t, d), audit.ActiveFileName, "is a named pipe (FIFO), not a regular file")
	})
	t.Run("a file it may not open", func(t *testing.T) {
		base, err := os.MkdirTemp("", "verify-unreadable-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		d := filepath.Join(base, "audit")
		if err := os.Rename(copyStore(t, dir), d); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{base, d} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			mode := os.FileMode(0o644)
			if e.Name() == victim {
				mode = 0
			}
			if err := os.Chmod(filepath.Join(d, e.Name()), mode); err != nil {
				t.Fatal(err)
			}
		}
		if os.Geteuid() != 0 {
			checkVerifyUnreadable(t, verify(t, d), victim, "could not be opened (permission denied)")
			return
		}
		runAsNobody(t, base, "TestVerifyNamesAStoreFileItCannotRead", "AUDIT_VERIFY_UNREADABLE_DIR="+d, "AUDIT_VERIFY_UNREADABLE_NAME="+victim)
	})
}

// checkVerifyUnreadable asserts rep names victim unreadable_file with
// detail, and read the rest of the store.
func checkVerifyUnreadable(t *testing.T, rep *audit.VerifyReport, victim, detail string) {
	t.Helper()
	var found bool
	for _, p := range rep.Problems {
		if p.Kind == audit.VerifyUnreadableFile {
			if p.File != victim || !strings.Contains(p.Detail, detail) {
				t.Errorf("problem %+v; want %s named, %q", p, victim, detail)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("problems %+v; want unreadable_file %s", rep.Problems, victim)
	}
	if rep.RotatedRecords == 0 {
		t.Error("the readable files' rotated records were not read")
	}
}

// sha256Hex is the lowercase hex SHA-256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// A store file that cannot be read to its end (here a directory, as a
// file replaced by one between the listing and the read would be) is
// named unreadable_file, at line 0 when not a line of it was read.
func TestVerifyNamesAFileItCannotReadToItsEnd(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, audit.ActiveFileName), 0o700); err != nil {
		t.Fatal(err)
	}
	probs, err := audit.VerifyFile(context.Background(), dir, audit.ActiveFileName)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 1 || probs[0].Kind != audit.VerifyUnreadableFile || probs[0].File != audit.ActiveFileName || probs[0].Line != 0 ||
		!strings.Contains(probs[0].Detail, "could not be read to its end") {
		t.Fatalf("problems %+v; want unreadable_file %s at line 0, not read to its end", probs, audit.ActiveFileName)
	}
}

// doneAfter is a context whose Err is nil for its first n calls and
// context.Canceled after: one done while Verify reads.
type doneAfter struct {
	context.Context
	n int
}

func (c *doneAfter) Err() error {
	if c.n > 0 {
		c.n--
		return nil
	}
	return context.Canceled
}

// Verify returns ctx's error once ctx is done: at a file's start, even an
// empty file's, and within a long file every 4096 lines.
func TestVerifyStopsWhenItsContextIsDone(t *testing.T) {
	dir := t.TempDir()
	active := filepath.Join(dir, audit.ActiveFileName)
	writeFile(t, active, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := audit.Verify(ctx, audit.VerifyOptions{Dir: dir}); !errors.Is(err, context.Canceled) {
		t.Errorf("a done context and an empty active file: %v, want context.Canceled", err)
	}
	writeFile(t, active, []byte(strings.Repeat("{}\n", 3*4096)))
	if _, err := audit.Verify(&doneAfter{Context: context.Background(), n: 1}, audit.VerifyOptions{Dir: dir}); !errors.Is(err, context.Canceled) {
		t.Errorf("a context done after the first line of a file of %d lines: %v, want context.Canceled", 3*4096, err)
	}
}

// TestVerifyBoundsTheRotatedRecordsItKeeps: a store holding more rotated
// records than MaxVerifyRotated, each chained to the one before, is named
// too_many_rotated_records once, at the first record past the bound;
// every record is counted and none past the bound is kept.
func TestVerifyBoundsTheRotatedRecordsItKeeps(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 65,538 records")
	}
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	genName := func(i int) string {
		return fmt.Sprintf("registrar-audit-%s-%06d.jsonl", t0.Add(time.Duration(i)*time.Second).UTC().Format("20060102T150405Z"), i)
	}
	r := rotatedRec()
	r.Admin.Counts, r.Admin.Others, r.Admin.Folded = nil, nil, 0
	var b strings.Builder
	const n = audit.MaxVerifyRotated + 2
	for i := 1; i <= n; i++ {
		r.Admin.Rotation = uint64(i)
		r.Admin.File, r.Admin.Next = genName(i), genName(i+1)
		b.Write(audit.Encode(r))
	}
	writeFile(t, filepath.Join(dir, genName(n+1)), nil)
	writeFile(t, filepath.Join(dir, audit.ActiveFileName), []byte(b.String()))
	rep := verify(t, dir)
	if rep.RotatedRecords != n {
		t.Errorf("RotatedRecords %d, want every one counted (%d)", rep.RotatedRecords, n)
	}
	if rep.NewestRotation != audit.MaxVerifyRotated {
		t.Errorf("NewestRotation %d, want %d: the records past the bound are not kept", rep.NewestRotation, audit.MaxVerifyRotated)
	}
	var tooMany int
	for _, p := range rep.Problems {
		if p.Kind == audit.VerifyTooManyRotated {
			tooMany++
			if p.File != audit.ActiveFileName || p.Line != audit.MaxVerifyRotated+1 {
				t.Errorf("problem %+v; want it at %s line %d", p, audit.ActiveFileName, audit.MaxVerifyRotated+1)
			}
		}
	}
	if tooMany != 1 || rep.ProblemCount > 3 {
		t.Errorf("%d too_many_rotated_records problems of %d, want exactly 1 and no flood: %+v", tooMany, rep.ProblemCount, rep.Problems)
	}
}
