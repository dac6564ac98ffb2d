package logthrottle_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time              { return c.t }
func (c *clock) advance(d time.Duration)     { c.t = c.t.Add(d) }
func lines(b *bytes.Buffer) []string         { return strings.Split(strings.TrimSpace(b.String()), "\n") }
func newLogger(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

func TestOneLinePerCausePerIntervalCarryingTheSuppressedCount(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	th := logthrottle.New(newLogger(&buf), time.Minute, c.now)
	ctx := context.Background()

	if !th.Log(ctx, "write", slog.LevelError, "append failed", slog.String("error", "ENOSPC")) {
		t.Fatal("the first line of a cause was suppressed")
	}
	for range 5 {
		c.advance(time.Second)
		if th.Log(ctx, "write", slog.LevelError, "append failed") {
			t.Fatal("a repeat inside the interval was emitted")
		}
	}
	// Another cause is not held back by the first.
	if !th.Log(ctx, "rotate", slog.LevelError, "rotation failed") {
		t.Fatal("a second cause was suppressed by the first")
	}
	c.advance(55 * time.Second) // 60 s after the first line
	if !th.Log(ctx, "write", slog.LevelError, "append failed") {
		t.Fatal("the first line after the interval was suppressed")
	}
	got := lines(&buf)
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(got), buf.String())
	}
	for i, want := range []string{"suppressed=0", "suppressed=0", "suppressed=5"} {
		if !strings.Contains(got[i], want) || !strings.Contains(got[i], "level=ERROR") {
			t.Errorf("line %d %q, want an ERROR line with %s", i, got[i], want)
		}
	}
	if !strings.Contains(got[0], "error=ENOSPC") {
		t.Errorf("line 0 %q lost its attributes", got[0])
	}
	// The count restarts after each emitted line.
	c.advance(time.Minute)
	th.Log(ctx, "write", slog.LevelError, "append failed")
	if last := lines(&buf)[3]; !strings.Contains(last, "suppressed=0") {
		t.Errorf("after an emitted line the count did not restart: %q", last)
	}
}

func TestAClockSteppedBackDoesNotSilenceACause(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	th := logthrottle.New(newLogger(&buf), time.Minute, c.now)
	th.Log(context.Background(), "k", slog.LevelError, "x")
	c.advance(-time.Hour)
	if !th.Log(context.Background(), "k", slog.LevelError, "x") {
		t.Fatal("a clock stepped back an hour suppressed the next line for an hour")
	}
}

func TestLinesBelowTheLevelAreNeitherEmittedNorCounted(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	th := logthrottle.New(logger, time.Minute, c.now)
	if th.Log(context.Background(), "k", slog.LevelWarn, "below") {
		t.Fatal("a line below the level was emitted")
	}
	if !th.Log(context.Background(), "k", slog.LevelError, "at") {
		t.Fatal("a WARN line below the level held back the next ERROR line")
	}
	if got := buf.String(); !strings.Contains(got, "suppressed=0") || strings.Contains(got, "below") {
		t.Errorf("log %q", got)
	}
}

func TestConcurrentCallersEmitExactlyOneLine(t *testing.T) {
	var buf safeBuffer
	c := &clock{t: time.Unix(0, 0)}
	th := logthrottle.New(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour, c.now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				th.Log(context.Background(), "k", slog.LevelError, "x")
			}
		})
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines from 800 concurrent calls in one interval, want 1", n)
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
