package coalesce_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
)

// clock is a settable clock. Its readings carry no monotonic reading, so
// comparisons use the wall values the test sets.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type rig struct {
	s     *coalesce.Sink
	store *audittest.AuditLog
	count *counting.Sink
	clk   *clock
	logs  *bytes.Buffer
}

func newRig(t testing.TB, window time.Duration) *rig {
	t.Helper()
	r := &rig{store: &audittest.AuditLog{}, count: counting.New(), clk: &clock{t0}, logs: &bytes.Buffer{}}
	s, err := coalesce.New(coalesce.Options{
		Next:   r.count,
		Store:  r.store,
		Window: window,
		Now:    r.clk.now,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	return r
}

func (r *rig) flood(id string, v limiter.Verb, b limiter.Bucket, n int) {
	for range n {
		r.s.Limited(context.Background(), limiter.Event{Identity: id, Verb: v, Bucket: b, RetryAfterSeconds: 1})
	}
}

func sumCounts(recs []audit.Record) uint64 {
	var n uint64
	for _, r := range recs {
		n += r.Count
	}
	return n
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := coalesce.New(coalesce.Options{Window: time.Minute}); err == nil {
		t.Error("nil store accepted")
	}
	if _, err := coalesce.New(coalesce.Options{Store: &audittest.AuditLog{}}); err == nil {
		t.Error("zero window accepted")
	}
}

func TestFloodMakesOneRecordPerWindowPerKey(t *testing.T) {
	for _, n := range []int{1, 10, 10_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			r := newRig(t, time.Minute)
			id := "unix-peer:uid=1000"
			for i := range n {
				r.flood(id, limiter.Mint, limiter.PredecisionRefusal, 1)
				r.flood(id, limiter.Mint, limiter.Admission, 1)
				if i == 0 {
					r.clk.advance(time.Second) // the rest arrive a second later
				}
			}
			r.clk.advance(time.Minute)
			r.s.Tick(context.Background(), r.clk.now())
			recs := r.store.Records()
			if len(recs) != 2 {
				t.Fatalf("%d records for a flood of %d per bucket, want 2 (one per key): the store must not grow with the flood", len(recs), n)
			}
			seen := map[limiter.Bucket]bool{}
			for _, rec := range recs {
				if rec.Phase != audit.PhaseLimited || rec.Count != uint64(n) || rec.Verb != limiter.Mint || rec.CallerIdentity != id {
					t.Fatalf("record %+v, want limited, count %d, mint, %s", rec, n, id)
				}
				if !rec.WindowStart.Equal(t0) || !rec.WindowEnd.Equal(t0.Add(time.Minute)) {
					t.Fatalf("window [%v, %v], want [%v, %v]", rec.WindowStart, rec.WindowEnd, t0, t0.Add(time.Minute))
				}
				if rec.RequestID != "" || rec.Requested != nil || rec.RegistrationID != "" || rec.Outcome != nil {
					t.Fatalf("record carries per-invocation fields: %+v", rec)
				}
				seen[rec.LimitedBucket] = true
			}
			if !seen[limiter.PredecisionRefusal] || !seen[limiter.Admission] {
				t.Fatalf("buckets merged: %v", seen)
			}
			// Every event was forwarded to the counting sink first.
			if c := r.count.Counts(); c.PredecisionRefusal != uint64(n) || c.Admission != uint64(n) {
				t.Fatalf("counting sink %+v, want %d per bucket", c, n)
			}
		})
	}
}

func TestKeysAreIdentityVerbAndBucket(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("a", limiter.Mint, limiter.Admission, 3)
	r.flood("b", limiter.Mint, limiter.Admission, 4)
	r.flood("a", limiter.Deregister, limiter.Admission, 5)
	r.flood("a", limiter.Mint, limiter.PredecisionRefusal, 6)
	r.s.Tick(context.Background(), t0.Add(time.Minute))
	recs := r.store.Records()
	if len(recs) != 4 || sumCounts(recs) != 18 {
		t.Fatalf("%d records summing %d, want 4 summing 18", len(recs), sumCounts(recs))
	}
}

func TestLateTickStampsTheDeadline(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("a", limiter.Mint, limiter.Admission, 5)
	// A tick before the deadline writes nothing.
	r.s.Tick(context.Background(), t0.Add(59*time.Second))
	if n := len(r.store.Records()); n != 0 {
		t.Fatalf("%d records before the deadline", n)
	}
	// A very late tick: the record still claims exactly the window.
	r.clk.advance(3 * time.Hour)
	r.s.Tick(context.Background(), r.clk.now())
	recs := r.store.Records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	rec := recs[0]
	if !rec.WindowEnd.Equal(t0.Add(time.Minute)) || !rec.TS.Equal(r.clk.now()) {
		t.Fatalf("window_end %v ts %v, want the deadline %v and the write instant %v", rec.WindowEnd, rec.TS, t0.Add(time.Minute), r.clk.now())
	}
}

func TestEventsAfterTheDeadlineOpenTheNextWindow(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("a", limiter.Mint, limiter.Admission, 5)
	r.clk.advance(90 * time.Second) // past the deadline, no tick yet
	r.flood("a", limiter.Mint, limiter.Admission, 7)
	r.s.Tick(context.Background(), r.clk.now())
	recs := r.store.Records()
	if len(recs) != 1 || recs[0].Count != 5 {
		t.Fatalf("records %+v, want the first window alone with count 5", recs)
	}
	r.s.Tick(context.Background(), r.clk.now().Add(time.Minute))
	recs = r.store.Records()
	if len(recs) != 2 || recs[1].Count != 7 || !recs[1].WindowStart.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("second window %+v, want count 7 opened at +90 s", recs[1])
	}
}

func TestCapFlushesOldestEarlyAndLosesNothing(t *testing.T) {
	r := newRig(t, time.Hour) // longer than the test walks: no window is due
	const keys = coalesce.MaxOpenWindows + 44
	total := 0
	for i := range keys {
		n := 1 + i%3
		r.flood("unix-peer:pid="+strconv.Itoa(i), limiter.Mint, limiter.PredecisionRefusal, n)
		total += n
		if st := r.s.Stats(); st.OpenWindows > coalesce.MaxOpenWindows {
			t.Fatalf("%d open windows, cap %d", st.OpenWindows, coalesce.MaxOpenWindows)
		}
		r.clk.advance(100 * time.Millisecond)
	}
	// Nothing was written on the flooding goroutine: the 44 windows wait
	// in the hand-off for the writer (here, the tick).
	if n, st := len(r.store.Records()), r.s.Stats(); n != 0 || st.Pending != 44 || st.EarlyFlushes != 44 {
		t.Fatalf("%d records written by Limited, %d handed off, %d early flushes; want 0, 44, 44", n, st.Pending, st.EarlyFlushes)
	}
	r.s.Tick(context.Background(), r.clk.now()) // no window is due yet
	early := r.store.Records()
	if len(early) != 44 || r.store.Batches() != 1 {
		t.Fatalf("%d early records in %d batches, want 44 in one", len(early), r.store.Batches())
	}
	for i, rec := range early {
		// The oldest window goes first, closed at the instant the
		// newcomer arrived: shorter than the configured window.
		wantStart := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		wantEnd := t0.Add(time.Duration(coalesce.MaxOpenWindows+i) * 100 * time.Millisecond)
		if rec.CallerIdentity != "unix-peer:pid="+strconv.Itoa(i) || !rec.WindowStart.Equal(wantStart) || !rec.WindowEnd.Equal(wantEnd) {
			t.Fatalf("early record %d: %s [%v, %v], want pid=%d [%v, %v]", i, rec.CallerIdentity, rec.WindowStart, rec.WindowEnd, i, wantStart, wantEnd)
		}
		if rec.WindowEnd.Sub(rec.WindowStart) >= time.Hour {
			t.Fatalf("early record spans %v, want less than the window", rec.WindowEnd.Sub(rec.WindowStart))
		}
	}
	r.s.Flush(context.Background(), r.clk.now())
	all := r.store.Records()
	if len(all) != keys || sumCounts(all) != uint64(total) {
		t.Fatalf("%d records summing %d, want %d records summing %d", len(all), sumCounts(all), keys, total)
	}
}

func TestFlushWritesEveryOpenWindowAtTheFlushInstant(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("a", limiter.Mint, limiter.Admission, 3)
	r.clk.advance(10 * time.Second)
	r.flood("b", limiter.Deregister, limiter.PredecisionRefusal, 2)
	r.clk.advance(5 * time.Second)
	r.s.Flush(context.Background(), r.clk.now())
	recs := r.store.Records()
	if len(recs) != 2 {
		t.Fatalf("%d records after flush, want 2", len(recs))
	}
	for _, rec := range recs {
		if !rec.WindowEnd.Equal(t0.Add(15 * time.Second)) {
			t.Fatalf("window_end %v, want the flush instant %v", rec.WindowEnd, t0.Add(15*time.Second))
		}
	}
	if st := r.s.Stats(); st.OpenWindows != 0 || st.Records != [2]uint64{1, 1} {
		t.Fatalf("stats after flush %+v", st)
	}
}

func TestWallClockStepCannotInvertAWindow(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("a", limiter.Mint, limiter.Admission, 1)
	// A flush instant before the window's start (a clock stepped back)
	// is clamped to the start: the record stays valid.
	r.s.Flush(context.Background(), t0.Add(-time.Hour))
	recs := r.store.Records()
	if len(recs) != 1 || !recs[0].WindowEnd.Equal(recs[0].WindowStart) {
		t.Fatalf("records %+v, want one with window_end = window_start", recs)
	}
}

func TestFailedWriteIsLoggedCountedAndRefusesNothing(t *testing.T) {
	for _, close := range []string{"tick", "flush", "early"} {
		t.Run(close, func(t *testing.T) {
			r := newRig(t, time.Minute)
			r.store.FailPhase(audit.PhaseLimited, errors.New("disk full"))
			r.flood("a", limiter.Mint, limiter.Admission, 4)
			switch close {
			case "tick":
				r.s.Tick(context.Background(), t0.Add(time.Minute))
			case "flush":
				r.s.Flush(context.Background(), t0)
			case "early":
				for i := range coalesce.MaxOpenWindows {
					r.flood("k"+strconv.Itoa(i), limiter.Mint, limiter.Admission, 1)
				}
				r.s.Tick(context.Background(), t0) // writes the hand-off
			}
			if st := r.s.Stats(); st.WriteFailures != 1 {
				t.Fatalf("write failures %d, want 1", st.WriteFailures)
			}
			if out := r.logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "counted record not written") || !strings.Contains(out, "disk full") {
				t.Fatalf("log %q, want a warning naming the error", out)
			}
			// The sink keeps working, and every event still reached the
			// counting sink.
			r.store.FailPhase(audit.PhaseLimited, nil)
			r.flood("a", limiter.Mint, limiter.Admission, 1)
			r.s.Flush(context.Background(), t0.Add(time.Second))
			if c := r.count.Count(limiter.Admission); c < 5 {
				t.Fatalf("counting sink saw %d events, want every one", c)
			}
		})
	}
}

func TestConcurrentEventsAreAllCounted(t *testing.T) {
	r := newRig(t, time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				r.flood("id"+strconv.Itoa((g*1000+i)%300), limiter.Verb(i%2), limiter.Bucket(g%2), 1)
			}
		})
	}
	wg.Wait()
	r.s.Flush(context.Background(), t0)
	if got := sumCounts(r.store.Records()); got != 8000 {
		t.Fatalf("records sum to %d, want 8000", got)
	}
}

// orderProbe is a coalescer's next sink that reads, at each event it is
// given, how many events the coalescer has counted so far (its snapshot,
// over every key).
type orderProbe struct {
	t    *testing.T
	s    *coalesce.Sink
	seen []uint64
}

func (p *orderProbe) Limited(context.Context, limiter.Event) {
	got := make(chan uint64, 1)
	go func() { // a coalescer forwarding under its lock would hang Snapshot
		ws, _ := p.s.Snapshot(nil)
		var n uint64
		for _, w := range ws {
			n += w.Count
		}
		got <- n
	}()
	select {
	case n := <-got:
		p.seen = append(p.seen, n)
	case <-time.After(10 * time.Second):
		p.t.Error("the next sink was called while the coalescer held its lock")
	}
}

// The seed's order: the coalescer delegates every event to the sink it
// wraps (in production the OTel sink, then the counting sink) before it
// counts the event, invalid ones included (forwarded, never counted).
func TestTheNextSinkSeesEveryEventBeforeTheCoalescerCountsIt(t *testing.T) {
	clk := &clock{t0}
	p := &orderProbe{t: t}
	s, err := coalesce.New(coalesce.Options{Next: p, Store: &audittest.AuditLog{}, Window: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	p.s = s
	ctx := context.Background()
	for i := range 4 {
		s.Limited(ctx, limiter.Event{Identity: "uid:1000", Verb: limiter.Mint, Bucket: limiter.Bucket(i % 2)})
	}
	s.Limited(ctx, limiter.Event{Identity: "uid:1000", Verb: limiter.Verb(99), Bucket: limiter.Admission})
	if want := []uint64{0, 1, 2, 3, 4}; !slices.Equal(p.seen, want) {
		t.Fatalf("counted before each forward: %v, want %v (the next sink first, every event)", p.seen, want)
	}
}
