package limiter

import (
	"math"
	mathbits "math/bits"
)

// Params returns the configuration in force: the one given to New, or to
// the last Reconfigure that succeeded, with Now and Local left nil (the
// limiter's clock and pools never change). Policies is a copy.
func (l *Limiter) Params() Config {
	l.reconfMu.Lock()
	defer l.reconfMu.Unlock()
	return l.cfg.withoutClock()
}

// Reconfigure is ReconfigureAt at the limiter's clock.
func (l *Limiter) Reconfigure(cfg Config) error { return l.ReconfigureAt(cfg, l.now()) }

// ReconfigureAt puts cfg's sizes, policies and matcher in force at instant
// now (cfg.Now and cfg.Local are not looked at: the clock and the pool of
// each identity stay those given to New). It checks cfg as New does and, on
// error, changes nothing.
//
// Every existing bucket (the map entries of both pools and the overflow
// buckets) keeps its state and is re-expressed in its new sizes without
// minting anything. An entry's new sizes are those of the policy cfg.Match
// now assigns its identity (so an identity whose policy was added, changed,
// removed or promoted from its shadow keeps its state); an overflow bucket
// keeps the state of the overflow bucket of the same policy name, and a
// policy new to the configuration starts with full overflow buckets. The
// re-expression: a bucket's holding at now, counted in tokens and the
// fraction of a token its banked partial interval stands for, becomes the
// lesser of what it holds under the old sizes and what it would hold under
// the new sizes from its last accrual, capped at the new burst. So a
// drained bucket stays drained, a bucket holding more than the new burst is
// cut to it, and a banked partial interval is kept as the same fraction of
// the new interval (floored to a nanosecond), which is less than one token:
// the rule never adds a token, at now or later. A full bucket stays full of
// the old burst (if that is below the new one) and fills at the new rate;
// an identity without an entry, and so every new entry, gets the new burst
// at once.
//
// The shadow run follows the same rule in the shadow sizes. It starts, when
// the first shadow sizes are configured, as a copy of the enforced state
// re-expressed in the shadow sizes (what a limiter that had enforced them
// from that reconfiguration on would hold), and it is dropped when no
// policy has shadow sizes any more.
//
// The shards are re-expressed one at a time under their own lock, then the
// overflow buckets under theirs, so a charge waits at most for one shard's
// re-expression (at most MaxEntries + MaxLocalEntries entries; see
// BenchmarkChargeDuringReconfigure)
// and never for the whole pass; a reconfiguration that starts or drops the
// shadow run holds every lock for the pass instead. A charge meanwhile is
// consistent: an entry is always charged in the sizes its state is
// expressed in. Concurrent calls of ReconfigureAt are serialized. now
// should be a reading of the limiter's clock; an instant earlier than a
// bucket's last accrual is clamped to it, as ChargeAt does.
func (l *Limiter) ReconfigureAt(cfg Config, now Instant) error {
	nt, err := newTable(cfg)
	if err != nil {
		return err
	}
	l.reconfMu.Lock()
	defer l.reconfMu.Unlock()
	switch {
	case nt.anyShadow == (l.mirror != nil):
		l.apply(nt, now)
		if l.mirror != nil {
			l.mirror.apply(nt.mirror(), now)
		}
	case nt.anyShadow: // start the shadow run from the state before this change
		l.lockAll()
		m := l.newMirror(nt, now)
		l.applyLocked(nt, now)
		l.mirror = m
		l.unlockAll()
	default: // drop it
		l.lockAll()
		l.applyLocked(nt, now)
		l.mirror = nil
		l.unlockAll()
	}
	l.table = nt
	l.cfg = cfg.withoutClock()
	return nil
}

// apply re-expresses every bucket in nt and puts nt in force, one shard at
// a time.
func (l *Limiter) apply(nt *policyTable, now Instant) {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		s.reexpress(nt, now)
		s.mu.Unlock()
	}
	l.overflowMu.Lock()
	l.reexpressOverflow(nt, now)
	l.overflowMu.Unlock()
}

// applyLocked is apply with every lock held (lockAll).
func (l *Limiter) applyLocked(nt *policyTable, now Instant) {
	for i := range l.shards {
		l.shards[i].reexpress(nt, now)
	}
	l.reexpressOverflow(nt, now)
}

// lockAll takes every shard's lock and the overflow lock, in that order.
func (l *Limiter) lockAll() {
	for i := range l.shards {
		l.shards[i].mu.Lock()
	}
	l.overflowMu.Lock()
}

func (l *Limiter) unlockAll() {
	l.overflowMu.Unlock()
	for i := range l.shards {
		l.shards[i].mu.Unlock()
	}
}

// newMirror returns the shadow run of l for nt: a copy of l's state (every
// lock of l held, or l not yet shared) re-expressed at now in nt's shadow
// sizes.
func (l *Limiter) newMirror(nt *policyTable, now Instant) *Limiter {
	m := l.shadowOf(nt.mirror())
	for i := range l.shards {
		src, dst := &l.shards[i], &m.shards[i]
		dst.pt, dst.inUse, dst.slots = src.pt, src.inUse, src.slots
		dst.reclaimAt.Store(src.reclaimAt.Load())
	}
	for p := range l.count {
		m.count[p].Store(l.count[p].Load())
		m.overflow[p] = append(m.overflow[p], l.overflow[p]...)
	}
	m.overflowTable = l.overflowTable
	m.applyLocked(m.table, now)
	return m
}

// reexpress re-expresses every entry of the shard in the sizes of the
// policy nt assigns its identity, puts nt in force for the shard and
// recomputes its reclaimAt exactly; s.mu is held.
func (s *shard) reexpress(nt *policyTable, now Instant) {
	next := Instant(math.MaxInt64)
	for w := range s.inUse {
		for bits := s.inUse[w]; bits != 0; bits &= bits - 1 {
			e := &s.slots[w*64+mathbits.TrailingZeros64(bits)]
			pol := nt.resolve(e.identity)
			np := &nt.rows[pol].enforced[e.bucket]
			e.tb.reexpress(&s.pt.rows[e.policy].enforced[e.bucket], np, now)
			e.policy = pol
			next = min(next, e.tb.fullAt(np))
		}
	}
	s.pt = nt
	s.reclaimAt.Store(int64(next))
}

// reexpressOverflow re-expresses the overflow buckets in nt, by policy
// name; overflowMu is held.
func (l *Limiter) reexpressOverflow(nt *policyTable, now Instant) {
	old := l.overflowTable
	for p := range l.overflow {
		o := fullOverflow(nt)
		for pol, row := range nt.rows {
			j, ok := old.byName[row.name]
			if !ok {
				continue
			}
			for v := range o[pol] {
				for b := range o[pol][v] {
					o[pol][v][b] = l.overflow[p][j][v][b]
					o[pol][v][b].reexpress(&old.rows[j].enforced[b], &nt.rows[pol].enforced[b], now)
				}
			}
		}
		l.overflow[p] = o
	}
	l.overflowTable = nt
}

// reexpress rewrites b, kept in old, in nw at now (see ReconfigureAt for the
// rule). An instant before b's last accrual is clamped to it.
func (b *tokenBucket) reexpress(old, nw *params, now Instant) {
	t := max(now, b.accruedAt)
	// a: b under the old sizes at t; c: b as if the new sizes had held since
	// its last accrual. Each holds tokens plus a banked fraction of a token,
	// here both counted in nanoseconds of the new interval.
	a, c := *b, *b
	a.refill(old, t)
	c.refill(nw, t)
	ta, fa := min(a.tokens, nw.burst), uint64(0)
	if a.tokens < old.burst {
		// The banked partial interval (t − accruedAt < old interval) as
		// the same fraction of the new interval, floored. The quotient is
		// below nw.interval, so it fits and Div64 cannot panic.
		hi, lo := mathbits.Mul64(uint64(t)-uint64(a.accruedAt), uint64(nw.interval))
		fa, _ = mathbits.Div64(hi, lo, uint64(old.interval))
	}
	tc, fc := min(c.tokens, nw.burst), uint64(0)
	if c.tokens < nw.burst {
		fc = uint64(t) - uint64(c.accruedAt)
	}
	tokens, frac := ta, fa
	if tc < ta || tc == ta && fc < fa {
		tokens, frac = tc, fc
	}
	if tokens >= nw.burst {
		*b = tokenBucket{tokens: nw.burst, accruedAt: t} // full: banks nothing
		return
	}
	if int64(t) < math.MinInt64+int64(frac) {
		frac = 0 // unrepresentable: drop the fraction, which never adds a token
	}
	*b = tokenBucket{tokens: tokens, accruedAt: t - Instant(frac)}
}
