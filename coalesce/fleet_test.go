package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/limiter"
)

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
			for v := range limiter.NumVerbs {
				for b := range limiter.NumBuckets {
					r.flood(fleetID(i), limiter.Verb(v), limiter.Bucket(b), 1)
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
		s, err := coalesce.New(coalesce.Options{Store: g, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range coalesce.MaxOpenWindows + 10 {
				s.Limited(context.Background(), limiter.Event{Identity: fleetID(i), Verb: limiter.Mint, Bucket: limiter.Admission})
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
		store := &audittest.AuditLog{}
		s, err := coalesce.New(coalesce.Options{Store: store, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { s.Run(ctx) })
		for i := range coalesce.MaxOpenWindows + 300 {
			s.Limited(context.Background(), limiter.Event{Identity: fleetID(i), Verb: limiter.Mint, Bucket: limiter.Admission})
		}
		synctest.Wait()
		if n, st := store.Len(), s.Stats(); n != 300 || st.Pending != 0 || store.Batches() > 300 {
			t.Fatalf("writer wrote %d records in %d batches, %d still pending; want 300, none pending", n, store.Batches(), st.Pending)
		}
		cancel()
		wg.Wait()
		s.Flush(context.Background(), time.Now())
		if n := store.Len(); n != coalesce.MaxOpenWindows+300 {
			t.Fatalf("%d records after the flush, want %d", n, coalesce.MaxOpenWindows+300)
		}
	})
}

// TestAFullHandoffMakesTheLimitedCallWaitAndLosesNothing: with no writer
// running and MaxPending windows already handed off, the next early flush
// waits (counted) until the tick takes the hand-off, then completes; every
// event is in exactly one record.
func TestAFullHandoffMakesTheLimitedCallWaitAndLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &audittest.AuditLog{}
		s, err := coalesce.New(coalesce.Options{Store: store, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ev := func(i int) limiter.Event {
			return limiter.Event{Identity: fleetID(i), Verb: limiter.Deregister, Bucket: limiter.PredecisionRefusal}
		}
		full := coalesce.MaxOpenWindows + coalesce.MaxPending
		for i := range full {
			s.Limited(context.Background(), ev(i))
		}
		if st := s.Stats(); st.OpenWindows != coalesce.MaxOpenWindows || st.Pending != coalesce.MaxPending {
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
		r.flood(fleetID(i), limiter.Mint, limiter.Admission, 3)
	}
	r.s.Tick(context.Background(), t0.Add(time.Minute))
	if n, b := r.store.Len(), r.store.Batches(); n != 256 || b != 1 {
		t.Fatalf("tick of 256 due windows: %d records in %d batches, want 256 in one", n, b)
	}
	for i := range 300 {
		r.flood(fleetID(i), limiter.Deregister, limiter.Admission, 1)
	}
	r.s.Flush(context.Background(), t0.Add(2*time.Minute))
	if n, b := r.store.Len(), r.store.Batches(); n != 556 || b != 2 {
		t.Fatalf("after the shutdown flush: %d records in %d batches, want 556 in two", n, b)
	}
}

func TestShutdownFlushWritesTheHandoffToo(t *testing.T) {
	r := newRig(t, time.Hour)
	for i := range coalesce.MaxOpenWindows + 5 {
		r.flood(fleetID(i), limiter.Mint, limiter.Admission, 2)
	}
	if st := r.s.Stats(); st.Pending != 5 {
		t.Fatalf("stats %+v, want 5 handed off", st)
	}
	r.s.Flush(context.Background(), t0.Add(time.Second))
	if n, b := r.store.Len(), r.store.Batches(); n != coalesce.MaxOpenWindows+5 || b != 1 || sumCounts(r.store.Records()) != 2*(coalesce.MaxOpenWindows+5) {
		t.Fatalf("shutdown flush wrote %d records in %d batches, want %d in one", n, b, coalesce.MaxOpenWindows+5)
	}
}

func TestAFailedBatchIsLoggedOnceAndCountedPerRecord(t *testing.T) {
	r := newRig(t, time.Minute)
	r.store.FailPhase(audit.PhaseLimited, errors.New("disk full"))
	for i := range 10 {
		r.flood(fleetID(i), limiter.Mint, limiter.PredecisionRefusal, 3)
	}
	r.s.Tick(context.Background(), t0.Add(time.Minute))
	if st := r.s.Stats(); st.WriteFailures != 10 || st.Records != [2]uint64{} || st.OpenWindows != 0 {
		t.Fatalf("stats %+v, want 10 failures, nothing written, nothing left open", st)
	}
	if out := r.logs.String(); strings.Count(out, "counted record not written") != 1 || !strings.Contains(out, "records_failed=10") || !strings.Contains(out, "disk full") {
		t.Fatalf("log %q, want one warning naming 10 records and the error", out)
	}
	// Nothing was refused: every event reached the counting sink.
	if c := r.count.Count(limiter.PredecisionRefusal); c != 30 {
		t.Fatalf("counting sink saw %d, want 30", c)
	}
}
