package limiter

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	mathbits "math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// MaxEntries caps the entry map, counted in entries (one per
// (identity, verb, bucket) key), not in identities: the reference deployment
// is 64 identities × 4 buckets. Entries are what consume memory, and counting
// them keeps the cap in the same unit as the reclaim rule (only a full entry is
// ever removed). In normal operation the cap is never reached; it exists so an
// identity that is unstable across connections cannot become memory
// exhaustion.
const MaxEntries = 256

// MaxLocalEntries caps the local pool: the entries of the identities
// Config.Local reports (the daemon's: the unix socket's callers, one per
// uid), counted like MaxEntries and apart from them. A flood of remote
// identities (one per client certificate) fills MaxEntries and then the
// remote overflow buckets, never a slot or an overflow bucket of a local
// caller (issue 27: 128 mTLS identities held the one shared map full and
// the unix control plane's next mint was answered RegistrarBusy).
const MaxLocalEntries = 256

// numPools is the remote pool (0, capped at MaxEntries) and the local pool
// (1, capped at MaxLocalEntries); each has its own overflow buckets.
const numPools = 2

// poolCap is each pool's cap, by pool.
var poolCap = [numPools]int64{MaxEntries, MaxLocalEntries}

// tableSlots is the open-addressing table size: a power of two, twice
// the two pools' caps together, so the load factor never exceeds one half
// and probes stay short.
const tableSlots = 2 * (MaxEntries + MaxLocalEntries)

// Instant is a reading of a monotonic clock in nanoseconds since an arbitrary
// origin. The limiter's arithmetic is done on Instants only, never on wall
// time, so a wall-clock step cannot mint tokens.
type Instant int64

// processOrigin is the origin of MonotonicNow. time.Since uses the monotonic
// reading time.Now attaches, so MonotonicNow ignores wall-clock steps.
var processOrigin = time.Now()

// MonotonicNow reads the runtime's monotonic clock. It is the limiter's
// default clock.
func MonotonicNow() Instant { return monotonicSince(time.Now()) }

// monotonicSince is now's Instant: its distance from processOrigin on the
// monotonic clock both carry, whatever their wall readings say.
func monotonicSince(now time.Time) Instant { return Instant(now.Sub(processOrigin)) }

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
	// its (verb, bucket) because the map was at MaxEntries with every entry
	// drained.
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
	OverflowCharges [NumVerbs][NumBuckets]uint64
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
	params   [NumBuckets]params
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
	overflowParams [NumBuckets]params // under overflowMu
	overflow       [numPools][NumVerbs][NumBuckets]tokenBucket
	overflowed     [numPools][NumVerbs][NumBuckets]atomic.Uint64
}

// numShards spreads keys over independently locked tables. Each shard's
// table can hold the whole cap (an unlucky hash spread must never refuse an
// insert below the cap), so memory is numShards × tableSlots entries.
const numShards = 8

type shard struct {
	mu sync.Mutex
	// params sizes the shard's entries; written by Reconfigure under mu,
	// after it re-expressed every entry, so an entry is always charged in
	// the parameters its state is expressed in.
	params [NumBuckets]params
	// reclaimAt is a lower bound on the instant at which some entry of the
	// shard could be full again; it is written under mu and read without
	// it. Charging an entry only delays the instant it fills, so the bound
	// stays valid until the shard's next reclaim recomputes it exactly;
	// below it a miss at the cap skips the shard, keeping the attack path
	// (identity churn against a drained map) a few atomic loads.
	reclaimAt atomic.Int64
	// inUse has bit i set when slots[i] is used, so a reclaim visits the
	// shard's entries, not its empty slots.
	inUse [tableSlots / 64]uint64
	slots [tableSlots]entry
	_     [64]byte // keep the next shard's lock off this cache line
}

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

type entry struct {
	identity string
	hash     uint64
	tb       tokenBucket
	verb     Verb
	bucket   Bucket
	pool     uint8
	used     bool
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
func newParams(cfg Config) ([NumBuckets]params, error) {
	var errs []error
	for b, bc := range [NumBuckets]BucketConfig{PredecisionRefusal: cfg.PredecisionRefusal, Admission: cfg.Admission} {
		name := Bucket(b).String()
		if bc.Burst == 0 {
			errs = append(errs, fmt.Errorf("%w: %s burst must be greater than 0", ErrInvalidConfig, name))
		}
		if bc.RefillInterval <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s refill interval must be greater than 0", ErrInvalidConfig, name))
		}
	}
	if len(errs) > 0 {
		return [NumBuckets]params{}, errors.Join(errs...)
	}
	return [NumBuckets]params{
		PredecisionRefusal: {burst: cfg.PredecisionRefusal.Burst, interval: int64(cfg.PredecisionRefusal.RefillInterval)},
		Admission:          {burst: cfg.Admission.Burst, interval: int64(cfg.Admission.RefillInterval)},
	}, nil
}

// Now reads the limiter's clock.
func (l *Limiter) Now() Instant { return l.now() }

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
func (l *Limiter) Charge(ctx context.Context, identity string, verb Verb, bucket Bucket) Decision {
	return l.chargeAt(ctx, identity, verb, bucket, l.now(), time.Time{})
}

// ChargeTime is Charge for a caller that has just read the clock: t, a
// time.Now reading, stands in for the limiter's own clock read when the
// limiter runs on its default clock (MonotonicNow), and a limited charge's
// Event carries it as At. Only t's monotonic reading is used: a t without
// one (t.UTC(), t.Round(0), a parsed or constructed time; t == t.Round(0))
// is not trusted, and the limiter reads its own clock instead, so no
// wall-clock reading, and no step of the wall clock, ever reaches a
// bucket. A limiter built with Config.Now reads that clock, as Charge
// does, and its events carry no At. The daemon's verbs pass the instant
// the invocation arrived: on a virtual machine a clock read costs about
// 50 ns, and the invocation has read the clock for its duration already.
// An instant a little in the past is allowed for (it is clamped, never
// moving a bucket's accrual backwards).
//
// There is no exported way to charge at an instant the caller makes up:
// the limiter's instants come from its own clock or from a monotonic
// reading of the runtime's.
func (l *Limiter) ChargeTime(ctx context.Context, identity string, verb Verb, bucket Bucket, t time.Time) Decision {
	if !l.wallClock {
		return l.chargeAt(ctx, identity, verb, bucket, l.now(), time.Time{})
	}
	if t == t.Round(0) {
		// No monotonic reading: t.Sub would subtract wall readings, and a
		// wall step would mint (or drain) tokens. Read the clock instead.
		t = time.Now()
	}
	return l.chargeAt(ctx, identity, verb, bucket, monotonicSince(t), t)
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
func (l *Limiter) chargeAt(ctx context.Context, identity string, verb Verb, bucket Bucket, now Instant, at time.Time) Decision {
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

// poolOf is the pool of identity's entries: 1 (local) when Config.Local
// says so, else 0 (remote).
func (l *Limiter) poolOf(identity string) uint8 {
	if l.local != nil && l.local(identity) {
		return 1
	}
	return 0
}

func (l *Limiter) hash(identity string, verb Verb, bucket Bucket) uint64 {
	h := maphash.String(l.seed, identity)
	h ^= (uint64(verb)<<1 | uint64(bucket) + 1) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	return h
}

// shardOf picks the shard from the hash's top bits; slot probing uses the
// low bits, so the two are independent.
func (l *Limiter) shardOf(h uint64) *shard { return &l.shards[h>>(64-3)] }

// chargeEntry charges the key's own entry, inserting it if a slot can be
// reserved below the cap. It reports false when the key is absent and the
// map is at the cap.
func (l *Limiter) chargeEntry(identity string, h uint64, verb Verb, bucket Bucket, pool uint8, now Instant) (Decision, bool) {
	s := l.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.params[bucket]
	i, found := s.find(identity, h, verb, bucket)
	if found {
		return s.slots[i].tb.take(p, now), true
	}
	if !l.reserve(pool) {
		return Decision{}, false
	}
	e := &s.slots[i]
	*e = entry{
		identity: identity,
		hash:     h,
		tb:       tokenBucket{tokens: p.burst, accruedAt: now},
		verb:     verb,
		bucket:   bucket,
		pool:     pool,
		used:     true,
	}
	s.inUse[i/64] |= 1 << (i % 64)
	d := e.tb.take(p, now)
	if at := int64(e.tb.fullAt(p)); at < s.reclaimAt.Load() {
		s.reclaimAt.Store(at) // under s.mu, like every write of it
	}
	return d, true
}

func (l *Limiter) chargeOverflow(verb Verb, bucket Bucket, pool uint8, now Instant) Decision {
	l.overflowed[pool][verb][bucket].Add(1)
	l.overflowMu.Lock()
	d := l.overflow[pool][verb][bucket].take(&l.overflowParams[bucket], now)
	l.overflowMu.Unlock()
	d.Overflow = true
	return d
}

// reserve takes one of the pool's slots, if one is free.
func (l *Limiter) reserve(pool uint8) bool {
	for {
		c := l.count[pool].Load()
		if c >= poolCap[pool] {
			return false
		}
		if l.count[pool].CompareAndSwap(c, c+1) {
			return true
		}
	}
}

// find returns the slot holding the key, or the empty slot where it would be
// inserted. A shard never holds more than MaxEntries + MaxLocalEntries
// entries in its tableSlots slots (load ≤ 1/2), so the probe terminates.
func (s *shard) find(identity string, h uint64, verb Verb, bucket Bucket) (int, bool) {
	const mask = tableSlots - 1
	i := int(h & mask)
	for {
		e := &s.slots[i]
		if !e.used {
			return i, false
		}
		if e.hash == h && e.verb == verb && e.bucket == bucket && e.identity == identity {
			return i, true
		}
		i = (i + 1) & mask
	}
}

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
				p := &s.params[e.bucket]
				e.tb.refill(p, now)
				if e.tb.tokens < p.burst {
					next = min(next, e.tb.fullAt(p))
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
	gained := elapsed / uint64(p.interval)
	if gained == 0 {
		return
	}
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
	b.refill(p, now)
	if b.tokens > 0 {
		b.tokens--
		return Decision{Allowed: true, Remaining: b.tokens}
	}
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
	return Decision{RetryAfterSeconds: secs}
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
