package logthrottle_test

import (
	"bytes"
	"context"
	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
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

// safeBuffer is the shared test log destination.
type safeBuffer = logtest.Buffer

func TestMaxKeysSharesOneOverflowCauseBeyondTheBound(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	th := logthrottle.NewWith(newLogger(&buf), logthrottle.Options{Interval: time.Minute, Now: c.now, MaxKeys: 3})
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if !th.Log(ctx, k, slog.LevelError, "key "+k) {
			t.Fatalf("key %s within the bound was suppressed", k)
		}
	}
	// Beyond the bound, inside the interval: nothing is quiet, so the
	// first new key emits as the overflow cause and the next ones are its
	// repeats.
	if !th.Log(ctx, "d", slog.LevelError, "key d") {
		t.Fatal("the first key beyond the bound was suppressed")
	}
	for _, k := range []string{"e", "f", "g"} {
		if th.Log(ctx, k, slog.LevelError, "key "+k) {
			t.Fatalf("key %s beyond the bound was not held back with the overflow", k)
		}
	}
	// A remembered key keeps its own budget.
	for _, k := range []string{"a", "b", "c"} {
		if th.Log(ctx, k, slog.LevelError, "key "+k) {
			t.Fatalf("key %s repeated inside its interval was emitted", k)
		}
	}
	// After the interval, with every key owed a count (none quiet, none
	// forgotten), a new key is still the overflow, which emits with its
	// count.
	c.advance(time.Minute)
	if !th.Log(ctx, "h", slog.LevelError, "key h") {
		t.Fatal("the overflow cause was suppressed after its interval")
	}
	got := lines(&buf)
	if len(got) != 5 || !strings.Contains(got[4], "key h") || !strings.Contains(got[4], "suppressed=3") {
		t.Fatalf("lines:\n%s\nwant 5, the last the overflow's with suppressed=3", buf.String())
	}
}

func TestMaxKeysForgetsTheQuietKeysFirst(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	th := logthrottle.NewWith(newLogger(&buf), logthrottle.Options{Interval: time.Minute, Now: c.now, MaxKeys: 2})
	ctx := context.Background()
	th.Log(ctx, "quiet", slog.LevelError, "x")
	th.Log(ctx, "busy", slog.LevelError, "x")
	c.advance(30 * time.Second)
	th.Log(ctx, "busy", slog.LevelError, "x") // suppressed: busy is not quiet
	c.advance(30 * time.Second)
	// quiet's last line is an interval old with nothing suppressed: it is
	// forgotten and "new" gets its own cause; busy, owed a count, stays.
	if !th.Log(ctx, "new", slog.LevelError, "new") {
		t.Fatal("a new key was suppressed although a quiet key could be forgotten")
	}
	if !th.Log(ctx, "busy", slog.LevelError, "busy") {
		t.Fatal("busy, after its interval, was suppressed")
	}
	got := lines(&buf)
	if last := got[len(got)-1]; !strings.Contains(last, "busy") || !strings.Contains(last, "suppressed=1") {
		t.Errorf("busy's line %q lost its suppressed count: it was evicted while owed one", last)
	}
	// "other" cannot evict anyone (new and busy just logged): it is the
	// overflow, emitted once, and the next new key is its repeat.
	if !th.Log(ctx, "other", slog.LevelError, "x") || th.Log(ctx, "another", slog.LevelError, "x") {
		t.Error("past the bound with no quiet key, want one overflow line then silence")
	}
}

func TestOmitZeroLeavesTheAttributeOffUntilSomethingWasSuppressed(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	th := logthrottle.NewWith(newLogger(&buf), logthrottle.Options{Interval: time.Minute, Now: c.now, OmitZero: true})
	ctx := context.Background()
	th.Log(ctx, "k", slog.LevelError, "x")
	th.Log(ctx, "k", slog.LevelError, "x")
	c.advance(time.Minute)
	th.Log(ctx, "k", slog.LevelError, "x")
	got := lines(&buf)
	if len(got) != 2 || strings.Contains(got[0], SuppressedAttr) || !strings.Contains(got[1], "suppressed=1") {
		t.Errorf("lines %q: want the first without %s, the second with suppressed=1", got, SuppressedAttr)
	}
}

// SuppressedAttr is the attribute as a text handler writes it.
const SuppressedAttr = logthrottle.SuppressedKey + "="
