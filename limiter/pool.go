package limiter

import (
	"math"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The map's two pools, remote and local, each with its cap and its own
// overflow buckets.

// MaxEntries caps the remote pool of the entry map (the identities
// Config.Local does not report: the certificate identities), counted in
// entries (one per (identity, verb, bucket) key), not in identities: the reference deployment
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

// poolOf is the pool of identity's entries: 1 (local) when Config.Local
// says so, else 0 (remote).
func (l *Limiter) poolOf(identity string) uint8 {
	if l.local != nil && l.local(identity) {
		return 1
	}
	return 0
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

// chargeOverflow charges the overflow bucket of (c's policy, verb, bucket)
// in c's pool.
func (l *Limiter) chargeOverflow(c Caller, verb vocab.Verb, bucket vocab.Bucket, now Instant) charged {
	l.overflowed[c.pool][verb][bucket].Add(1)
	l.overflowMu.Lock()
	pt := l.overflowTable
	pol := pt.resolve(c.identity)
	d := l.overflow[c.pool][pol][verb][bucket].take(&pt.rows[pol].enforced[bucket], now)
	r := charged{shadowed: pt.rows[pol].shadowed, mirror: l.mirror}
	l.overflowMu.Unlock()
	d.Overflow = true
	d.Policy = pt.rows[pol].name
	r.d = d
	return r
}

// fullOverflow is one pool's overflow buckets for t's policies, each full.
func fullOverflow(t *policyTable) [][vocab.NumVerbs][vocab.NumBuckets]tokenBucket {
	o := make([][vocab.NumVerbs][vocab.NumBuckets]tokenBucket, len(t.rows))
	for pol := range o {
		for v := range o[pol] {
			for b := range o[pol][v] {
				// Full; a full bucket's accrual instant is set by its first
				// charge, whatever clock origin the caller's instants use.
				o[pol][v][b] = tokenBucket{tokens: t.rows[pol].enforced[b].burst, accruedAt: math.MinInt64}
			}
		}
	}
	return o
}
