package coalesce_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
)

func TestSetWindowKeepsOpenWindowsAndSizesNewOnes(t *testing.T) {
	r := newRig(t, time.Minute)
	r.flood("old", limiter.Mint, limiter.Admission, 3) // deadline t0+60s
	if err := r.s.SetWindow(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	r.clk.advance(5 * time.Second)
	r.flood("new", limiter.Mint, limiter.Admission, 2) // deadline t0+15s
	r.clk.advance(10 * time.Second)                    // t0+15s
	r.flood("old", limiter.Mint, limiter.Admission, 1) // still in its 60 s window
	r.flood("new", limiter.Mint, limiter.Admission, 4) // past its 10 s: the key's next window
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
