//go:build unix

package audit_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"github.com/registrar-otel/registrar-otel/vocab"
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

func TestOpenValidatesOptions(t *testing.T) {
	if _, err := audit.Open(audit.Options{}); err == nil || !strings.Contains(err.Error(), "audit_record_dir") {
		t.Errorf("Open without Dir = %v; want an error naming audit_record_dir", err)
	}
	_, err := audit.Open(audit.Options{Dir: t.TempDir(), MaxFileBytes: 65535})
	if err == nil || !strings.Contains(err.Error(), "audit_max_file_bytes") {
		t.Errorf("Open with MaxFileBytes 65535 = %v; want an error naming audit_max_file_bytes", err)
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

// t0 is the fixed instant the fixtures use.
var t0 = time.Date(2026, 8, 23, 12, 34, 56, 789_000_000, time.UTC)

func intent(id string) *audit.Record {
	return &audit.Record{
		Phase:          audit.PhaseIntent,
		TS:             t0,
		RequestID:      id,
		Verb:           vocab.Mint,
		CallerIdentity: "unix-peer:uid=1000",
		Requested:      &audit.Requested{ServiceName: "review", Host: "h1", Instance: 7},
	}
}

func outcome(id string, o audit.Outcome) *audit.Record {
	r := intent(id)
	r.Phase = audit.PhaseOutcome
	r.TS = t0.Add(250 * time.Millisecond)
	r.RegistrationID = "h1-review-007"
	r.Outcome = &o
	return r
}

func limited(bucket vocab.Bucket, count uint64) *audit.Record {
	return &audit.Record{
		Phase:          audit.PhaseLimited,
		TS:             t0.Add(61 * time.Second),
		Verb:           vocab.Mint,
		CallerIdentity: "unix-peer:uid=1000",
		LimitedBucket:  bucket,
		Count:          count,
		WindowStart:    t0,
		WindowEnd:      t0.Add(60 * time.Second),
	}
}

// adminReset is a limits_reset admin record: who reset the buckets of
// verbs × buckets of identity.
func adminReset(who, identity string, verbs []vocab.Verb, buckets []vocab.Bucket) *audit.Record {
	return &audit.Record{
		Phase:          audit.PhaseAdmin,
		TS:             t0.Add(5 * time.Minute),
		CallerIdentity: who,
		Admin:          &audit.Admin{Action: audit.ActionLimitsReset, Identity: identity, Verbs: verbs, Buckets: buckets},
	}
}

// mustMarshal returns r's line or fails the test.
func mustMarshal(t testing.TB, r *audit.Record) []byte {
	t.Helper()
	line, err := audit.Marshal(r)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return line
}

// fixedClock returns a settable clock, safe for concurrent use.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// openStore opens a store in a fresh directory with a fixed clock.
func openStore(t *testing.T, opts audit.Options, th audit.TestHooks) (*audit.Store, string) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "audit")
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0 }
	}
	s, err := audit.OpenWithHooks(opts, th)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, opts.Dir
}

// openBenchStore opens a store on the benchmark's disk, with the real
// clock and no test hooks; the caller closes it.
func openBenchStore(b *testing.B) *audit.Store {
	b.Helper()
	s, err := audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit")})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func appendOK(t testing.TB, s *audit.Store, r *audit.Record) {
	t.Helper()
	if err := s.Append(context.Background(), r); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func readActive(t testing.TB, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, audit.ActiveFileName))
	if err != nil {
		t.Fatalf("reading active file: %v", err)
	}
	return b
}

// writeLines writes raw content as the active file of a fresh store
// directory and returns the directory.
func writeStore(t testing.TB, content string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, audit.ActiveFileName), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// logBuffer is the shared test log destination.
type logBuffer = logtest.Buffer

func newLogger(b *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines splits content into its '\n'-terminated lines (a trailing
// unterminated part is returned too).
func lines(content []byte) []string {
	s := string(content)
	if s == "" {
		return nil
	}
	parts := strings.SplitAfter(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}
