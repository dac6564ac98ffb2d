package coalesce

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
)

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
			s.Limited(ctx, limiter.Event{Identity: id, Verb: limiter.Verb(x & 1), Bucket: limiter.Bucket(x >> 1 & 1)})
		}
		for _, op := range ops {
			switch op >> 4 {
			case 0, 1, 2, 3, 4, 5, 6: // an event on one of 16 keys
				ev("k"+strconv.Itoa(int(op&3)), op>>2)
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
			id string
			v  limiter.Verb
			b  limiter.Bucket
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
			key := k{r.CallerIdentity, r.Verb, r.LimitedBucket}
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
