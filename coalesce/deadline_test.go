package coalesce_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// TestAnOverdueWindowNeverClaimsMoreThanTheWindow holds that window_end −
// window_start never exceeds the window, also for a window past its
// deadline that is written before a tick: by the shutdown flush, or
// flushed early at the cap.
func TestAnOverdueWindowNeverClaimsMoreThanTheWindow(t *testing.T) {
	t.Run("shutdown flush", func(t *testing.T) {
		r := newRig(t, time.Minute)
		r.flood("a", limiter.Mint, limiter.Admission, 3)
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
		for i := range coalesce.MaxOpenWindows {
			r.flood("pid="+strconv.Itoa(i), limiter.Mint, limiter.PredecisionRefusal, 1)
		}
		r.clk.advance(5 * time.Minute) // every window overdue, no tick
		r.flood("newcomer", limiter.Mint, limiter.PredecisionRefusal, 1)
		if st := r.s.Stats(); st.EarlyFlushes != 1 {
			t.Fatalf("early flushes %d, want 1", st.EarlyFlushes)
		}
		r.s.Flush(context.Background(), r.clk.now())
		recs := r.store.Records()
		if len(recs) != coalesce.MaxOpenWindows+1 {
			t.Fatalf("%d records, want %d", len(recs), coalesce.MaxOpenWindows+1)
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
	r.flood("a", limiter.Mint, limiter.Admission, 2)
	r.clk.advance(time.Minute) // exactly the deadline
	r.flood("a", limiter.Mint, limiter.Admission, 3)
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
