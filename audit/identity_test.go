//go:build unix

package audit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// openLogged opens a store with a fixed clock and a captured log.
func openLogged(t *testing.T, clock *fixedClock) (*audit.Store, string, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s, dir := openStore(t, audit.Options{Logger: newLogger(logs), Now: clock.Now}, audit.TestHooks{})
	return s, dir, logs
}

func TestAnAppendAfterThePathStopsNamingTheActiveFileGoesToAFreshOne(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause audit.ReopenCause
		// change alters the directory; it returns a file that must not
		// receive the next record ("" if none is left to check).
		change func(t *testing.T, dir string) string
		// wantLines is the active file's line count after the next append.
		wantLines int
	}{
		{"deleted", audit.ReopenFileDeleted, func(t *testing.T, dir string) string {
			must(t, os.Remove(filepath.Join(dir, audit.ActiveFileName)))
			return ""
		}, 1},
		{"renamed", audit.ReopenFileRenamed, func(t *testing.T, dir string) string {
			old := filepath.Join(dir, "moved.jsonl")
			must(t, os.Rename(filepath.Join(dir, audit.ActiveFileName), old))
			return old
		}, 1},
		{"replaced", audit.ReopenFileReplaced, func(t *testing.T, dir string) string {
			// logrotate "create": move away, create an empty file in place.
			old := filepath.Join(dir, "moved.jsonl")
			must(t, os.Rename(filepath.Join(dir, audit.ActiveFileName), old))
			must(t, os.WriteFile(filepath.Join(dir, audit.ActiveFileName), nil, 0o644))
			return old
		}, 1},
		{"directory removed", audit.ReopenDirectoryRemoved, func(t *testing.T, dir string) string {
			must(t, os.RemoveAll(dir))
			return ""
		}, 1},
		{"directory replaced", audit.ReopenDirectoryReplaced, func(t *testing.T, dir string) string {
			old := dir + ".old"
			must(t, os.Rename(dir, old))
			must(t, os.Mkdir(dir, 0o700))
			return filepath.Join(old, audit.ActiveFileName)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir, logs := openLogged(t, &fixedClock{t: t0})
			appendOK(t, s, intent("before"))
			stale := tc.change(t, dir)
			appendOK(t, s, intent("after"))

			got := lines(readActive(t, dir))
			if len(got) != tc.wantLines || !strings.Contains(got[len(got)-1], `"request_id":"after"`) {
				t.Fatalf("active file at the configured path holds %q, want the new record", got)
			}
			if stale != "" {
				b, err := os.ReadFile(stale)
				must(t, err)
				if strings.Contains(string(b), `"after"`) || !strings.Contains(string(b), `"before"`) {
					t.Fatalf("the file the path no longer names got %q", b)
				}
			}
			fi, err := os.Stat(filepath.Join(dir, audit.ActiveFileName))
			must(t, err)
			di, err := os.Stat(dir)
			must(t, err)
			if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
				t.Errorf("modes: file %v, directory %v, want 0600 and 0700", fi.Mode(), di.Mode())
			}
			st := s.Stats()
			for c := range audit.NumReopenCauses {
				want := uint64(0)
				if audit.ReopenCause(c) == tc.cause {
					want = 1
				}
				if st.Reopens[c] != want {
					t.Errorf("reopens[%s] = %d, want %d", audit.ReopenCause(c), st.Reopens[c], want)
				}
			}
			if got := logs.Lines("level=ERROR", "cause="+tc.cause.String()); len(got) != 1 {
				t.Errorf("ERROR lines for cause %s: %q\n%s", tc.cause, got, logs)
			}
			// Later appends stay in the new file without reopening again.
			appendOK(t, s, intent("later"))
			if s.Stats().Reopens[tc.cause] != 1 || len(lines(readActive(t, dir))) != tc.wantLines+1 {
				t.Errorf("a second append reopened again or went elsewhere")
			}
			if rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Second)}); err != nil || rep.MalformedRecords != 0 {
				t.Errorf("scan: %+v, %v", rep, err)
			}
		})
	}
}

func TestAFailedReopenFailsAppendsClosedAndTheNextAppendRetries(t *testing.T) {
	for _, tc := range []struct {
		name         string
		break_, heal func(t *testing.T, dir string)
	}{
		{"a symlink planted at the active path",
			func(t *testing.T, dir string) {
				must(t, os.Remove(filepath.Join(dir, audit.ActiveFileName)))
				must(t, os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, audit.ActiveFileName)))
			},
			func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, audit.ActiveFileName))) }},
		{"a file where the directory was",
			func(t *testing.T, dir string) {
				must(t, os.RemoveAll(dir))
				must(t, os.WriteFile(dir, []byte("not a directory"), 0o600))
			},
			func(t *testing.T, dir string) { must(t, os.Remove(dir)) }},
		{"a world-writable directory in its place",
			func(t *testing.T, dir string) {
				must(t, os.RemoveAll(dir))
				must(t, os.Mkdir(dir, 0o700))
				must(t, os.Chmod(dir, 0o777))
			},
			func(t *testing.T, dir string) { must(t, os.Chmod(dir, 0o700)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir, logs := openLogged(t, &fixedClock{t: t0})
			appendOK(t, s, intent("before"))
			tc.break_(t, dir)
			for range 3 {
				err := s.Append(context.Background(), intent("refused"))
				var we *audit.WriteError
				if !errors.As(err, &we) || we.Op != "reopen" {
					t.Fatalf("append with an unusable path: %v, want a *WriteError at reopen", err)
				}
			}
			if st := s.Stats(); !st.LastAppendFailed || st.AppendFailures != 3 {
				t.Errorf("stats %+v, want the last append failed, 3 failures", st)
			}
			if _, err := os.Stat(filepath.Join(dir, "elsewhere")); err == nil {
				t.Errorf("a record was written through the symlink")
			}
			if got := logs.Lines("level=ERROR", "audit append failed", "step=reopen"); len(got) != 1 || !strings.Contains(got[0], "suppressed=0") {
				t.Errorf("ERROR lines %q, want one (the repeats suppressed)", got)
			}
			tc.heal(t, dir)
			appendOK(t, s, intent("after"))
			if got := lines(readActive(t, dir)); len(got) != 1 || !strings.Contains(got[0], `"after"`) {
				t.Errorf("after healing the active file holds %q", got)
			}
			if s.Stats().LastAppendFailed {
				t.Error("still marked failed after a successful append")
			}
		})
	}
}

func TestReopenServesSIGHUPInOrderWithAppends(t *testing.T) {
	s, dir, logs := openLogged(t, &fixedClock{t: t0})
	appendOK(t, s, intent("a"))
	// Unchanged path: the same file is reopened and appended to.
	must(t, s.Reopen())
	appendOK(t, s, intent("b"))
	if got := lines(readActive(t, dir)); len(got) != 2 {
		t.Fatalf("after a reopen of the same file: %q", got)
	}
	// logrotate: move, then SIGHUP; no detected-change reopen happens.
	must(t, os.Rename(filepath.Join(dir, audit.ActiveFileName), filepath.Join(dir, "old")))
	must(t, s.Reopen())
	appendOK(t, s, intent("c"))
	st := s.Stats()
	if st.Reopens[audit.ReopenSIGHUP] != 2 || st.Reopens[audit.ReopenFileRenamed] != 0 {
		t.Errorf("reopens %v, want 2 sighup, 0 renamed", st.Reopens)
	}
	if got := lines(readActive(t, dir)); len(got) != 1 || !strings.Contains(got[0], `"c"`) {
		t.Errorf("new active file %q", got)
	}
	if len(logs.Lines("level=ERROR")) != 0 || len(logs.Lines("level=INFO", "cause=sighup")) != 2 {
		t.Errorf("log:\n%s", logs)
	}
	s.Close()
	if err := s.Reopen(); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("Reopen after Close = %v, want ErrClosed", err)
	}
}

func TestConcurrentAppendsAcrossReopensLoseNothing(t *testing.T) {
	s, dir, _ := openLogged(t, &fixedClock{t: t0})
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Append(context.Background(), intent(string(rune('a'+w))+"-"+string(rune('a'+i%26))+string(rune('a'+i/26)))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 20 {
		must(t, s.Reopen())
	}
	wg.Wait()
	if got := len(lines(readActive(t, dir))); got != writers*each {
		t.Fatalf("%d lines, want %d", got, writers*each)
	}
}

func TestFailedAppendsAreLoggedOncePerCausePerInterval(t *testing.T) {
	clock := &fixedClock{t: t0}
	f := &faults{}
	logs := &logBuffer{}
	s, _ := openStore(t, audit.Options{Logger: newLogger(logs), Now: clock.Now, ErrorLogInterval: time.Minute}, f.hooks())
	f.set(func(f *faults) { f.failSync = true })
	for range 5 {
		s.Append(context.Background(), intent("x"))
	}
	for range 2 {
		s.Append(context.Background(), outcome("x", audit.Outcome{Class: vocab.ClassFirstMint}))
	}
	clock.Set(t0.Add(61 * time.Second))
	s.Append(context.Background(), intent("y"))
	got := logs.Lines("level=ERROR", "audit append failed")
	if len(got) != 3 {
		t.Fatalf("ERROR lines %q, want 3 (intent, outcome, intent after the interval)", got)
	}
	for i, want := range []string{"phase=intent step=sync", "phase=outcome step=sync", "phase=intent step=sync"} {
		if !strings.Contains(got[i], want) || !strings.Contains(got[i], errInjected.Error()) {
			t.Errorf("line %d %q, want %s with its cause", i, got[i], want)
		}
	}
	if !strings.Contains(got[2], "suppressed=4") {
		t.Errorf("the line after the interval %q does not carry suppressed=4", got[2])
	}
	if st := s.Stats(); st.AppendFailures != 8 || !st.LastAppendFailed {
		t.Errorf("stats %+v", st)
	}
	// Invalid records are logged but do not make the store unwritable.
	f.reset()
	appendOK(t, s, intent("z"))
	if err := s.Append(context.Background(), &audit.Record{}); err == nil || s.Stats().LastAppendFailed {
		t.Errorf("an invalid record: %v, unwritable %v", err, s.Stats().LastAppendFailed)
	}
}

// TestAReopenClearsABrokenStore holds that a successful reopen (SIGHUP)
// clears the broken state a failed rollback left: the torn line stays in
// the old file and appends go on in the fresh one.
func TestAReopenClearsABrokenStore(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	appendOK(t, s, intent("q1"))
	f.set(func(f *faults) { f.failWrite, f.partial, f.failTruncate = true, 20, true })
	if err := s.Append(context.Background(), intent("q2")); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("got %v, want ErrBroken", err)
	}
	f.reset()
	must(t, os.Rename(filepath.Join(dir, audit.ActiveFileName), filepath.Join(dir, "old")))
	must(t, s.Reopen())
	if err := s.Append(context.Background(), intent("q3")); err != nil {
		t.Fatalf("append after a successful reopen of a broken store: %v, want it written", err)
	}
	if got := lines(readActive(t, dir)); len(got) != 1 || !strings.Contains(got[0], `"q3"`) {
		t.Errorf("the reopened active file holds %q, want q3 alone", got)
	}
	if s.Stats().LastAppendFailed {
		t.Error("still marked failed after a reopen and an append succeeded")
	}
}

// TestAFailedSIGHUPReopenMakesTheStoreUnwritable holds that a Reopen that
// fails (the SIGHUP path, with no append after it) turns the capacity
// state unwritable at once, and a successful one turns it back.
func TestAFailedSIGHUPReopenMakesTheStoreUnwritable(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("before"))
	p, err := audit.NewCapacityProbe(s, 0)
	must(t, err)
	audit.SetStatfs(p, func(string) (uint64, error) { return 1 << 40, nil })
	probe := func() audit.CapacityState {
		t.Helper()
		c, err := p.Probe()
		must(t, err)
		return c.State
	}
	if got := probe(); got != audit.CapacityOK {
		t.Fatalf("before the reopen: %v, want ok", got)
	}
	active := filepath.Join(dir, audit.ActiveFileName)
	must(t, os.Remove(active))
	must(t, os.Symlink(filepath.Join(dir, "elsewhere"), active))
	var we *audit.WriteError
	if err := s.Reopen(); !errors.As(err, &we) || we.Op != "reopen" {
		t.Fatalf("Reopen onto a symlink: %v, want a *WriteError at reopen", err)
	}
	if !s.Stats().LastAppendFailed {
		t.Error("LastAppendFailed is false after a failed reopen")
	}
	if got := probe(); got != audit.CapacityUnwritable {
		t.Errorf("after a failed reopen the capacity state is %v, want unwritable", got)
	}
	must(t, os.Remove(active))
	must(t, s.Reopen())
	if got := probe(); got != audit.CapacityOK {
		t.Errorf("after a successful reopen the capacity state is %v, want ok", got)
	}
}

// Issue 27, item 3: a chmod 0777 of the record directory while the store is
// open let appends continue. Each append now checks the open directory
// first and fails closed; CheckDir (the daemon's tick) reports it.
func TestALoosenedRecordDirectoryFailsAppendsUntilPutRight(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("r1"))
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	err := s.Append(context.Background(), intent("r2"))
	if !errors.Is(err, audit.ErrUnsafeStore) || !strings.Contains(err.Error(), "has mode 0777") {
		t.Fatalf("append to a 0777 directory: %v, want an unsafe-store refusal naming the mode", err)
	}
	if err := s.CheckDir(); !errors.Is(err, audit.ErrUnsafeStore) {
		t.Errorf("CheckDir: %v, want the unsafe-store error", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckDir(); err != nil {
		t.Errorf("CheckDir after chmod 0700: %v", err)
	}
	appendOK(t, s, intent("r3"))
	s.Close()
	if err := s.CheckDir(); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("CheckDir after Close: %v, want ErrClosed", err)
	}
}

// The tick's CheckDir marks the store unwritable at once, so the capacity
// state shows a loosened directory before any append fails; the first
// append after it is put right clears it.
func TestCheckDirMarksTheStoreUnwritableBeforeAnyAppend(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckDir(); !errors.Is(err, audit.ErrUnsafeStore) {
		t.Fatalf("CheckDir: %v", err)
	}
	if st := s.Stats(); !st.LastAppendFailed || st.AppendFailures != 0 {
		t.Errorf("after CheckDir alone: %+v, want unwritable with no append failure counted", st)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	appendOK(t, s, intent("r1"))
	if s.Stats().LastAppendFailed {
		t.Errorf("still unwritable after a successful append")
	}
}

// BenchmarkIdentityCheck measures the identity check every write path runs
// (lstat of the directory and of the active path, compared with the open
// ones) beside the durable append it guards (write + fsync, check
// included), on the same file system, so the check's share of an append is
// their ratio. Run both in one invocation with -count for an interleaved
// comparison.
func BenchmarkIdentityCheck(b *testing.B) {
	b.Run("append_fsynced", func(b *testing.B) {
		s := openBenchStore(b)
		defer s.Close()
		r := intent("bench.1")
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Append(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check_only", func(b *testing.B) {
		s := openBenchStore(b)
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			if changed, err := s.IdentityCheck(); changed || err != nil {
				b.Fatal(changed, err)
			}
		}
	})
}
