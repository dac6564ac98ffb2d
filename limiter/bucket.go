package limiter

import (
	"math"
	"time"
)

// The token bucket arithmetic: integer tokens on Instants, partial
// intervals banked, a full bucket banking nothing.

type params struct {
	burst    uint32
	interval int64 // nanoseconds per token, > 0
}

// tokenBucket is the state of one bucket. Tokens accrue one per interval
// from accruedAt; accruedAt advances by whole intervals only, so a partial
// interval is banked rather than discarded. A full bucket banks nothing.
type tokenBucket struct {
	tokens    uint32
	accruedAt Instant
}

// refill accrues whole intervals elapsed since accruedAt, capped at the
// burst. A time before accruedAt is clamped to it: it adds nothing and never
// moves accruedAt backwards.
func (b *tokenBucket) refill(p *params, now Instant) {
	if now <= b.accruedAt {
		return // clamped: an earlier (or equal) instant adds nothing
	}
	if b.tokens >= p.burst {
		// A full bucket banks nothing: time spent full earns no credit.
		b.accruedAt = now
		return
	}
	// now > accruedAt, so the unsigned difference is exact even when the
	// two straddle zero.
	elapsed := uint64(now) - uint64(b.accruedAt)
	if elapsed < uint64(p.interval) {
		// Less than one interval: nothing to gain, and no division (a
		// flood's every charge, and most of ordinary traffic's).
		return
	}
	gained := elapsed / uint64(p.interval)
	if gained >= uint64(p.burst-b.tokens) {
		b.tokens = p.burst
		b.accruedAt = now
		return
	}
	b.tokens += uint32(gained)
	// gained×interval ≤ elapsed, so accruedAt stays ≤ now; the remainder of
	// elapsed is the banked partial interval.
	b.accruedAt += Instant(gained * uint64(p.interval))
}

// take refills the bucket at now and takes one token if it holds one.
func (b *tokenBucket) take(p *params, now Instant) Decision {
	if b.takeToken(p, now) {
		return Decision{Allowed: true, Remaining: b.tokens}
	}
	return Decision{RetryAfterSeconds: b.retryAfter(p, now)}
}

// takeToken refills the bucket at now and takes one token if it holds
// one, reporting whether it did.
func (b *tokenBucket) takeToken(p *params, now Instant) bool {
	b.refill(p, now)
	if b.tokens > 0 {
		b.tokens--
		return true
	}
	return false
}

// retryAfter is, for an empty bucket just refilled at now, the time until
// it holds one token, rounded up to whole seconds, at least 1.
func (b *tokenBucket) retryAfter(p *params, now Instant) uint64 {
	// Empty: the next token arrives one interval after accruedAt. After a
	// refill of an empty bucket now−accruedAt < interval, so wait > 0.
	wait := uint64(p.interval)
	if now > b.accruedAt {
		wait -= uint64(now) - uint64(b.accruedAt)
	} else {
		// A clamped instant: the token is still due one interval after
		// accruedAt, which is further away from now.
		wait += uint64(b.accruedAt) - uint64(now)
		if wait < uint64(p.interval) { // wrapped: saturate
			wait = math.MaxUint64
		}
	}
	secs := wait / uint64(time.Second)
	if wait%uint64(time.Second) != 0 {
		secs++ // round up: never invite a retry before the token exists
	}
	if secs < 1 {
		secs = 1
	}
	return secs
}

// fullAt returns the instant the bucket would hold its full burst if no
// further charge were made, saturating at the largest Instant.
func (b *tokenBucket) fullAt(p *params) Instant {
	if b.tokens >= p.burst {
		return b.accruedAt
	}
	deficit := int64(p.burst - b.tokens)
	if deficit > math.MaxInt64/p.interval {
		return math.MaxInt64
	}
	d := deficit * p.interval
	if b.accruedAt > 0 && d > math.MaxInt64-int64(b.accruedAt) {
		return math.MaxInt64
	}
	return b.accruedAt + Instant(d)
}
