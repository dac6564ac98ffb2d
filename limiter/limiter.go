package limiter

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// BucketConfig sizes one kind of bucket.
type BucketConfig struct {
	// Burst is the bucket's capacity in tokens; a bucket is created holding
	// it. Must be > 0: a zero burst throttles the first legitimate mint.
	Burst uint32
	// RefillInterval is the time per token. Must be > 0: a zero interval is
	// an unbounded token supply. Any interval is honoured exactly: tokens are
	// counted in whole units and partial intervals are banked, never floored
	// away.
	RefillInterval time.Duration
}

// Config sizes the two kinds of bucket. The same sizes apply to every
// identity, to both verbs, and to the four overflow buckets.
type Config struct {
	PredecisionRefusal BucketConfig
	Admission          BucketConfig
	// Now is the clock Charge reads. Nil means MonotonicNow. It must be
	// monotonic; tests inject a fake.
	Now func() Instant
	// Local reports the identities whose entries are kept in the local
	// pool (MaxLocalEntries, with overflow buckets of its own) rather than
	// the remote one (MaxEntries). It must be a pure function of the
	// identity, cheap (it runs on every charge) and safe for concurrent
	// use. Nil: every identity is remote.
	Local func(identity string) bool
}

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("limiter: invalid configuration")

// Decision is the result of one charge.
type Decision struct {
	// Allowed reports that the charge took a token: the invocation proceeds
	// and its audit records are written.
	Allowed bool
	// Remaining is the number of tokens left in the charged bucket after
	// this charge.
	Remaining uint32
	// RetryAfterSeconds is, for a limited charge, the time until the charged
	// bucket holds one token, rounded up to whole seconds, at least 1. It is
	// 0 for an allowed charge. It is deterministic: a caller with several
	// outstanding requests should jitter its own retries.
	RetryAfterSeconds uint64
	// Overflow reports that the charge fell on the shared overflow bucket of
	// its (verb, bucket) in its identity's pool because that pool was at its
	// cap (MaxEntries or MaxLocalEntries) with every entry drained.
	Overflow bool
}

// RetryAfter returns RetryAfterSeconds as a time.Duration.
func (d Decision) RetryAfter() time.Duration {
	return time.Duration(d.RetryAfterSeconds) * time.Second
}

// Stats is a point-in-time view of the limiter's map, for telemetry.
type Stats struct {
	// Entries is the number of entries in the map, both pools, at most
	// MaxEntries + MaxLocalEntries.
	Entries int
	// LocalEntries is the part of Entries in the local pool, at most
	// MaxLocalEntries.
	LocalEntries int
	// Reclaimed counts entries removed (always at full burst) since start.
	Reclaimed uint64
	// OverflowCharges counts charges that fell on each overflow bucket,
	// both pools'.
	OverflowCharges [vocab.NumVerbs][vocab.NumBuckets]uint64
}

// Limiter bounds how fast each client identity may drive each verb, with one
// token bucket per (identity, verb, bucket) key. Buckets are created lazily and
// full, live in memory only, and are never persisted: a restart resets them.
//
// A Limiter is safe for concurrent use. Keys are spread over shards with a
// lock each, so charges of different keys on different cores rarely wait for
// one another; the cap, the reclaim rule and the overflow buckets are global
// and exact. No lock is held while the sink runs.
type Limiter struct {
	// params is the configuration last given to New or Reconfigure, kept
	// for Params; the request path reads each shard's own copy (and
	// overflowParams) under that shard's lock instead, so Reconfigure can
	// move the shards one at a time. Written under reconfMu.
	params   [vocab.NumBuckets]params
	reconfMu sync.Mutex
	now      func() Instant
	// wallClock: now is MonotonicNow (Config.Now was nil), so a caller's
	// own time.Now reading may stand in for it (ChargeTime).
	wallClock bool
	sink      Sink
	seed      maphash.Seed

	shards [numShards]shard

	local func(identity string) bool

	// count is the number of entries of each pool across all shards, ≤
	// poolCap. A slot is reserved (count incremented) before an entry is
	// inserted.
	count     [numPools]atomic.Int64
	reclaimed atomic.Uint64

	overflowMu     sync.Mutex
	overflowParams [vocab.NumBuckets]params // under overflowMu
	overflow       [numPools][vocab.NumVerbs][vocab.NumBuckets]tokenBucket
	overflowed     [numPools][vocab.NumVerbs][vocab.NumBuckets]atomic.Uint64
}

// New returns a Limiter with every overflow bucket full. sink receives one
// Event per limited charge; nil means Discard.
func New(cfg Config, sink Sink) (*Limiter, error) {
	np, err := newParams(cfg)
	if err != nil {
		return nil, err
	}
	if sink == nil {
		sink = Discard
	}
	now := cfg.Now
	if now == nil {
		now = MonotonicNow
	}
	l := &Limiter{
		params:         np,
		overflowParams: np,
		now:            now,
		wallClock:      cfg.Now == nil,
		sink:           sink,
		seed:           maphash.MakeSeed(),
		local:          cfg.Local,
	}
	for i := range l.shards {
		l.shards[i].params = np
		l.shards[i].reclaimAt.Store(math.MaxInt64)
	}
	for p := range l.overflow {
		for v := range l.overflow[p] {
			for b := range l.overflow[p][v] {
				// Full; a full bucket's accrual instant is set by its first
				// charge, whatever clock origin the caller's instants use.
				l.overflow[p][v][b] = tokenBucket{tokens: l.params[b].burst, accruedAt: math.MinInt64}
			}
		}
	}
	return l, nil
}

// newParams checks cfg's two bucket sizes (cfg.Now is not looked at).
func newParams(cfg Config) ([vocab.NumBuckets]params, error) {
	var errs []error
	for b, bc := range [vocab.NumBuckets]BucketConfig{vocab.PredecisionRefusal: cfg.PredecisionRefusal, vocab.Admission: cfg.Admission} {
		name := vocab.Bucket(b).String()
		if bc.Burst == 0 {
			errs = append(errs, fmt.Errorf("%w: %s burst must be greater than 0", ErrInvalidConfig, name))
		}
		if bc.RefillInterval <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s refill interval must be greater than 0", ErrInvalidConfig, name))
		}
	}
	if len(errs) > 0 {
		return [vocab.NumBuckets]params{}, errors.Join(errs...)
	}
	return [vocab.NumBuckets]params{
		vocab.PredecisionRefusal: {burst: cfg.PredecisionRefusal.Burst, interval: int64(cfg.PredecisionRefusal.RefillInterval)},
		vocab.Admission:          {burst: cfg.Admission.Burst, interval: int64(cfg.Admission.RefillInterval)},
	}, nil
}

// Charge takes one token from the bucket of (identity, verb, bucket) at the
// limiter's current clock reading, and returns the decision. identity is
// opaque and used verbatim.
//
// A charge on a present key charges that entry. On an absent key: below the
// cap a full entry is inserted and charged; at the cap every entry refilled
// to its full burst is reclaimed first (never one below full), and if that
// freed a slot the key is inserted; otherwise the charge falls on the
// overflow bucket of (verb, bucket). There is always exactly one bucket to
// charge: nothing is admitted unlimited for want of a slot.
//
// A limited charge publishes exactly one Event to the sink, after every lock
// is released, with ctx. An allowed charge publishes nothing.
//
// A verb or bucket outside the two defined values is denied (fail closed,
// RetryAfterSeconds 1) without an event; it is a programming error.
func (l *Limiter) Charge(ctx context.Context, identity string, verb vocab.Verb, bucket vocab.Bucket) Decision {
	return l.chargeAt(ctx, identity, verb, bucket, l.now(), time.Time{})
}

// chargeAt takes one token from the bucket of (identity, verb, bucket) at
// instant now, and returns the decision; at, if not zero, is the clock
// reading now was taken from, passed on in the event. identity is opaque
// and used verbatim.
//
// A charge on a present key charges that entry. On an absent key: below the
// cap a full entry is inserted and charged; at the cap every entry refilled
// to its full burst is reclaimed first (never one below full), and if that
// freed a slot the key is inserted; otherwise the charge falls on the
// overflow bucket of (verb, bucket). There is always exactly one bucket to
// charge: nothing is admitted unlimited for want of a slot.
//
// A limited charge publishes exactly one Event to the sink, after every lock
// is released, with ctx. An allowed charge publishes nothing.
//
// now may be earlier than the bucket's last accrual (a clock read outside the
// lock under contention): it is then clamped, adding no tokens and never
// moving the bucket's accrual backwards.
//
// A verb or bucket outside the two defined values is denied (fail closed,
// RetryAfterSeconds 1) without an event; it is a programming error.
func (l *Limiter) chargeAt(ctx context.Context, identity string, verb vocab.Verb, bucket vocab.Bucket, now Instant, at time.Time) Decision {
	if !verb.Valid() || !bucket.Valid() {
		return Decision{RetryAfterSeconds: 1}
	}
	h := l.hash(identity, verb, bucket)
	pool := l.poolOf(identity)
	d, ok := l.chargeEntry(identity, h, verb, bucket, pool, now)
	// Retry after a reclaim that freed a slot, or when a concurrent
	// reclaim did; at a drained cap neither holds and the miss goes
	// straight to the overflow bucket.
	if !ok && (l.reclaim(now) > 0 || l.count[pool].Load() < poolCap[pool]) {
		d, ok = l.chargeEntry(identity, h, verb, bucket, pool, now)
	}
	if !ok {
		d = l.chargeOverflow(verb, bucket, pool, now)
	}
	if !d.Allowed {
		l.sink.Limited(ctx, Event{
			Identity:          identity,
			Verb:              verb,
			Bucket:            bucket,
			RetryAfterSeconds: d.RetryAfterSeconds,
			Overflow:          d.Overflow,
			At:                at,
		})
	}
	return d
}

// Stats returns the map's current size and the reclaim and overflow counters.
func (l *Limiter) Stats() Stats {
	local := int(l.count[1].Load())
	s := Stats{Entries: int(l.count[0].Load()) + local, LocalEntries: local, Reclaimed: l.reclaimed.Load()}
	for p := range l.overflowed {
		for v := range s.OverflowCharges {
			for b := range s.OverflowCharges[v] {
				s.OverflowCharges[v][b] += l.overflowed[p][v][b].Load()
			}
		}
	}
	return s
}
