//go:build unix

package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
)

var errInjected = errors.New("injected fault")

// faults is a switchboard for faultyFile, shared by every active file the
// store opens.
type faults struct {
	mu           sync.Mutex
	failWrite    bool
	partial      int // bytes really written before a failing Write returns
	failSync     bool
	failTruncate bool
	writes       int
	syncs        int
	ops          []string
}

func (f *faults) set(fn func(f *faults)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faults) reset() {
	f.set(func(f *faults) {
		f.failWrite, f.partial, f.failSync, f.failTruncate = false, 0, false, false
		f.writes, f.syncs, f.ops = 0, 0, nil
	})
}

func (f *faults) hooks() audit.TestHooks {
	return audit.TestHooks{WrapFile: func(inner audit.File) audit.File { return faultyFile{inner, f} }}
}

type faultyFile struct {
	audit.File
	f *faults
}

func (w faultyFile) Write(p []byte) (int, error) {
	w.f.mu.Lock()
	fail, partial := w.f.failWrite, w.f.partial
	w.f.writes++
	w.f.ops = append(w.f.ops, "write")
	w.f.mu.Unlock()
	if fail {
		n, err := w.File.Write(p[:min(partial, len(p))])
		if err != nil {
			return n, err
		}
		return n, errInjected
	}
	return w.File.Write(p)
}

func (w faultyFile) Sync() error {
	w.f.mu.Lock()
	fail := w.f.failSync
	w.f.syncs++
	w.f.ops = append(w.f.ops, "sync")
	w.f.mu.Unlock()
	if fail {
		return errInjected
	}
	return w.File.Sync()
}

func (w faultyFile) Truncate(size int64) error {
	w.f.mu.Lock()
	fail := w.f.failTruncate
	w.f.ops = append(w.f.ops, "truncate")
	w.f.mu.Unlock()
	if fail {
		return errInjected
	}
	return w.File.Truncate(size)
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestOpenCreatesPrivateDirectoryWhateverTheUmask runs with a umask that
// would leave the directory 0500 and the file 0400: Open restates both.
func TestOpenCreatesPrivateDirectoryWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o277)
	defer syscall.Umask(old)
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("q1"))
	if got := mode(t, dir); got != 0o700 {
		t.Errorf("directory mode: got %#o, want 0700", got)
	}
	if got := mode(t, filepath.Join(dir, audit.ActiveFileName)); got != 0o600 {
		t.Errorf("active file mode: got %#o, want 0600", got)
	}
}

func TestOpenRefusesUnsafePaths(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, base string) string // returns the Dir to open
		want  string                                 // in the error
	}{
		{"symlinked directory", func(t *testing.T, base string) string {
			real := filepath.Join(base, "real")
			must(t, os.Mkdir(real, 0o700))
			must(t, os.Symlink(real, filepath.Join(base, "link")))
			return filepath.Join(base, "link")
		}, "is a symlink"},
		{"directory is a file", func(t *testing.T, base string) string {
			p := filepath.Join(base, "file")
			must(t, os.WriteFile(p, nil, 0o600))
			return p
		}, "is not a directory"},
		{"group-writable directory", func(t *testing.T, base string) string {
			p := filepath.Join(base, "loose")
			must(t, os.Mkdir(p, 0o700))
			must(t, os.Chmod(p, 0o770))
			return p
		}, "has mode 0770"},
		{"world-writable directory", func(t *testing.T, base string) string {
			p := filepath.Join(base, "loose")
			must(t, os.Mkdir(p, 0o700))
			must(t, os.Chmod(p, 0o1777))
			return p
		}, "has mode 0777"},
		{"symlinked active file", func(t *testing.T, base string) string {
			p := filepath.Join(base, "audit")
			must(t, os.Mkdir(p, 0o700))
			must(t, os.WriteFile(filepath.Join(base, "elsewhere"), nil, 0o600))
			must(t, os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(p, audit.ActiveFileName)))
			return p
		}, "is a symlink"},
		{"active file is a FIFO", func(t *testing.T, base string) string {
			p := filepath.Join(base, "audit")
			must(t, os.Mkdir(p, 0o700))
			must(t, syscall.Mkfifo(filepath.Join(p, audit.ActiveFileName), 0o600))
			return p
		}, "is not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t, t.TempDir())
			s, err := audit.Open(audit.Options{Dir: dir})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want a refusal")
			}
			if !errors.Is(err, audit.ErrUnsafeStore) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrUnsafeStore mentioning %q", err, tc.want)
			}
		})
	}
}

func TestOpenValidatesOptions(t *testing.T) {
	if _, err := audit.Open(audit.Options{}); err == nil || !strings.Contains(err.Error(), "audit_record_dir") {
		t.Errorf("Open without Dir = %v; want an error naming audit_record_dir", err)
	}
	_, err := audit.Open(audit.Options{Dir: t.TempDir(), MaxFileBytes: 65535})
	if err == nil || !strings.Contains(err.Error(), "audit_max_file_bytes") {
		t.Errorf("Open with MaxFileBytes 65535 = %v; want an error naming audit_max_file_bytes", err)
	}
}

func TestAppendWritesAndSyncsOneWholeLine(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	r := intent("q1")
	appendOK(t, s, r)
	if got, want := readActive(t, dir), mustMarshal(t, r); !bytes.Equal(got, want) {
		t.Errorf("file holds %q, want %q", got, want)
	}
	if got := strings.Join(f.ops, ","); got != "write,sync" {
		t.Errorf("got file operations %s, want write,sync", got)
	}
}

func TestAppendStampsAndCanonicalisesTS(t *testing.T) {
	clock := &fixedClock{t: time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.FixedZone("X", 3600))}
	s, dir := openStore(t, audit.Options{Now: clock.Now}, audit.TestHooks{})
	r := intent("q1")
	r.TS = time.Time{}
	appendOK(t, s, r)
	if !r.TS.IsZero() {
		t.Error("Append stamped the caller's record; want it untouched")
	}
	if got := string(readActive(t, dir)); !strings.Contains(got, `"ts":"2026-03-04T04:06:07.891Z"`) {
		t.Errorf("got %s, want ts 2026-03-04T04:06:07.891Z", got)
	}
}

func TestAppendAppliesTheBoundWithoutMutating(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	r := limited(limiter.PredecisionRefusal, 5)
	r.CallerIdentity = overLimitedCaller
	appendOK(t, s, r)
	if r.CallerIdentity != overLimitedCaller || r.Truncated != nil {
		t.Fatal("Append mutated the caller's record")
	}
	got, err := audit.Unmarshal(readActive(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.CallerIdentity) != 511 || got.Truncated[audit.PathCallerIdentity].FullBytes != uint64(len(overLimitedCaller)) {
		t.Errorf("got a %d-byte identity and %+v; want 511 bytes and the original's length %d",
			len(got.CallerIdentity), got.Truncated, len(overLimitedCaller))
	}
}

func TestAppendRefusesInvalidRecordsBeforeTouchingTheFile(t *testing.T) {
	var f faults
	var obs recordingObserver
	s, dir := openStore(t, audit.Options{Observer: &obs}, f.hooks())
	r := outcome("q1", audit.Outcome{Class: audit.ClassRefused}) // no reason
	err := s.Append(context.Background(), r)
	var pe *audit.PhaseError
	if !errors.As(err, &pe) || pe.Field != "outcome.reason" || !errors.Is(err, audit.ErrInvalidRecord) {
		t.Fatalf("got %v, want a PhaseError on outcome.reason", err)
	}
	if err := s.Append(context.Background(), nil); !errors.Is(err, audit.ErrInvalidRecord) {
		t.Errorf("Append(nil) = %v, want ErrInvalidRecord", err)
	}
	if f.writes != 0 || len(readActive(t, dir)) != 0 {
		t.Errorf("got %d writes, want none", f.writes)
	}
	if len(obs.calls) != 2 || obs.calls[0].phase != audit.PhaseOutcome || obs.calls[0].err == nil {
		t.Errorf("observer got %+v, want two failed calls, the first for phase outcome", obs.calls)
	}
}

type observed struct {
	phase audit.Phase
	err   error
}

type recordingObserver struct {
	mu    sync.Mutex
	calls []observed
}

func (o *recordingObserver) Appended(p audit.Phase, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		panic("negative duration")
	}
	o.calls = append(o.calls, observed{p, err})
}

func TestObserverSeesEveryAppend(t *testing.T) {
	var obs recordingObserver
	s, _ := openStore(t, audit.Options{Observer: &obs}, audit.TestHooks{})
	appendOK(t, s, intent("q1"))
	appendOK(t, s, limited(limiter.Admission, 1))
	want := []observed{{audit.PhaseIntent, nil}, {audit.PhaseLimited, nil}}
	if !slices.Equal(obs.calls, want) {
		t.Errorf("got %+v, want %+v", obs.calls, want)
	}
}

func TestConcurrentAppendsWriteOnlyWholeLines(t *testing.T) {
	const writers, each = 32, 40
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r := intent(fmt.Sprintf("w%d.%d", w, i))
				r.CallerIdentity = strings.Repeat("x", w*20) // lines of different lengths
				if err := s.Append(context.Background(), r); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	seen := map[string]bool{}
	for i, l := range lines(readActive(t, dir)) {
		r, err := audit.Unmarshal([]byte(l))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if seen[r.RequestID] {
			t.Fatalf("line %d: request_id %s written twice", i+1, r.RequestID)
		}
		seen[r.RequestID] = true
	}
	if len(seen) != writers*each {
		t.Errorf("got %d records, want %d", len(seen), writers*each)
	}
}

func TestFailedWriteLeavesNoPartialLine(t *testing.T) {
	cases := []struct {
		name   string
		inject func(f *faults)
		op     string
	}{
		{"short write", func(f *faults) { f.failWrite, f.partial = true, 37 }, "write"},
		{"write fails before any byte", func(f *faults) { f.failWrite, f.partial = true, 0 }, "write"},
		{"fsync fails", func(f *faults) { f.failSync = true }, "sync"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f faults
			s, dir := openStore(t, audit.Options{}, f.hooks())
			appendOK(t, s, intent("q1"))
			before := readActive(t, dir)

			f.set(tc.inject)
			err := s.Append(context.Background(), intent("q2"))
			var we *audit.WriteError
			if !errors.As(err, &we) || we.Op != tc.op || !errors.Is(err, errInjected) {
				t.Fatalf("got %v, want a WriteError at %s wrapping the fault", err, tc.op)
			}
			if got := readActive(t, dir); !bytes.Equal(got, before) {
				t.Fatalf("after a failed append the file holds %q, want %q", got, before)
			}

			f.reset()
			appendOK(t, s, intent("q3"))
			ls := lines(readActive(t, dir))
			if len(ls) != 2 || !strings.Contains(ls[1], `"request_id":"q3"`) {
				t.Errorf("got lines %q, want q1 then q3", ls)
			}
		})
	}
}

func TestFailedRollbackRefusesFurtherAppends(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	appendOK(t, s, intent("q1"))
	f.set(func(f *faults) { f.failWrite, f.partial, f.failTruncate = true, 20, true })
	if err := s.Append(context.Background(), intent("q2")); !errors.Is(err, audit.ErrBroken) || !errors.Is(err, errInjected) {
		t.Fatalf("got %v, want ErrBroken wrapping the fault", err)
	}
	f.reset()
	if err := s.Append(context.Background(), intent("q3")); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("after a failed rollback Append = %v, want ErrBroken (sticky)", err)
	}
	if f.writes != 0 {
		t.Errorf("a broken store wrote %d times, want 0", f.writes)
	}
	s.Close()

	// A restart terminates the torn line and appends after it; the scan
	// reports exactly that line.
	s2, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	appendOK(t, s2, intent("q4"))
	ls := lines(readActive(t, dir))
	if len(ls) != 3 || !strings.HasSuffix(ls[1], "\n") {
		t.Fatalf("got lines %q, want q1, the torn line, q4", ls)
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MalformedRecords != 1 || rep.Malformed[0].Line != 2 {
		t.Errorf("got %d malformed %+v, want 1 at line 2", rep.MalformedRecords, rep.Malformed)
	}
}

func TestTooLargeLineRefusedBeforeTouchingTheFile(t *testing.T) {
	var f faults
	th := f.hooks()
	th.MinFileBytes = 256
	s, dir := openStore(t, audit.Options{MaxFileBytes: 256}, th)
	r := intent("q1")
	r.CallerIdentity = strings.Repeat("x", 400)
	err := s.Append(context.Background(), r)
	var tl *audit.TooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, audit.ErrRecordTooLarge) || tl.MaxFileBytes != 256 || tl.LineBytes <= 256 {
		t.Fatalf("got %v, want a TooLargeError against 256 bytes", err)
	}
	if f.writes != 0 || len(readActive(t, dir)) != 0 {
		t.Errorf("got %d writes, want the file untouched", f.writes)
	}
}

// TestRotationAndRetention appends with a small cap and checks every
// invariant: files within the cap, names sorted oldest first, at most
// MaxRetainedFiles generations, whole lines, and the newest records kept in
// order with none lost inside the retained span.
func TestRotationAndRetention(t *testing.T) {
	const maxFile, retained, total = 1024, 3, 60
	clock := &fixedClock{t: t0}
	var logs logBuffer
	s, dir := openStore(t, audit.Options{
		MaxFileBytes: maxFile, MaxRetainedFiles: retained, Now: clock.Now, Logger: newLogger(&logs),
	}, audit.TestHooks{MinFileBytes: maxFile})
	for i := range total {
		clock.Set(t0.Add(time.Duration(i) * 400 * time.Millisecond)) // several rotations per second
		appendOK(t, s, intent(fmt.Sprintf("q%03d", i)))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var gens []string
	for _, e := range entries {
		if e.Name() != audit.ActiveFileName {
			gens = append(gens, e.Name())
		}
	}
	if len(gens) != retained {
		t.Fatalf("got generations %v, want %d", gens, retained)
	}
	var ids []string
	for _, name := range append(gens, audit.ActiveFileName) {
		content, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(content) > maxFile {
			t.Errorf("%s is %d bytes, over the %d cap", name, len(content), maxFile)
		}
		if got := mode(t, filepath.Join(dir, name)); got != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", name, got)
		}
		for _, l := range lines(content) {
			r, err := audit.Unmarshal([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ids = append(ids, r.RequestID)
		}
	}
	// Oldest first across the files, contiguous, ending with the newest.
	if !slices.IsSorted(ids) || ids[len(ids)-1] != fmt.Sprintf("q%03d", total-1) {
		t.Errorf("records out of order or newest missing: %v", ids)
	}
	first := 0
	fmt.Sscanf(ids[0], "q%d", &first)
	if len(ids) != total-first {
		t.Errorf("got %d records from q%03d on, want %d (none lost inside the retained span)", len(ids), first, total-first)
	}
	if !strings.Contains(logs.String(), "rotated") {
		t.Errorf("no rotation logged: %s", logs.String())
	}
}

func TestGenerationNamesSortAcrossRestartsAndClockSteps(t *testing.T) {
	clock := &fixedClock{t: t0}
	dir := filepath.Join(t.TempDir(), "audit")
	opts := audit.Options{Dir: dir, MaxFileBytes: 512, MaxRetainedFiles: 100, Now: clock.Now}
	th := audit.TestHooks{MinFileBytes: 512}
	next := 0
	write := func(n int) {
		s, err := audit.OpenWithHooks(opts, th)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			appendOK(t, s, intent(fmt.Sprintf("q%02d", next)))
			next++
		}
		s.Close()
	}
	write(6)                           // several rotations inside one second
	clock.Set(t0.Add(-time.Hour))      // the clock steps back,
	write(6)                           // after a restart;
	clock.Set(t0.Add(2 * time.Second)) // then forward again
	write(6)

	names, err := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	stamps := map[string]int{}
	for _, n := range append(names, filepath.Join(dir, audit.ActiveFileName)) {
		base := filepath.Base(n)
		if base != audit.ActiveFileName {
			stamps[base[len("registrar-audit-"):len("registrar-audit-")+16]]++
		}
		content, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines(content) {
			r, err := audit.Unmarshal([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.RequestID)
		}
	}
	if len(ids) != next || !slices.IsSorted(ids) {
		t.Errorf("reading generations in name order then the active file gives %v; want q00..q%02d in order", ids, next-1)
	}
	// The step back reused the last stamp rather than going backwards.
	if stamps["20260823T113456Z"] != 0 || stamps["20260823T123456Z"] < 4 || stamps["20260823T123458Z"] < 1 {
		t.Errorf("got stamps %v; want none at 11:34:56, several sharing 12:34:56, then 12:34:58", stamps)
	}
}

func TestTrimFailureIsLoggedNeverFatal(t *testing.T) {
	var logs logBuffer
	th := audit.TestHooks{MinFileBytes: 512, Remove: func(string) error { return errInjected }}
	s, dir := openStore(t, audit.Options{MaxFileBytes: 512, MaxRetainedFiles: 1, Logger: newLogger(&logs)}, th)
	for range 6 {
		appendOK(t, s, intent("q"))
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), errInjected.Error()) {
		t.Errorf("got logs %q, want a warning carrying the removal error", logs.String())
	}
	gens, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(gens) < 2 {
		t.Errorf("got %d generations, want the untrimmed ones kept", len(gens))
	}
}

func TestFailedRotationFailsTheAppendOnly(t *testing.T) {
	var fail bool
	var mu sync.Mutex
	th := audit.TestHooks{MinFileBytes: 512, Rename: func(a, b string) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errInjected
		}
		return os.Rename(a, b)
	}}
	s, dir := openStore(t, audit.Options{MaxFileBytes: 512}, th)
	appendOK(t, s, intent("q1"))
	appendOK(t, s, intent("q2"))
	mu.Lock()
	fail = true
	mu.Unlock()
	err := s.Append(context.Background(), intent("q3"))
	var we *audit.WriteError
	if !errors.As(err, &we) || we.Op != "rotate" {
		t.Fatalf("got %v, want a WriteError at rotate", err)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	appendOK(t, s, intent("q4"))
	gens, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(gens) != 1 || len(lines(readActive(t, dir))) != 1 {
		t.Errorf("got %d generations and active %q, want 1 and q4 alone", len(gens), readActive(t, dir))
	}
}

func TestOpenTerminatesATornFinalLine(t *testing.T) {
	dir := writeStore(t, goodIntent+"\n"+`{"record_version":1,"pha`)
	s, err := audit.Open(audit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendOK(t, s, intent("q9"))
	ls := lines(readActive(t, dir))
	if len(ls) != 3 || ls[1] != `{"record_version":1,"pha`+"\n" {
		t.Fatalf("got %q, want the torn line kept, terminated, and the new record after it", ls)
	}
}

func TestCloseRefusesLaterAppends(t *testing.T) {
	s, _ := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("q1"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Append(context.Background(), intent("q2")); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestCloseWaitsForConcurrentAppends(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 16 {
		wg.Go(func() {
			err := s.Append(context.Background(), intent(fmt.Sprintf("q%d", i)))
			if err != nil && !errors.Is(err, audit.ErrClosed) {
				t.Errorf("Append: %v", err)
			}
			if err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	s.Close()
	wg.Wait()
	if got := len(lines(readActive(t, dir))); got != ok {
		t.Errorf("got %d lines, want the %d acknowledged appends", got, ok)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
