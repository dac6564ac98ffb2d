package limiter

import (
	"context"
	"math/bits"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// checkShardIndex asserts each shard's in-use bitmap matches its slots and
// its reclaimAt is a lower bound on every entry's fill instant.
func checkShardIndex(t testing.TB, l *Limiter) {
	t.Helper()
	for i := range l.shards {
		s := &l.shards[i]
		n := 0
		for j := range s.slots {
			bit := s.inUse[j/64]&(1<<(j%64)) != 0
			if bit != s.slots[j].used {
				t.Fatalf("shard %d slot %d: in-use bit %v, used %v", i, j, bit, s.slots[j].used)
			}
			if e := &s.slots[j]; e.used {
				n++
				if at := e.tb.fullAt(&l.table.rows[e.policy].enforced[e.bucket]); int64(at) < s.reclaimAt.Load() {
					t.Fatalf("shard %d: reclaimAt %d is after entry %q's fill instant %d", i, s.reclaimAt.Load(), e.identity, at)
				}
			}
		}
		ones := 0
		for _, w := range s.inUse {
			ones += bits.OnesCount64(w)
		}
		if ones != n {
			t.Fatalf("shard %d: %d bits set, %d entries", i, ones, n)
		}
	}
}

// TestReclaimDeletesInPlace drives the map through many rounds of filling
// to the cap and reclaiming subsets, with keys crowded into few home slots
// so that probe runs are long and wrap around the table's end: after every
// reclaim each survivor is still found, each removed key is gone, and the
// index agrees with the slots.
func TestReclaimDeletesInPlace(t *testing.T) {
	var now Instant
	c := cfg(2, time.Second, 2, time.Second)
	c.Now = func() Instant { return now }
	l := mustNew(t, c, nil)
	ctx := context.Background()
	for round := range 40 {
		// Fill to the cap; every third key is charged twice (drained: it
		// stays), the others once (full again after one interval).
		var keys []string
		for i := 0; l.Stats().Entries < MaxEntries; i++ {
			id := "r" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
			keys = append(keys, id)
			l.ChargeAt(ctx, id, vocab.Mint, vocab.Admission, now)
			if i%3 == 0 {
				l.ChargeAt(ctx, id, vocab.Mint, vocab.Admission, now)
			}
		}
		checkInvariants(t, l)
		checkShardIndex(t, l)
		now += Instant(time.Second)
		freed := l.reclaim(now)
		checkShardIndex(t, l)
		gone := 0
		for i, id := range keys {
			_, found := l.lookup(id, vocab.Mint, vocab.Admission)
			switch {
			case i%3 == 0 && !found:
				t.Fatalf("round %d: drained key %s was reclaimed", round, id)
			case i%3 != 0 && found:
				t.Fatalf("round %d: full key %s survived the reclaim", round, id)
			case !found:
				gone++
			}
		}
		if gone != freed {
			t.Fatalf("round %d: reclaim reported %d, %d keys gone", round, freed, gone)
		}
		now += Instant(2 * time.Second) // the drained keys fill too, for the next round
		l.Sweep()
		if n := l.Stats().Entries; n != 0 {
			t.Fatalf("round %d: %d entries after everything filled", round, n)
		}
		checkShardIndex(t, l)
	}
}

func TestSweepRemovesOnlyFullEntriesBelowTheCap(t *testing.T) {
	now := Instant(0)
	c := cfg(2, time.Second, 2, time.Second)
	c.Now = func() Instant { return now }
	l := mustNew(t, c, nil)
	for i := range 10 {
		id := "id" + strconv.Itoa(i)
		l.ChargeAt(context.Background(), id, vocab.Mint, vocab.Admission, 0)
		if i < 4 {
			l.ChargeAt(context.Background(), id, vocab.Mint, vocab.Admission, 0) // drained
		}
	}
	if got := l.Sweep(); got != 0 {
		t.Fatalf("swept %d entries before any could be full", got)
	}
	now = sec // the 6 entries holding 1 of 2 are full again; the drained 4 hold 1
	if got := l.Sweep(); got != 6 {
		t.Fatalf("swept %d, want the 6 full entries", got)
	}
	if s := l.Stats(); s.Entries != 4 || s.Reclaimed != 6 {
		t.Fatalf("stats %+v, want 4 entries left", s)
	}
	for i := range 4 {
		if _, ok := l.lookup("id"+strconv.Itoa(i), vocab.Mint, vocab.Admission); !ok {
			t.Fatalf("a drained entry id%d was swept", i)
		}
	}
}
