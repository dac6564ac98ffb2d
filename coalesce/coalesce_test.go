package coalesce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// clock is a settable clock. Its readings carry no monotonic reading, so
// comparisons use the wall values the test sets.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type rig struct {
	s     *Sink
	store *audittest.AuditLog
	count *counting.Sink
	clk   *clock
	logs  *bytes.Buffer
}

func newRig(t testing.TB, window time.Duration) *rig {
	t.Helper()
	r := &rig{store: &audittest.AuditLog{}, count: counting.New(), clk: &clock{t0}, logs: &bytes.Buffer{}}
	s, err := New(Options{
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

func (r *rig) flood(id string, v vocab.Verb, b vocab.Bucket, n int) {
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
	if _, err := New(Options{Window: time.Minute}); err == nil {
		t.Error("nil store accepted")
	}
	if _, err := New(Options{Store: &audittest.AuditLog{}}); err == nil {
		t.Error("zero window accepted")
	}
}

func TestFloodMakesOneRecordPerWindowPerKey(t *testing.T) {
	for _, n := range []int{1, 10, 10_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			r := newRig(t, time.Minute)
			id := "unix-peer:uid=1000"
			for i := range n {
				r.flood(id, vocab.Mint, vocab.PredecisionRefusal, 1)
				r.flood(id, vocab.Mint, vocab.Admission, 1)
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
			seen := map[vocab.Bucket]bool{}
			for _, rec := range recs {
				if rec.Phase != audit.PhaseLimited || rec.Count != uint64(n) || rec.Verb != vocab.Mint || rec.CallerIdentity != id {
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
			if !seen[vocab.PredecisionRefusal] || !seen[vocab.Admission] {
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
	r.flood("a", vocab.Mint, vocab.Admission, 3)
	r.flood("b", vocab.Mint, vocab.Admission, 4)
	r.flood("a", vocab.Deregister, vocab.Admission, 5)
	r.flood("a", vocab.Mint, vocab.PredecisionRefusal, 6)
	r.s.Tick(context.Background(), t0.Add(time.Minute))
	recs := r.store.Records()
	if len(recs) != 4 || sumCounts(recs) != 18 {
		t.Fatalf("%d records summing %d, want 4 summing 18", len(recs), sumCounts(recs))
	}
}

// TestShadowAndPolicyArePartOfTheKey: a caller's shadow events are
// coalesced into windows of their own, never merged with its enforced
// ones; each policy has its own window; "" and "default" are one policy.
// The records say which is which.
func TestShadowAndPolicyArePartOfTheKey(t *testing.T) {
	r := newRig(t, time.Minute)
	ctx := context.Background()
	send := func(policy string, shadow bool, n int) {
		for range n {
			r.s.Limited(ctx, limiter.Event{Identity: "a", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: policy, Shadow: shadow})
		}
	}
	send("", false, 2)
	send("default", false, 3)
	send("agents", false, 4)
	send("agents", true, 5)
	send("control-plane", true, 6)
	r.s.Tick(ctx, t0.Add(time.Minute))
	type k struct {
		policy string
		shadow bool
	}
	got := map[k]uint64{}
	for _, rec := range r.store.Records() {
		if _, dup := got[k{rec.Policy, rec.Shadow}]; dup {
			t.Fatalf("two records for policy %q shadow %v", rec.Policy, rec.Shadow)
		}
		got[k{rec.Policy, rec.Shadow}] = rec.Count
	}
	want := map[k]uint64{{"", false}: 5, {"agents", false}: 4, {"agents", true}: 5, {"control-plane", true}: 6}
	if !maps.Equal(got, want) {
		t.Fatalf("records by (policy, shadow) %v, want %v", got, want)
	}
	// The counting sink behind sees every event and counts only the
	// enforced ones.
	if c := r.count.Counts(); c.Admission != 9 {
		t.Errorf("counting sink %+v, want 9 enforced admission events", c)
	}
}

func TestLateTickStampsTheDeadline(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("a", vocab.Mint, vocab.Admission, 5)
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
	r.flood("a", vocab.Mint, vocab.Admission, 5)
	r.clk.advance(90 * time.Second) // past the deadline, no tick yet
	r.flood("a", vocab.Mint, vocab.Admission, 7)
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
	const keys = MaxOpenWindows + 44
	total := 0
	for i := range keys {
		n := 1 + i%3
		r.flood("unix-peer:pid="+strconv.Itoa(i), vocab.Mint, vocab.PredecisionRefusal, n)
		total += n
		if st := r.s.Stats(); st.OpenWindows > MaxOpenWindows {
			t.Fatalf("%d open windows, cap %d", st.OpenWindows, MaxOpenWindows)
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
		wantEnd := t0.Add(time.Duration(MaxOpenWindows+i) * 100 * time.Millisecond)
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
	r.flood("a", vocab.Mint, vocab.Admission, 3)
	r.clk.advance(10 * time.Second)
	r.flood("b", vocab.Deregister, vocab.PredecisionRefusal, 2)
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
	r.flood("a", vocab.Mint, vocab.Admission, 1)
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
			r.flood("a", vocab.Mint, vocab.Admission, 4)
			switch close {
			case "tick":
				r.s.Tick(context.Background(), t0.Add(time.Minute))
			case "flush":
				r.s.Flush(context.Background(), t0)
			case "early":
				for i := range MaxOpenWindows {
					r.flood("k"+strconv.Itoa(i), vocab.Mint, vocab.Admission, 1)
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
			r.flood("a", vocab.Mint, vocab.Admission, 1)
			r.s.Flush(context.Background(), t0.Add(time.Second))
			if c := r.count.Count(vocab.Admission); c < 5 {
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
				r.flood("id"+strconv.Itoa((g*1000+i)%300), vocab.Verb(i%2), vocab.Bucket(g%2), 1)
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
	s    *Sink
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
	s, err := New(Options{Next: p, Store: &audittest.AuditLog{}, Window: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	p.s = s
	ctx := context.Background()
	for i := range 4 {
		s.Limited(ctx, limiter.Event{Identity: "uid:1000", Verb: vocab.Mint, Bucket: vocab.Bucket(i % 2)})
	}
	s.Limited(ctx, limiter.Event{Identity: "uid:1000", Verb: vocab.Verb(99), Bucket: vocab.Admission})
	if want := []uint64{0, 1, 2, 3, 4}; !slices.Equal(p.seen, want) {
		t.Fatalf("counted before each forward: %v, want %v (the next sink first, every event)", p.seen, want)
	}
}

// TestAnOverdueWindowNeverClaimsMoreThanTheWindow holds that window_end −
// window_start never exceeds the window, also for a window past its
// deadline that is written before a tick: by the shutdown flush, or
// flushed early at the cap.
func TestAnOverdueWindowNeverClaimsMoreThanTheWindow(t *testing.T) {
	t.Run("shutdown flush", func(t *testing.T) {
		r := newRig(t, time.Minute)
		r.flood("a", vocab.Mint, vocab.Admission, 3)
		r.clk.advance(5 * time.Minute) // overdue, no tick
		r.s.Flush(context.Background(), r.clk.now())
		recs := r.store.Records()
		if len(recs) != 1 {
			t.Fatalf("%d records, want 1", len(recs))
		}
		if got := recs[0].WindowEnd.Sub(recs[0].WindowStart); got != time.Minute {
			t.Fatalf("window spans %v, want the window (1m0s): end at the deadline", got)
		}
	})
	t.Run("early flush at the cap", func(t *testing.T) {
		r := newRig(t, time.Minute)
		for i := range MaxOpenWindows {
			r.flood("pid="+strconv.Itoa(i), vocab.Mint, vocab.PredecisionRefusal, 1)
		}
		r.clk.advance(5 * time.Minute) // every window overdue, no tick
		r.flood("newcomer", vocab.Mint, vocab.PredecisionRefusal, 1)
		if st := r.s.Stats(); st.EarlyFlushes != 1 {
			t.Fatalf("early flushes %d, want 1", st.EarlyFlushes)
		}
		r.s.Flush(context.Background(), r.clk.now())
		recs := r.store.Records()
		if len(recs) != MaxOpenWindows+1 {
			t.Fatalf("%d records, want %d", len(recs), MaxOpenWindows+1)
		}
		for _, rec := range recs {
			if got := rec.WindowEnd.Sub(rec.WindowStart); got > time.Minute || got < 0 {
				t.Fatalf("%s: window spans %v, want within [0, 1m0s]", rec.CallerIdentity, got)
			}
		}
	})
}

// TestAnEventAtTheDeadlineOpensTheNextWindow holds that a window is
// half-open, [start, deadline): an event at the deadline instant opens the
// key's next window, as the tick treats the deadline as closed.
func TestAnEventAtTheDeadlineOpensTheNextWindow(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("a", vocab.Mint, vocab.Admission, 2)
	r.clk.advance(time.Minute) // exactly the deadline
	r.flood("a", vocab.Mint, vocab.Admission, 3)
	r.s.Tick(context.Background(), r.clk.now())
	recs := r.store.Records()
	if len(recs) != 1 || recs[0].Count != 2 || !recs[0].WindowEnd.Equal(t0.Add(time.Minute)) {
		t.Fatalf("records at the deadline %+v, want the first window alone, count 2, ending at the deadline", recs)
	}
	r.s.Flush(context.Background(), r.clk.now().Add(time.Second))
	recs = r.store.Records()
	if len(recs) != 2 || recs[1].Count != 3 || !recs[1].WindowStart.Equal(t0.Add(time.Minute)) {
		t.Fatalf("records %+v, want a second window of 3 opened at the deadline", recs)
	}
}

// storeSink is a sink with an hour's window on a real audit store in dir,
// closed when b ends.
func storeSink(b *testing.B, dir string) *Sink {
	b.Helper()
	store, err := audit.Open(audit.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	s, err := New(Options{Store: store, Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkLimitedAtTheCap is the limited call that flushes the oldest
// window early, with a real store on the test's disk: every iteration is a
// new key with the ring full. It compiles against the previous commit too
// (where the flush was written, with an fsync, on this goroutine), so the
// two can be run interleaved; here the writer is started when the sink has
// one.
func BenchmarkLimitedAtTheCap(b *testing.B) {
	s := storeSink(b, filepath.Join(b.TempDir(), "audit"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if w, ok := any(s).(interface{ Run(context.Context) }); ok {
		go w.Run(ctx)
	}
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = fmt.Sprintf("spiffe://fleet/host-%06d", i)
	}
	for i := range MaxOpenWindows {
		s.Limited(ctx, limiter.Event{Identity: ids[i%len(ids)] + "/fill", Verb: vocab.Mint, Bucket: vocab.Admission})
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		s.Limited(ctx, limiter.Event{Identity: ids[i%len(ids)], Verb: vocab.Verb(i / len(ids) % 2), Bucket: vocab.Admission})
		i++
	}
}

// gatedStore is an Appender whose batches block until released, so a test
// can tell whether a caller waited on a write.
type gatedStore struct {
	audittest.AuditLog
	gate    chan struct{}
	writers atomic.Int32
}

func (g *gatedStore) AppendBatch(ctx context.Context, recs []*audit.Record) []error {
	g.writers.Add(1)
	<-g.gate
	return g.AuditLog.AppendBatch(ctx, recs)
}

func fleetID(i int) string { return fmt.Sprintf("spiffe://fleet/host-%05d", i) }

func TestAFleetOf1024IdentitiesKeepsOneWindowPerKey(t *testing.T) {
	r := newRig(t, time.Minute)
	// The writer runs, as in the daemon: a cap too small for the fleet
	// shows as early flushes, not as a full hand-off waiting forever.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.s.Run(ctx) })
	defer wg.Wait()
	defer cancel()
	const ids, perKey = 1024, 5
	for range perKey {
		for i := range ids {
			for v := range vocab.NumVerbs {
				for b := range vocab.NumBuckets {
					r.flood(fleetID(i), vocab.Verb(v), vocab.Bucket(b), 1)
				}
			}
		}
	}
	if st := r.s.Stats(); st.EarlyFlushes != 0 || st.OpenWindows != ids*4 {
		t.Fatalf("stats %+v, want %d open windows and no early flush", st, ids*4)
	}
	r.s.Tick(context.Background(), t0.Add(time.Minute))
	recs := r.store.Records()
	if len(recs) != ids*4 || sumCounts(recs) != ids*4*perKey || r.store.Batches() != 1 {
		t.Fatalf("%d records summing %d in %d batches, want %d summing %d in one", len(recs), sumCounts(recs), r.store.Batches(), ids*4, ids*4*perKey)
	}
}

func TestEarlyFlushWritesNothingOnTheLimitedCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedStore{gate: make(chan struct{})}
		s, err := New(Options{Store: g, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range MaxOpenWindows + 10 {
				s.Limited(context.Background(), limiter.Event{Identity: fleetID(i), Verb: vocab.Mint, Bucket: vocab.Admission})
			}
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Limited blocked past the cap with the store stalled: it wrote on the caller's goroutine")
		}
		if g.writers.Load() != 0 {
			t.Fatal("the store was called by a limited call")
		}
		if st := s.Stats(); st.Pending != 10 || st.EarlyFlushes != 10 {
			t.Fatalf("stats %+v, want 10 handed off", st)
		}
		close(g.gate)
		s.Tick(context.Background(), time.Now())
		if n := g.Len(); n != 10 {
			t.Fatalf("tick wrote %d, want the 10 handed off", n)
		}
	})
}

func TestRunWritesTheHandoffAsItFills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, store := wallRig(t, time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { s.Run(ctx) })
		for i := range MaxOpenWindows + 300 {
			s.Limited(context.Background(), limiter.Event{Identity: fleetID(i), Verb: vocab.Mint, Bucket: vocab.Admission})
		}
		synctest.Wait()
		if n, st := store.Len(), s.Stats(); n != 300 || st.Pending != 0 || store.Batches() > 300 {
			t.Fatalf("writer wrote %d records in %d batches, %d still pending; want 300, none pending", n, store.Batches(), st.Pending)
		}
		cancel()
		wg.Wait()
		s.Flush(context.Background(), time.Now())
		if n := store.Len(); n != MaxOpenWindows+300 {
			t.Fatalf("%d records after the flush, want %d", n, MaxOpenWindows+300)
		}
	})
}

// TestAFullHandoffMakesTheLimitedCallWaitAndLosesNothing: with no writer
// running and MaxPending windows already handed off, the next early flush
// waits (counted) until the tick takes the hand-off, then completes; every
// event is in exactly one record.
func TestAFullHandoffMakesTheLimitedCallWaitAndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, store := wallRig(t, time.Hour)
		ev := func(i int) limiter.Event {
			return limiter.Event{Identity: fleetID(i), Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal}
		}
		full := MaxOpenWindows + MaxPending
		for i := range full {
			s.Limited(context.Background(), ev(i))
		}
		if st := s.Stats(); st.OpenWindows != MaxOpenWindows || st.Pending != MaxPending {
			t.Fatalf("stats %+v, want the ring and the hand-off full", st)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Limited(context.Background(), ev(full))
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("an early flush past a full hand-off neither waited nor was refused: something was dropped or written on the caller")
		default:
		}
		if st := s.Stats(); st.HandoffWaits != 1 || store.Len() != 0 {
			t.Fatalf("stats %+v, %d written; want one wait and nothing written", st, store.Len())
		}
		s.Tick(context.Background(), time.Now())
		<-done
		s.Flush(context.Background(), time.Now())
		recs := store.Records()
		if len(recs) != full+1 || sumCounts(recs) != uint64(full+1) {
			t.Fatalf("%d records summing %d, want %d each counting one", len(recs), sumCounts(recs), full+1)
		}
	})
}

func TestTickAndFlushWriteEverythingAsOneBatch(t *testing.T) {
	r := newRig(t, time.Minute)
	for i := range 256 {
		r.flood(fleetID(i), vocab.Mint, vocab.Admission, 3)
	}
	r.s.Tick(context.Background(), t0.Add(time.Minute))
	if n, b := r.store.Len(), r.store.Batches(); n != 256 || b != 1 {
		t.Fatalf("tick of 256 due windows: %d records in %d batches, want 256 in one", n, b)
	}
	for i := range 300 {
		r.flood(fleetID(i), vocab.Deregister, vocab.Admission, 1)
	}
	r.s.Flush(context.Background(), t0.Add(2*time.Minute))
	if n, b := r.store.Len(), r.store.Batches(); n != 556 || b != 2 {
		t.Fatalf("after the shutdown flush: %d records in %d batches, want 556 in two", n, b)
	}
}

func TestShutdownFlushWritesTheHandoffToo(t *testing.T) {
	r := newRig(t, time.Hour)
	for i := range MaxOpenWindows + 5 {
		r.flood(fleetID(i), vocab.Mint, vocab.Admission, 2)
	}
	if st := r.s.Stats(); st.Pending != 5 {
		t.Fatalf("stats %+v, want 5 handed off", st)
	}
	r.s.Flush(context.Background(), t0.Add(time.Second))
	if n, b := r.store.Len(), r.store.Batches(); n != MaxOpenWindows+5 || b != 1 || sumCounts(r.store.Records()) != 2*(MaxOpenWindows+5) {
		t.Fatalf("shutdown flush wrote %d records in %d batches, want %d in one", n, b, MaxOpenWindows+5)
	}
}

func TestAFailedBatchIsLoggedOnceAndCountedPerRecord(t *testing.T) {
	r := newRig(t, time.Minute)
	r.store.FailPhase(audit.PhaseLimited, errors.New("disk full"))
	for i := range 10 {
		r.flood(fleetID(i), vocab.Mint, vocab.PredecisionRefusal, 3)
	}
	r.s.Tick(context.Background(), t0.Add(time.Minute))
	if st := r.s.Stats(); st.WriteFailures != 10 || st.Records != [2]uint64{} || st.OpenWindows != 0 {
		t.Fatalf("stats %+v, want 10 failures, nothing written, nothing left open", st)
	}
	if out := r.logs.String(); strings.Count(out, "counted record not written") != 1 || !strings.Contains(out, "records_failed=10") || !strings.Contains(out, "disk full") {
		t.Fatalf("log %q, want one warning naming 10 records and the error", out)
	}
	// Nothing was refused: every event reached the counting sink.
	if c := r.count.Count(vocab.PredecisionRefusal); c != 30 {
		t.Fatalf("counting sink saw %d, want 30", c)
	}
}

// wallRig is a sink on its default clock (time.Now), the daemon's, so that
// an event's At (the limiter's reading of the charge instant) stands in for
// the sink's own clock read.
func wallRig(t *testing.T, window time.Duration) (*Sink, *audittest.AuditLog) {
	t.Helper()
	store := &audittest.AuditLog{}
	s, err := New(Options{Store: store, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	return s, store
}

func at(id string, when time.Time) limiter.Event {
	return limiter.Event{Identity: id, Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 1, At: when}
}

// TestAnEventsInstantOpensItsWindow: on the wall clock, a window opens at
// the instant the limiter charged at, not at a second clock read.
func TestAnEventsInstantOpensItsWindow(t *testing.T) {
	s, store := wallRig(t, time.Minute)
	base := time.Now()
	s.Limited(context.Background(), at("a", base))
	s.Flush(context.Background(), base.Add(time.Second))
	recs := store.Records()
	if len(recs) != 1 || !recs[0].WindowStart.Equal(base) {
		t.Fatalf("records %+v, want one window opened at the event's instant %v", recs, base)
	}
}

// TestALateReadInstantNeverOpensAWindowBeforeAClosedOneEnds: an event's
// instant is read before the sink's lock, so a tick (or another call) may
// have gone past it by the time it counts; its window then opens at the
// tick's instant, so a key's windows never overlap, and windows open in
// deadline order.
func TestALateReadInstantNeverOpensAWindowBeforeAClosedOneEnds(t *testing.T) {
	const w = time.Minute
	s, store := wallRig(t, w)
	base := time.Now()
	ctx := context.Background()
	s.Limited(ctx, at("a", base))
	s.Tick(ctx, base.Add(w)) // closes a's window at its deadline
	// Charged before that tick, counted after it.
	s.Limited(ctx, at("a", base.Add(w/2)))
	// Opened elsewhere at +61 s, then an instant read earlier arrives.
	s.Limited(ctx, at("b", base.Add(w+time.Second)))
	s.Limited(ctx, at("c", base.Add(w+time.Millisecond)))
	s.Flush(ctx, base.Add(3*w))
	starts := map[string]time.Time{}
	for _, r := range store.Records()[1:] {
		starts[r.CallerIdentity] = r.WindowStart
	}
	if got := starts["a"]; !got.Equal(base.Add(w)) {
		t.Errorf("a's second window opens at %v, want the tick's instant %v (the first window ended there)", got.Sub(base), w)
	}
	if got := starts["c"]; !got.Equal(base.Add(w + time.Second)) {
		t.Errorf("c's window opens at %v, want %v: not before b's, opened first", got.Sub(base), w+time.Second)
	}
}

func TestSetWindowKeepsOpenWindowsAndSizesNewOnes(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("old", vocab.Mint, vocab.Admission, 3) // deadline t0+60s
	if err := r.s.SetWindow(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	r.clk.advance(5 * time.Second)
	r.flood("new", vocab.Mint, vocab.Admission, 2) // deadline t0+15s
	r.clk.advance(10 * time.Second)                // t0+15s
	r.flood("old", vocab.Mint, vocab.Admission, 1) // still in its 60 s window
	r.flood("new", vocab.Mint, vocab.Admission, 4) // past its 10 s: the key's next window
	r.s.Tick(context.Background(), r.clk.now())
	if got := len(r.store.Records()); got != 0 {
		t.Fatalf("%d records at +15 s, want 0 (the ring closes in opening order; the old window is open till +60 s)", got)
	}
	r.clk.advance(45 * time.Second) // t0+60s
	r.s.Tick(context.Background(), r.clk.now())
	recs := r.store.Records()
	if len(recs) != 3 {
		t.Fatalf("%d records at +60 s, want 3: %+v", len(recs), recs)
	}
	want := []struct {
		id    string
		count uint64
		span  time.Duration
	}{{"old", 4, time.Minute}, {"new", 2, 10 * time.Second}, {"new", 4, 10 * time.Second}}
	for i, w := range want {
		rec := recs[i]
		if rec.CallerIdentity != w.id || rec.Count != w.count || rec.WindowEnd.Sub(rec.WindowStart) != w.span {
			t.Fatalf("record %d: %s count %d span %v, want %s count %d span %v", i, rec.CallerIdentity, rec.Count, rec.WindowEnd.Sub(rec.WindowStart), w.id, w.count, w.span)
		}
	}
	if err := r.s.SetWindow(0); err == nil {
		t.Fatal("SetWindow(0) succeeded")
	}
}

// TestCountedRecordsThroughTheRealStoreAreNoAnomaly floods through the
// production store and reads it back with the anomaly scan: counted records
// raise neither signal, while a real crash-mid-mint intent and an
// unparseable line are still counted by the right rule.
func TestCountedRecordsThroughTheRealStoreAreNoAnomaly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	store, err := audit.Open(audit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	counts := counting.New()
	clk := &clock{t: time.Now().UTC().Add(-time.Hour)}
	s, err := New(Options{Next: counts, Store: store, Window: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Ten windows of a flood on both buckets from three identities.
	const perWindow = 500
	for range 10 {
		for i := range perWindow {
			id := "unix-peer:uid=" + strconv.Itoa(1000+i%3)
			s.Limited(ctx, limiter.Event{Identity: id, Verb: vocab.Mint, Bucket: vocab.Bucket(i % 2)})
		}
		clk.advance(time.Minute)
		s.Tick(ctx, clk.now())
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	rep, err := audit.Scan(ctx, audit.ScanOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.IntentWithoutOutcome != 0 || rep.MalformedRecords != 0 || rep.Anomalies() {
		t.Fatalf("counted records reported as anomalies: %+v", rep)
	}
	// 10 windows × 3 identities × 2 buckets, never one per invocation.
	if got := rep.Records[audit.PhaseLimited-1]; got != 60 {
		t.Fatalf("%d counted records, want 60", got)
	}
	for b := range vocab.NumBuckets {
		if got := rep.Limited[b].Count; got != 10*perWindow/2 {
			t.Fatalf("%v: counted %d limited invocations, want %d", vocab.Bucket(b), got, 10*perWindow/2)
		}
	}
	if c := counts.Counts(); c.PredecisionRefusal != 2500 || c.Admission != 2500 {
		t.Fatalf("counting sink %+v, want 2500 per bucket", c)
	}

	// Now a genuine crash-mid-mint intent and an unparseable line.
	store, err = audit.Open(audit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Append(ctx, &audit.Record{
		Phase: audit.PhaseIntent, TS: time.Now().Add(-10 * time.Minute), RequestID: "crash.1",
		Verb: vocab.Mint, CallerIdentity: "unix-peer:uid=1000",
		Requested: &audit.Requested{ServiceName: "review", Host: "h1", Instance: 7},
	}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	f, err := os.OpenFile(filepath.Join(dir, audit.ActiveFileName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{not json\n")
	f.Close()
	rep, err = audit.Scan(ctx, audit.ScanOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.IntentWithoutOutcome != 1 || rep.MalformedRecords != 1 {
		t.Fatalf("intent_without_outcome %d, malformed %d; want 1 and 1", rep.IntentWithoutOutcome, rep.MalformedRecords)
	}
}

// memStore keeps what it is given; safe for concurrent use.
type memStore struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memStore) AppendBatch(_ context.Context, recs []*audit.Record) []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		m.recs = append(m.recs, *r)
	}
	return make([]error, len(recs))
}

type countSink struct {
	mu sync.Mutex
	n  uint64
}

func (c *countSink) Limited(context.Context, limiter.Event) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

// checkInvariants asserts what must hold at every step: at most one open
// window per key, the ring and the hand-off within their caps, the map
// matching the ring.
func checkInvariants(t *testing.T, s *Sink) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n < 0 || s.n > MaxOpenWindows || s.pN < 0 || s.pN > MaxPending {
		t.Fatalf("ring %d (cap %d), hand-off %d (cap %d)", s.n, MaxOpenWindows, s.pN, MaxPending)
	}
	if len(s.open) > int(s.n) {
		t.Fatalf("%d keys open over %d windows", len(s.open), s.n)
	}
	for k, i := range s.open {
		off := (i - s.head + MaxOpenWindows) % MaxOpenWindows
		if off >= s.n || s.slots[i].key != k {
			t.Fatalf("key %v maps to slot %d, outside the ring or holding %v", k, i, s.slots[i].key)
		}
	}
	for j := int32(1); j < s.n; j++ {
		a, b := &s.slots[(s.head+j-1)%MaxOpenWindows], &s.slots[(s.head+j)%MaxOpenWindows]
		if b.deadline.Before(a.deadline) {
			t.Fatalf("ring out of deadline order at %d", j)
		}
	}
}

// FuzzCoalescerInvariants drives the sink with any order of events (over
// a few keys, or a burst of fresh keys past the cap), clock steps, ticks,
// flushes and writer runs, then flushes and checks: Σ counts = events
// forwarded, every window within the configured length and never
// inverted, at most one open window per key, the map never above its cap,
// and no two records of one key overlapping.
func FuzzCoalescerInvariants(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x10, 0x10, 0xf0, 0x21, 0x31, 0x41, 0xe0, 0x00, 0x01})
	f.Add([]byte{0xe5, 0xe5, 0xe5, 0x70, 0x80, 0x90})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 256 {
			ops = ops[:256]
		}
		store := &memStore{}
		next := &countSink{}
		clk := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		var clkMu sync.Mutex
		now := func() time.Time { clkMu.Lock(); defer clkMu.Unlock(); return clk }
		advance := func(d time.Duration) { clkMu.Lock(); clk = clk.Add(d); clkMu.Unlock() }
		const win = 10 * time.Second
		s, err := New(Options{Next: next, Store: store, Window: win, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { s.Run(ctx) }) // the writer: a full hand-off never deadlocks
		fresh := 0
		ev := func(id string, x byte) {
			// Bits 2 and 3 pick a policy ("" and "default" being one) and a
			// shadow: more keys per identity, each its own window.
			policy := [...]string{"", "default", "agents", "control-plane"}[x>>2&3]
			s.Limited(ctx, limiter.Event{Identity: id, Verb: vocab.Verb(x & 1), Bucket: vocab.Bucket(x >> 1 & 1), Policy: policy, Shadow: x&16 != 0})
		}
		for _, op := range ops {
			switch op >> 4 {
			case 0, 1, 2, 3, 4, 5, 6: // an event on one of 4 identities' keys
				ev("k"+strconv.Itoa(int(op&3)), op>>2|op<<4)
			case 7: // a small clock step
				advance(time.Duration(op&15) * 700 * time.Millisecond)
			case 8: // a large one
				advance(time.Duration(op&15) * 7 * time.Second)
			case 9, 10: // a tick at the clock, or a late one (fired earlier)
				s.Tick(ctx, now().Add(-time.Duration(op&3)*time.Second))
			case 11: // a shutdown flush mid-stream
				s.Flush(ctx, now())
			case 12, 13: // a few fresh keys
				for range op & 15 {
					ev("f"+strconv.Itoa(fresh), byte(fresh))
					fresh++
				}
			case 14: // a burst of fresh keys past the cap
				for range MaxOpenWindows/4 + int(op&15)*97 {
					ev("f"+strconv.Itoa(fresh), byte(fresh))
					fresh++
				}
			case 15: // the same burst on keys already seen
				for i := range MaxOpenWindows / 8 {
					ev("f"+strconv.Itoa(max(0, fresh-1-i)), byte(i))
				}
			}
			checkInvariants(t, s)
		}
		cancel()
		wg.Wait()
		s.Flush(ctx, now())
		checkInvariants(t, s)
		if st := s.Stats(); st.OpenWindows != 0 || st.Pending != 0 {
			t.Fatalf("after the final flush: %+v", st)
		}
		var sum uint64
		type k struct {
			id     string
			v      vocab.Verb
			b      vocab.Bucket
			policy string
			shadow bool
		}
		byKey := map[k][]audit.Record{}
		for _, r := range store.recs {
			sum += r.Count
			if r.Count == 0 {
				t.Fatalf("record counting zero: %+v", r)
			}
			if span := r.WindowEnd.Sub(r.WindowStart); span < 0 || span > win {
				t.Fatalf("record spans %v, window %v: %+v", span, win, r)
			}
			if r.Policy == "default" {
				t.Fatalf("record spells the default policy: %+v", r)
			}
			key := k{r.CallerIdentity, r.Verb, r.LimitedBucket, r.Policy, r.Shadow}
			byKey[key] = append(byKey[key], r)
		}
		for key, rs := range byKey {
			slices.SortFunc(rs, func(a, b audit.Record) int {
				if c := a.WindowStart.Compare(b.WindowStart); c != 0 {
					return c
				}
				return a.WindowEnd.Compare(b.WindowEnd)
			})
			for i := 1; i < len(rs); i++ {
				if rs[i].WindowStart.Before(rs[i-1].WindowEnd) {
					t.Fatalf("key %v: window [%v, %v] overlaps [%v, %v]: two windows open at once", key, rs[i].WindowStart, rs[i].WindowEnd, rs[i-1].WindowStart, rs[i-1].WindowEnd)
				}
			}
		}
		if sum != next.n {
			t.Fatalf("records count %d events, %d were forwarded", sum, next.n)
		}
	})
}

// TestMemoryIsBoundedAsDocumented fills the ring and the hand-off with
// 8,192 windows and checks the heap the sink holds against the documented
// bound: WindowBytes per window slot (ring, hand-off, key map), plus the
// identity strings, whatever the number of identities flooding.
func TestMemoryIsBoundedAsDocumented(t *testing.T) {
	if s := unsafe.Sizeof(window{}) + unsafe.Sizeof(closed{}); s > WindowBytes {
		t.Fatalf("a window slot and a hand-off slot take %d bytes, above WindowBytes %d", s, WindowBytes)
	}
	const idLen = 39
	ids := make([]string, MaxOpenWindows+MaxPending)
	for i := range ids {
		ids[i] = fmt.Sprintf("spiffe://fleet.test/host-%014d", i)
		if len(ids[i]) != idLen {
			t.Fatalf("identity %q is %d bytes", ids[i], len(ids[i]))
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	s, err := New(Options{Store: &memStore{}, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		s.Limited(context.Background(), limiter.Event{Identity: id, Verb: vocab.Mint, Bucket: vocab.Admission})
	}
	if st := s.Stats(); st.OpenWindows != MaxOpenWindows || st.Pending != MaxPending {
		t.Fatalf("stats %+v, want ring and hand-off full", st)
	}
	used := heap() - before // the identity strings were allocated before
	limit := uint64(MaxOpenWindows * WindowBytes)
	t.Logf("sink holding %d windows: %d bytes (%.0f per open window); documented bound %d + identity bytes",
		MaxOpenWindows+MaxPending, used, float64(used)/MaxOpenWindows, limit)
	if used > limit {
		t.Fatalf("the sink holds %d bytes, above the documented %d (WindowBytes × MaxOpenWindows)", used, limit)
	}
	runtime.KeepAlive(s)
}
