package limiter

import (
	"math"
	mathbits "math/bits"
)

// Reclaiming full entries: the tick's sweep and the miss at the cap, with
// backward-shift deletion.

// Sweep reclaims every entry refilled to its full burst at the limiter's
// clock, below the cap too, and returns how many it removed. Removing a
// full entry is indistinguishable from keeping it (both yield a full bucket
// on next use), so this changes no decision; the daemon calls it on its
// tick so the entry count drains back after a burst of identity churn
// instead of staying at the cap until the next miss there. It is a few
// atomic loads while no entry can be full yet.
func (l *Limiter) Sweep() int {
	return l.reclaim(l.now())
}

// reclaim removes every entry that is refilled to its full burst at now —
// a full entry is indistinguishable from an absent one — and never an entry
// below full, and returns how many it removed. It visits only the shards
// whose reclaimAt has passed, one at a time under that shard's lock alone,
// and in each only the used slots; it deletes in place (backward-shift
// deletion: no tombstones, no allocation) and recomputes the shard's
// reclaimAt exactly. Charges of other shards go on meanwhile.
func (l *Limiter) reclaim(now Instant) int {
	var freed [numPools]int
	for i := range l.shards {
		s := &l.shards[i]
		if int64(now) < s.reclaimAt.Load() {
			continue
		}
		s.mu.Lock()
		if int64(now) >= s.reclaimAt.Load() { // another reclaim may have been first
			s.reclaim(now, &freed)
		}
		s.mu.Unlock()
	}
	total := 0
	for p, n := range freed {
		if n > 0 {
			l.count[p].Add(-int64(n))
			total += n
		}
	}
	if total > 0 {
		l.reclaimed.Add(uint64(total))
	}
	return total
}

// reclaim is the shard's part of Limiter.reclaim, adding the entries it
// removes to freed by pool; s.mu is held.
func (s *shard) reclaim(now Instant, freed *[numPools]int) {
	next := Instant(math.MaxInt64)
	for w := range s.inUse {
		for bits := s.inUse[w]; bits != 0; {
			b := mathbits.TrailingZeros64(bits)
			j := w*64 + b
			// A deletion may shift a later entry into j: look at j again
			// until it holds an entry that stays (or none).
			for s.slots[j].used {
				e := &s.slots[j]
				p := &s.pt.rows[e.policy].enforced[e.bucket]
				// Refilled on a copy: an entry that stays keeps its last
				// accrual, so a reconfiguration re-expresses the same
				// state whether or not a reclaim looked at it first.
				tb := e.tb
				tb.refill(p, now)
				if tb.tokens < p.burst {
					next = min(next, tb.fullAt(p))
					break
				}
				freed[e.pool]++
				s.delete(j)
			}
			// Later bits may have changed (entries shifted into them): read
			// the word again, past j.
			bits = s.inUse[w] &^ (1<<(b+1) - 1)
			if b == 63 {
				bits = 0
			}
		}
	}
	s.reclaimAt.Store(int64(next))
}

// delete empties slot i and shifts back the entries of its probe run that
// would no longer be found past the hole, so the table needs no tombstone.
// An entry only ever moves to a lower slot of its run (or wraps to the
// end of the table from its start), never past where a scan from slot 0
// has yet to look.
func (s *shard) delete(i int) {
	const mask = tableSlots - 1
	for j := (i + 1) & mask; s.slots[j].used; j = (j + 1) & mask {
		home := int(s.slots[j].hash & mask)
		// The entry at j stays if its home lies cyclically in (i, j].
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		s.slots[i] = s.slots[j]
		i = j
	}
	s.slots[i] = entry{}
	s.inUse[i/64] &^= 1 << (i % 64)
}
