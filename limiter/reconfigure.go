package limiter

import (
	"math"
	mathbits "math/bits"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Params returns the bucket sizes in force: those given to New, or to the
// last Reconfigure that succeeded. Config.Now is left nil.
func (l *Limiter) Params() Config {
	l.reconfMu.Lock()
	defer l.reconfMu.Unlock()
	bc := func(p params) BucketConfig {
		return BucketConfig{Burst: p.burst, RefillInterval: time.Duration(p.interval)}
	}
	return Config{PredecisionRefusal: bc(l.params[vocab.PredecisionRefusal]), Admission: bc(l.params[vocab.Admission])}
}

// Reconfigure is ReconfigureAt at the limiter's clock.
func (l *Limiter) Reconfigure(cfg Config) error { return l.ReconfigureAt(cfg, l.now()) }

// ReconfigureAt puts cfg's bucket sizes in force at instant now (cfg.Now and
// cfg.Local are not looked at: the clock and the pool of each identity stay
// those given to New). It checks cfg as New does and, on error, changes
// nothing.
//
// Every existing bucket (the map entries of both pools and the overflow
// buckets, four per pool) keeps its state and is re-expressed in the new
// sizes without minting anything: its holding at now, counted in tokens and the fraction of a token its
// banked partial interval stands for, becomes the lesser of what it holds
// under the old sizes and what it would hold under the new sizes from its
// last accrual, capped at the new burst. So a drained bucket stays drained,
// a bucket holding more than the new burst is cut to it, and a banked
// partial interval is kept as the same fraction of the new interval
// (floored to a nanosecond), which is less than one token: the rule never
// adds a token, at now or later. A full bucket stays full of the old burst
// (if that is below the new one) and fills at the new rate; an identity
// without an entry, and so every new entry, gets the new burst at once.
//
// The shards are re-expressed one at a time under their own lock, then the
// overflow buckets under theirs, so a charge waits at most for one shard's
// re-expression (at most MaxEntries + MaxLocalEntries entries; see
// BenchmarkChargeDuringReconfigure)
// and never for the whole pass. A charge meanwhile is consistent: an entry is
// always charged in the sizes its state is expressed in. Concurrent calls of
// ReconfigureAt are serialized. now should be a reading of the limiter's
// clock; an instant earlier than a bucket's last accrual is clamped to it,
// as ChargeAt does.
func (l *Limiter) ReconfigureAt(cfg Config, now Instant) error {
	np, err := newParams(cfg)
	if err != nil {
		return err
	}
	l.reconfMu.Lock()
	defer l.reconfMu.Unlock()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		s.reexpress(&np, now)
		s.mu.Unlock()
	}
	l.overflowMu.Lock()
	for p := range l.overflow {
		for v := range l.overflow[p] {
			for b := range l.overflow[p][v] {
				l.overflow[p][v][b].reexpress(&l.overflowParams[b], &np[b], now)
			}
		}
	}
	l.overflowParams = np
	l.overflowMu.Unlock()
	l.params = np
	return nil
}

// reexpress re-expresses every entry of the shard in np, puts np in force
// for the shard and recomputes its reclaimAt exactly; s.mu is held.
func (s *shard) reexpress(np *[vocab.NumBuckets]params, now Instant) {
	next := Instant(math.MaxInt64)
	for w := range s.inUse {
		for bits := s.inUse[w]; bits != 0; bits &= bits - 1 {
			e := &s.slots[w*64+mathbits.TrailingZeros64(bits)]
			e.tb.reexpress(&s.params[e.bucket], &np[e.bucket], now)
			next = min(next, e.tb.fullAt(&np[e.bucket]))
		}
	}
	s.params = *np
	s.reclaimAt.Store(int64(next))
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
