package limiter

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The keyed entry map: sharded open-addressing tables, one entry per
// (identity, verb, bucket).

// tableSlots is the open-addressing table size: a power of two, twice
// the two pools' caps together, so the load factor never exceeds one half
// and probes stay short.
const tableSlots = 2 * (MaxEntries + MaxLocalEntries)

// numShards spreads keys over independently locked tables. Each shard's
// table can hold the whole cap (an unlucky hash spread must never refuse an
// insert below the cap), so memory is numShards × tableSlots entries.
const numShards = 8

type shard struct {
	mu sync.Mutex
	// pt sizes the shard's entries (by each entry's policy); written by
	// Reconfigure under mu, after it re-expressed every entry, so an entry
	// is always charged in the parameters its state is expressed in.
	pt *policyTable
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

type entry struct {
	identity string
	hash     uint64
	tb       tokenBucket
	// policy is the index, in the shard's table, of the policy that
	// sizes the entry: resolved when the entry is created and again when
	// the limiter is reconfigured.
	policy uint16
	verb   vocab.Verb
	bucket vocab.Bucket
	pool   uint8
	used   bool
}

// keyHash is the hash of (identity, verb, bucket) from the identity's own
// hash (Caller.hash).
func keyHash(identity uint64, verb vocab.Verb, bucket vocab.Bucket) uint64 {
	h := identity ^ (uint64(verb)<<1|uint64(bucket)+1)*0x9e3779b97f4a7c15
	h ^= h >> 29
	return h
}

// hash is the hash of (identity, verb, bucket) under the limiter's seed.
func (l *Limiter) hash(identity string, verb vocab.Verb, bucket vocab.Bucket) uint64 {
	return keyHash(maphash.String(l.seed, identity), verb, bucket)
}

// shardOf picks the shard from the hash's top bits; slot probing uses the
// low bits, so the two are independent.
func (l *Limiter) shardOf(h uint64) *shard { return &l.shards[h>>(64-3)] }

// chargeEntry charges the key's own entry, inserting it if a slot can be
// reserved below the cap. It reports false when the key is absent and the
// map is at the cap.
func (l *Limiter) chargeEntry(c Caller, h uint64, verb vocab.Verb, bucket vocab.Bucket, now Instant) (charged, bool) {
	s := l.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := s.find(c.identity, h, verb, bucket)
	if found {
		pt := s.pt
		e := &s.slots[i]
		d := e.tb.take(&pt.rows[e.policy].enforced[bucket], now)
		d.Policy = pt.rows[e.policy].name
		return charged{d: d, shadowed: pt.rows[e.policy].shadowed, mirror: l.mirror}, true
	}
	if !l.reserve(c.pool) {
		return charged{}, false
	}
	return l.insertLocked(s, i, &c, h, verb, bucket, now), true
}

// insertLocked makes the key's entry, full, in the empty slot i of s and
// charges it; s.mu is held and a slot of the pool is reserved.
func (l *Limiter) insertLocked(s *shard, i int, c *Caller, h uint64, verb vocab.Verb, bucket vocab.Bucket, now Instant) charged {
	pt := s.pt
	pol := pt.resolve(c.identity)
	p := &pt.rows[pol].enforced[bucket]
	e := &s.slots[i]
	*e = entry{
		identity: c.identity,
		hash:     h,
		tb:       tokenBucket{tokens: p.burst, accruedAt: now},
		policy:   pol,
		verb:     verb,
		bucket:   bucket,
		pool:     c.pool,
		used:     true,
	}
	s.inUse[i/64] |= 1 << (i % 64)
	d := e.tb.take(p, now)
	d.Policy = pt.rows[pol].name
	if at := int64(e.tb.fullAt(p)); at < s.reclaimAt.Load() {
		s.reclaimAt.Store(at) // under s.mu, like every write of it
	}
	return charged{d: d, shadowed: pt.rows[pol].shadowed, mirror: l.mirror}
}

// find returns the slot holding the key, or the empty slot where it would be
// inserted. A shard never holds more than MaxEntries + MaxLocalEntries
// entries in its tableSlots slots (load ≤ 1/2), so the probe terminates.
func (s *shard) find(identity string, h uint64, verb vocab.Verb, bucket vocab.Bucket) (int, bool) {
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
