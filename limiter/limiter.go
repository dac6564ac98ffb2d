package limiter

import (
	"context"
	"errors"
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

// Config sizes the two kinds of bucket: PredecisionRefusal and Admission
// are the default policy's sizes, those of every identity Match assigns no
// named policy; Policies size the others. A policy's sizes apply to both
// verbs and to its overflow buckets.
type Config struct {
	PredecisionRefusal BucketConfig
	Admission          BucketConfig
	// Policies are the named caller policies, at most MaxPolicies, with
	// unique names other than DefaultPolicy.
	Policies []Policy
	// Match assigns an identity its policy: the index into Policies, or
	// false for the default policy. It is called when an identity's entry
	// is created and, for every entry, when the limiter is reconfigured,
	// never on a present key's charge; it must be a pure function of the
	// identity and safe for concurrent use. Required when Policies is not
	// empty. An index outside Policies is taken as the default policy.
	Match func(identity string) (int, bool)
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
	// its (policy, verb, bucket) in its identity's pool because that pool
	// was at its cap (MaxEntries or MaxLocalEntries) with every entry
	// drained.
	Overflow bool
	// Policy is the name of the policy whose sizes the charged bucket had.
	Policy string
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
	// table is the policies given to New or to the last Reconfigure that
	// succeeded, and cfg that Config (Now and Local cleared), kept for
	// Params and the next Reconfigure; the request path reads each shard's
	// own table (and overflowTable) under that shard's lock instead, so
	// Reconfigure can move the shards one at a time. Written under
	// reconfMu.
	table    *policyTable
	cfg      Config
	reconfMu sync.Mutex
	now      func() Instant
	// wallClock: now is MonotonicNow (Config.Now was nil), so a caller's
	// own time.Now reading may stand in for it (ChargeTime).
	wallClock bool
	sink      Sink
	// silent: sink is Discard, so a limited charge builds no Event.
	silent bool
	seed   maphash.Seed
	// origin is the limiter whose seed hashed a Caller (the limiter
	// itself, or for the shadow run the limiter it mirrors): a Caller of
	// another origin is hashed again.
	origin *Limiter

	shards [numShards]shard

	local func(identity string) bool

	// count is the number of entries of each pool across all shards, ≤
	// poolCap. A slot is reserved (count incremented) before an entry is
	// inserted.
	count     [numPools]atomic.Int64
	reclaimed atomic.Uint64

	overflowMu    sync.Mutex
	overflowTable *policyTable                                              // under overflowMu
	overflow      [numPools][][vocab.NumVerbs][vocab.NumBuckets]tokenBucket // by policy, under overflowMu
	overflowed    [numPools][vocab.NumVerbs][vocab.NumBuckets]atomic.Uint64

	// mirror is the shadow run while some policy has shadow sizes, else
	// nil: a limiter of the same seed and clock whose every policy has its
	// shadow sizes (its enforced ones where it has none), charged after
	// each charge of this limiter with the same key at the same instant,
	// so its decisions are those a limiter enforcing the shadow sizes
	// would make. It is written with every shard lock and overflowMu held
	// and read under any one of them, by the charge whose bucket that lock
	// guards: a charge is mirrored exactly when it happened after the
	// mirror was made from this limiter's state.
	mirror *Limiter
	// shadowRun: this limiter is a mirror. It publishes an event only for
	// a limited charge of a shadowed policy, with Shadow set.
	shadowRun bool
}

// New returns a Limiter with every overflow bucket full. sink receives one
// Event per limited charge, and one per shadow charge that found no token;
// nil means Discard.
func New(cfg Config, sink Sink) (*Limiter, error) {
	t, err := newTable(cfg)
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
		table:     t,
		now:       now,
		wallClock: cfg.Now == nil,
		sink:      sink,
		silent:    sink == Discard,
		seed:      maphash.MakeSeed(),
		local:     cfg.Local,
	}
	l.cfg = cfg.withoutClock()
	l.origin = l
	l.empty(t)
	if t.anyShadow {
		m := l.shadowOf(t.mirror())
		m.empty(m.table)
		l.mirror = m
	}
	return l, nil
}

// empty puts t in force in a limiter with no entry and every overflow
// bucket full.
func (l *Limiter) empty(t *policyTable) {
	for i := range l.shards {
		l.shards[i].pt = t
		l.shards[i].reclaimAt.Store(math.MaxInt64)
	}
	l.overflowTable = t
	for p := range l.overflow {
		l.overflow[p] = fullOverflow(t)
	}
}

// shadowOf is a shadow run of l with table mt and no state yet.
func (l *Limiter) shadowOf(mt *policyTable) *Limiter {
	return &Limiter{
		table:     mt,
		now:       l.now,
		wallClock: l.wallClock,
		sink:      l.sink,
		silent:    l.silent,
		seed:      l.seed,
		origin:    l.origin,
		local:     l.local,
		shadowRun: true,
	}
}

// withoutClock is c with Now and Local cleared and its own copy of
// Policies.
func (c Config) withoutClock() Config {
	c.Now, c.Local = nil, nil
	c.Policies = append([]Policy(nil), c.Policies...)
	for i, p := range c.Policies {
		if p.Shadow != nil {
			sh := *p.Shadow
			c.Policies[i].Shadow = &sh
		}
	}
	return c
}

// Caller is an identity prepared for charging: its hash and pool, worked
// out once (a connection's identity is fixed for its life, so the server
// prepares it when the connection is accepted) rather than on every
// charge. The zero Caller is the empty identity. A Caller made by another
// limiter is prepared again by the one it is charged on.
type Caller struct {
	identity string
	hash     uint64
	origin   *Limiter
	pool     uint8
}

// Caller prepares identity for ChargeCaller. identity is opaque and used
// verbatim.
func (l *Limiter) Caller(identity string) Caller {
	return Caller{identity: identity, hash: maphash.String(l.seed, identity), origin: l.origin, pool: l.poolOf(identity)}
}

// Identity is the identity c was prepared from.
func (c Caller) Identity() string { return c.identity }

// Charge takes one token from the bucket of (identity, verb, bucket) at the
// limiter's current clock reading, and returns the decision. identity is
// opaque and used verbatim.
//
// A charge on a present key charges that entry. On an absent key: below the
// cap a full entry, sized by the identity's policy, is inserted and charged;
// at the cap every entry refilled to its full burst is reclaimed first
// (never one below full), and if that freed a slot the key is inserted;
// otherwise the charge falls on the overflow bucket of (policy, verb,
// bucket) in the identity's pool. There is always exactly one bucket to
// charge: nothing is admitted unlimited for want of a slot.
//
// A limited charge publishes exactly one Event to the sink, after every lock
// is released, with ctx. An allowed charge publishes nothing. While some
// policy has shadow sizes, the same charge is then made on the shadow run,
// which publishes one Event with Shadow set if it found no token for an
// identity of a shadowed policy; the decision returned is never the shadow
// run's.
//
// A verb or bucket outside the two defined values is denied (fail closed,
// RetryAfterSeconds 1) without an event; it is a programming error.
func (l *Limiter) Charge(ctx context.Context, identity string, verb vocab.Verb, bucket vocab.Bucket) Decision {
	c := l.Caller(identity)
	return l.chargeAt(ctx, &c, verb, bucket, l.now(), time.Time{})
}

// chargeAt takes one token from the bucket of (c, verb, bucket) at instant
// now, and returns the decision; at, if not zero, is the clock reading now
// was taken from, passed on in the event. See Charge.
//
// now may be earlier than the bucket's last accrual (a clock read outside the
// lock under contention): it is then clamped, adding no tokens and never
// moving the bucket's accrual backwards.
func (l *Limiter) chargeAt(ctx context.Context, c *Caller, verb vocab.Verb, bucket vocab.Bucket, now Instant, at time.Time) Decision {
	return l.charge(ctx, c, verb, bucket, now, at, false)
}

// charge is chargeAt, or with read set ChargeCaller: now is then taken
// from the clock (or from at; see ChargeTime) once the arguments are
// checked, so the common charge makes no call of its own for it.
func (l *Limiter) charge(ctx context.Context, c *Caller, verb vocab.Verb, bucket vocab.Bucket, now Instant, at time.Time, read bool) Decision {
	if uint(verb) >= vocab.NumVerbs || uint(bucket) >= vocab.NumBuckets {
		return Decision{RetryAfterSeconds: 1}
	}
	if read {
		if at.IsZero() && l.wallClock {
			now = MonotonicNow()
		} else {
			now, at = l.instantOf(at)
		}
	}
	if c.origin != l.origin {
		prepared := l.Caller(c.identity)
		c = &prepared
	}
	h := keyHash(c.hash, verb, bucket)
	// The present key, the common case, charged inline: one lock, no
	// defer, and nothing more to do for an allowed charge with no shadow
	// run.
	s := l.shardOf(h)
	s.mu.Lock()
	i, found := s.find(c.identity, h, verb, bucket)
	if found {
		e := &s.slots[i]
		row := &s.pt.rows[e.policy]
		p := &row.enforced[bucket]
		if e.tb.takeToken(p, now) {
			d := Decision{Allowed: true, Remaining: e.tb.tokens, Policy: row.name}
			if mirror := l.mirror; mirror != nil {
				shadowed := row.shadowed
				s.mu.Unlock()
				return l.publish(ctx, c, verb, bucket, now, at, &charged{d: d, shadowed: shadowed, mirror: mirror})
			}
			s.mu.Unlock()
			return d
		}
		d := Decision{RetryAfterSeconds: e.tb.retryAfter(p, now), Policy: row.name}
		shadowed, mirror := row.shadowed, l.mirror
		s.mu.Unlock()
		if l.silent && mirror == nil {
			return d // no event to build, no shadow run to charge
		}
		return l.publish(ctx, c, verb, bucket, now, at, &charged{d: d, shadowed: shadowed, mirror: mirror})
	}
	return l.chargeAbsent(ctx, s, i, c, h, verb, bucket, now, at)
}

// chargeAbsent charges a key chargeAt did not find in shard s, whose lock
// it holds, with i the empty slot where the key would go: an insert below
// the cap, else (the lock released) a reclaim and a retry, else the
// overflow bucket. It is apart from chargeAt so the present key's charge
// keeps a small frame.
func (l *Limiter) chargeAbsent(ctx context.Context, s *shard, i int, c *Caller, h uint64, verb vocab.Verb, bucket vocab.Bucket, now Instant, at time.Time) Decision {
	if l.reserve(c.pool) {
		r := l.insertLocked(s, i, c, h, verb, bucket, now)
		s.mu.Unlock()
		return l.publish(ctx, c, verb, bucket, now, at, &r)
	}
	s.mu.Unlock()
	// The pool is at its cap. Retry after a reclaim that freed a slot, or
	// when a concurrent reclaim did; at a drained cap neither holds and the
	// miss goes straight to the overflow bucket.
	var r charged
	ok := false
	if l.reclaim(now) > 0 || l.count[c.pool].Load() < poolCap[c.pool] {
		r, ok = l.chargeEntry(*c, h, verb, bucket, now)
	}
	if !ok {
		r = l.chargeOverflow(*c, verb, bucket, now)
	}
	return l.publish(ctx, c, verb, bucket, now, at, &r)
}

// publish sends a limited charge's event and makes the charge on the
// shadow run, if there is one, and returns the decision.
func (l *Limiter) publish(ctx context.Context, c *Caller, verb vocab.Verb, bucket vocab.Bucket, now Instant, at time.Time, r *charged) Decision {
	if !r.d.Allowed && !l.silent && (!l.shadowRun || r.shadowed) {
		l.sink.Limited(ctx, Event{
			Identity:          c.identity,
			Verb:              verb,
			Bucket:            bucket,
			RetryAfterSeconds: r.d.RetryAfterSeconds,
			Overflow:          r.d.Overflow,
			Policy:            r.d.Policy,
			Shadow:            l.shadowRun,
			At:                at,
		})
	}
	if r.mirror != nil {
		r.mirror.chargeAt(ctx, c, verb, bucket, now, at)
	}
	return r.d
}

// charged is one charge's decision and what the charge read under the
// lock of the bucket it charged.
type charged struct {
	d Decision
	// shadowed: the bucket's policy has shadow sizes.
	shadowed bool
	// mirror is the limiter's mirror as the lock saw it.
	mirror *Limiter
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
