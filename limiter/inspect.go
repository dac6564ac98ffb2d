package limiter

import (
	"math"
	mathbits "math/bits"
	"slices"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Looking at one identity's buckets, and refilling them: the administrative
// view (limits show, limits reset) and the RateLimit answer headers.

// State says where a key's bucket is.
type State uint8

// The three states.
const (
	// StateEntry: the key has its own bucket in the map.
	StateEntry State = iota + 1
	// StateAbsent: the key has no entry; its next charge creates one,
	// full.
	StateAbsent
	// StateOverflow: the key has no entry and its pool is at its cap with
	// no entry full, so its next charge falls on the overflow bucket of
	// its (policy, verb, bucket), whose state is shown.
	StateOverflow
)

var states = vocab.NewEnum[State]("State", "state", []string{
	StateEntry:    "entry",
	StateAbsent:   "absent",
	StateOverflow: "overflow",
})

// String returns "entry", "absent" or "overflow".
func (s State) String() string { return states.String(s) }

// BucketStatus is one bucket's state at an instant, refilled to it but not
// charged.
type BucketStatus struct {
	Verb   vocab.Verb
	Bucket vocab.Bucket
	// Policy is the name of the policy whose sizes the bucket has.
	Policy string
	State  State
	// Burst and RefillInterval are the bucket's sizes.
	Burst          uint32
	RefillInterval time.Duration
	// Tokens is what the bucket holds (Burst for an absent key).
	Tokens uint32
	// RetryAfter is the time until the bucket holds a token; 0 when it
	// holds one.
	RetryAfter time.Duration
	// NextIn is the time until the bucket gains its next token; 0 when
	// full. It is RetryAfter when the bucket is empty.
	NextIn time.Duration
	// FullIn is the time until the bucket holds its burst; 0 when full.
	FullIn time.Duration
	// Shadow is the shadow run's bucket of the same key, for an identity
	// of a policy with shadow sizes; nil otherwise.
	Shadow *BucketStatus
}

// IdentityStatus is one identity's four buckets.
type IdentityStatus struct {
	Identity string
	// Local reports the identity's pool: the local one (Config.Local) or
	// the remote one.
	Local bool
	// Policy is the name of the policy the configuration assigns the
	// identity now.
	Policy  string
	Buckets [vocab.NumVerbs][vocab.NumBuckets]BucketStatus
}

// Status is the state of c's (verb, bucket) at the limiter's clock. An
// invalid verb or bucket has the zero status.
func (l *Limiter) Status(c Caller, verb vocab.Verb, bucket vocab.Bucket) BucketStatus {
	return l.statusAt(c, verb, bucket, l.now(), true)
}

// Inspect is the state of identity's four buckets at the limiter's clock.
func (l *Limiter) Inspect(identity string) IdentityStatus {
	now := l.now()
	c := l.Caller(identity)
	st := IdentityStatus{Identity: identity, Local: c.pool == 1}
	l.overflowMu.Lock()
	st.Policy = l.overflowTable.rows[l.overflowTable.resolve(identity)].name
	l.overflowMu.Unlock()
	for v := range vocab.NumVerbs {
		for b := range vocab.NumBuckets {
			st.Buckets[v][b] = l.statusAt(c, vocab.Verb(v), vocab.Bucket(b), now, true)
		}
	}
	return st
}

// statusAt is Status at now; withShadow adds the shadow run's.
func (l *Limiter) statusAt(c Caller, verb vocab.Verb, bucket vocab.Bucket, now Instant, withShadow bool) BucketStatus {
	if !verb.Valid() || !bucket.Valid() {
		return BucketStatus{}
	}
	if c.origin != l.origin {
		c = l.Caller(c.identity)
	}
	st := BucketStatus{Verb: verb, Bucket: bucket}
	var (
		tb       tokenBucket
		p        params
		shadowed bool
		mirror   *Limiter
	)
	h := keyHash(c.hash, verb, bucket)
	s := l.shardOf(h)
	s.mu.Lock()
	i, found := s.find(c.identity, h, verb, bucket)
	if found {
		e := &s.slots[i]
		row := &s.pt.rows[e.policy]
		tb, p = e.tb, row.enforced[bucket]
		st.Policy, st.State, shadowed = row.name, StateEntry, row.shadowed
	}
	mirror = l.mirror
	s.mu.Unlock()
	if !found {
		overflow := l.count[c.pool].Load() >= poolCap[c.pool] && !l.reclaimable(now)
		l.overflowMu.Lock()
		pt := l.overflowTable
		pol := pt.resolve(c.identity)
		p, shadowed = pt.rows[pol].enforced[bucket], pt.rows[pol].shadowed
		st.Policy, st.State = pt.rows[pol].name, StateAbsent
		tb = tokenBucket{tokens: p.burst, accruedAt: now}
		if overflow {
			st.State, tb = StateOverflow, l.overflow[c.pool][pol][verb][bucket]
		}
		l.overflowMu.Unlock()
	}
	st.Burst, st.RefillInterval = p.burst, time.Duration(p.interval)
	tb.refill(&p, now)
	st.Tokens = tb.tokens
	if tb.tokens < p.burst {
		st.NextIn = tb.fullAt(&params{burst: tb.tokens + 1, interval: p.interval}).sub(now)
	}
	if tb.tokens == 0 {
		st.RetryAfter = st.NextIn
	}
	st.FullIn = tb.fullAt(&p).sub(now)
	if withShadow && shadowed && mirror != nil {
		sh := mirror.statusAt(c, verb, bucket, now, false)
		st.Shadow = &sh
	}
	return st
}

// sub is the duration from now to i, 0 if i is not after now, saturating.
func (i Instant) sub(now Instant) time.Duration {
	if i <= now {
		return 0
	}
	d := uint64(i) - uint64(now)
	if d > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// reclaimable reports whether some shard may hold a full entry at now.
func (l *Limiter) reclaimable(now Instant) bool {
	for i := range l.shards {
		if int64(now) >= l.shards[i].reclaimAt.Load() {
			return true
		}
	}
	return false
}

// Identities returns every identity with an entry in the map, sorted.
func (l *Limiter) Identities() []string {
	var ids []string
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for w := range s.inUse {
			for bits := s.inUse[w]; bits != 0; bits &= bits - 1 {
				ids = append(ids, s.slots[w*64+mathbits.TrailingZeros64(bits)].identity)
			}
		}
		s.mu.Unlock()
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// OverflowStatus is one overflow bucket's state.
type OverflowStatus struct {
	// Local reports the pool: the local one or the remote one.
	Local bool
	BucketStatus
	// Charges counts the charges that fell on the overflow buckets of
	// (Verb, Bucket) in the pool, every policy's, since start.
	Charges uint64
}

// Overflow is the state of every overflow bucket at the limiter's clock,
// by pool (remote first), policy, verb and bucket.
func (l *Limiter) Overflow() []OverflowStatus {
	now := l.now()
	l.overflowMu.Lock()
	defer l.overflowMu.Unlock()
	pt := l.overflowTable
	var out []OverflowStatus
	for pool := range l.overflow {
		for pol := range l.overflow[pool] {
			for v := range vocab.NumVerbs {
				for b := range vocab.NumBuckets {
					p := pt.rows[pol].enforced[b]
					tb := l.overflow[pool][pol][v][b]
					tb.refill(&p, now)
					st := BucketStatus{Verb: vocab.Verb(v), Bucket: vocab.Bucket(b), Policy: pt.rows[pol].name, State: StateOverflow,
						Burst: p.burst, RefillInterval: time.Duration(p.interval), Tokens: tb.tokens, FullIn: tb.fullAt(&p).sub(now)}
					if tb.tokens < p.burst {
						st.NextIn = tb.fullAt(&params{burst: tb.tokens + 1, interval: p.interval}).sub(now)
					}
					if tb.tokens == 0 {
						st.RetryAfter = st.NextIn
					}
					out = append(out, OverflowStatus{Local: pool == 1, BucketStatus: st, Charges: l.overflowed[pool][v][b].Load()})
				}
			}
		}
	}
	return out
}

// Reset refills identity's own buckets of the given verbs and buckets (all
// of them when a list is empty) to their burst, in the enforced and the
// shadow run, and returns their state after. A key with no entry is
// already full and is left so; the overflow buckets are shared by every
// identity without an entry and are never reset for one of them.
// An invalid verb or bucket is ignored.
func (l *Limiter) Reset(identity string, verbs []vocab.Verb, buckets []vocab.Bucket) []BucketStatus {
	if len(verbs) == 0 {
		verbs = []vocab.Verb{vocab.Mint, vocab.Deregister}
	}
	if len(buckets) == 0 {
		buckets = []vocab.Bucket{vocab.Admission, vocab.PredecisionRefusal}
	}
	now := l.now()
	c := l.Caller(identity)
	var out []BucketStatus
	for _, v := range verbs {
		for _, b := range buckets {
			if !v.Valid() || !b.Valid() {
				continue
			}
			if m := l.resetKey(c, v, b, now); m != nil {
				m.resetKey(c, v, b, now)
			}
			out = append(out, l.statusAt(c, v, b, now, true))
		}
	}
	return out
}

// resetKey refills the key's entry, if it has one, to its burst at now,
// and returns the mirror as its lock saw it.
func (l *Limiter) resetKey(c Caller, verb vocab.Verb, bucket vocab.Bucket, now Instant) *Limiter {
	h := keyHash(c.hash, verb, bucket)
	s := l.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, found := s.find(c.identity, h, verb, bucket); found {
		e := &s.slots[i]
		e.tb = tokenBucket{tokens: s.pt.rows[e.policy].enforced[bucket].burst, accruedAt: max(now, e.tb.accruedAt)}
		if at := int64(e.tb.accruedAt); at < s.reclaimAt.Load() {
			s.reclaimAt.Store(at)
		}
	}
	return l.mirror
}
