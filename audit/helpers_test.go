package audit_test

import (
	"context"
	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// t0 is the fixed instant the fixtures use.
var t0 = time.Date(2026, 8, 23, 12, 34, 56, 789_000_000, time.UTC)

func intent(id string) *audit.Record {
	return &audit.Record{
		Phase:          audit.PhaseIntent,
		TS:             t0,
		RequestID:      id,
		Verb:           limiter.Mint,
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

func limited(bucket limiter.Bucket, count uint64) *audit.Record {
	return &audit.Record{
		Phase:          audit.PhaseLimited,
		TS:             t0.Add(61 * time.Second),
		Verb:           limiter.Mint,
		CallerIdentity: "unix-peer:uid=1000",
		LimitedBucket:  bucket,
		Count:          count,
		WindowStart:    t0,
		WindowEnd:      t0.Add(60 * time.Second),
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
