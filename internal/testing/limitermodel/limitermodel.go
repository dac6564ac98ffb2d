// Package limitermodel is an exact integer model of the limiter with caller
// policies: a plain map of buckets, the two pools' caps, the reclaim rule,
// one overflow bucket per (pool, policy, verb, bucket), and re-expression
// on reconfiguration, written for clarity (big integers, no shards, no
// hashing, no clock of its own: every call names its instant).
//
// It is the reference of the property tests: the limiter's own
// (limiter/policy_model_test.go) drives the limiter and the model with the
// same charges and reconfigurations, and the verbs' (registrar's
// authorization model test) drives the whole invocation, authorization
// included, through it. Both require every decision to agree. It does not
// import the limiter, so the limiter's internal tests can use it.
package limitermodel

import (
	"math"
	"math/big"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Default is the name of the default policy (limiter.DefaultPolicy).
const Default = "default"

// Cap is each pool's entry cap (limiter.MaxEntries and
// limiter.MaxLocalEntries).
const Cap = 256

// Sizes are one policy's bucket sizes, indexed by vocab.Bucket: the burst
// and the refill interval in nanoseconds.
type Sizes [vocab.NumBuckets]struct{ Burst, Interval int64 }

// Decision is one charge's decision, field for field the limiter's.
type Decision struct {
	Allowed           bool
	Remaining         uint32
	RetryAfterSeconds uint64
	Overflow          bool
	Policy            string
}

type key struct {
	id string
	v  vocab.Verb
	b  vocab.Bucket
}

type bucket struct {
	tokens    uint64
	accruedAt int64
	policy    string
}

type overflowKey struct {
	pool   int
	policy string
	v      vocab.Verb
	b      vocab.Bucket
}

// Model is the limiter's state. It is not safe for concurrent use.
type Model struct {
	sizes    map[string]Sizes // by policy name, Default included
	assign   func(id string) string
	local    func(id string) bool
	entries  map[key]*bucket
	count    [2]int
	overflow map[overflowKey]*bucket
}

// New is a model with the policies' sizes (Default's among them), assign
// naming each identity's policy (a name sizes lacks, "" included, means
// Default) and local telling the local pool's identities.
func New(sizes map[string]Sizes, assign func(id string) string, local func(id string) bool) *Model {
	m := &Model{sizes: sizes, assign: assign, local: local, entries: map[key]*bucket{}, overflow: map[overflowKey]*bucket{}}
	m.fillOverflow()
	return m
}

// fillOverflow creates, full, the overflow buckets of every policy that
// has none (all of them at start, the new ones after a reconfiguration).
func (m *Model) fillOverflow() {
	for pol, s := range m.sizes {
		for pool := range 2 {
			for v := range vocab.NumVerbs {
				for b := range vocab.NumBuckets {
					k := overflowKey{pool, pol, vocab.Verb(v), vocab.Bucket(b)}
					if _, ok := m.overflow[k]; !ok {
						m.overflow[k] = &bucket{tokens: uint64(s[b].Burst), accruedAt: math.MinInt64}
					}
				}
			}
		}
	}
}

// Clone is a copy of m that shares no state with it.
func (m *Model) Clone() *Model {
	c := *m
	c.entries = make(map[key]*bucket, len(m.entries))
	for k, b := range m.entries {
		nb := *b
		c.entries[k] = &nb
	}
	c.overflow = make(map[overflowKey]*bucket, len(m.overflow))
	for k, b := range m.overflow {
		nb := *b
		c.overflow[k] = &nb
	}
	return &c
}

// PolicyOf is the policy whose sizes a new entry of id takes.
func (m *Model) PolicyOf(id string) string {
	if p := m.assign(id); p != "" {
		if _, ok := m.sizes[p]; ok {
			return p
		}
	}
	return Default
}

func (m *Model) pool(id string) int {
	if m.local(id) {
		return 1
	}
	return 0
}

// refill accrues whole intervals, banking the partial one; a full bucket
// banks nothing.
func refill(b *bucket, burst, interval, now int64) {
	if now <= b.accruedAt {
		return
	}
	if b.tokens >= uint64(burst) {
		b.accruedAt = now
		return
	}
	gained := (now - b.accruedAt) / interval
	if b.tokens+uint64(gained) >= uint64(burst) {
		b.tokens, b.accruedAt = uint64(burst), now
		return
	}
	b.tokens += uint64(gained)
	b.accruedAt += gained * interval
}

func take(b *bucket, burst, interval, now int64) Decision {
	refill(b, burst, interval, now)
	if b.tokens > 0 {
		b.tokens--
		return Decision{Allowed: true, Remaining: uint32(b.tokens)}
	}
	wait := b.accruedAt + interval - now // accruedAt ≤ now after a refill at now
	return Decision{RetryAfterSeconds: uint64(max(1, (wait+int64(time.Second)-1)/int64(time.Second)))}
}

// Charge is one charge of id's bucket b of verb v at now (nanoseconds of
// the limiter's clock).
func (m *Model) Charge(id string, v vocab.Verb, b vocab.Bucket, now int64) Decision {
	k := key{id, v, b}
	if e, ok := m.entries[k]; ok {
		s := m.sizes[e.policy][b]
		d := take(e, s.Burst, s.Interval, now)
		d.Policy = e.policy
		return d
	}
	pool := m.pool(id)
	if m.count[pool] >= Cap {
		m.Sweep(now)
	}
	pol := m.PolicyOf(id)
	s := m.sizes[pol][b]
	if m.count[pool] < Cap {
		e := &bucket{tokens: uint64(s.Burst), accruedAt: now, policy: pol}
		m.entries[k] = e
		m.count[pool]++
		d := take(e, s.Burst, s.Interval, now)
		d.Policy = pol
		return d
	}
	d := take(m.overflow[overflowKey{pool, pol, v, b}], s.Burst, s.Interval, now)
	d.Overflow, d.Policy = true, pol
	return d
}

// reexpress: the lesser of the holding under the old sizes and the
// holding under the new ones since the last accrual, capped at the new
// burst, each counted as tokens and a fraction of a new interval.
func reexpress(b *bucket, oldBurst, oldInterval, newBurst, newInterval, now int64) {
	t := max(now, b.accruedAt)
	a, c := *b, *b
	refill(&a, oldBurst, oldInterval, t)
	refill(&c, newBurst, newInterval, t)
	ta, fa := min(a.tokens, uint64(newBurst)), big.NewInt(0)
	if a.tokens < uint64(oldBurst) {
		fa.Mul(big.NewInt(t-a.accruedAt), big.NewInt(newInterval))
		fa.Quo(fa, big.NewInt(oldInterval))
	}
	tc, fc := min(c.tokens, uint64(newBurst)), big.NewInt(0)
	if c.tokens < uint64(newBurst) {
		fc.SetInt64(t - c.accruedAt)
	}
	tokens, frac := ta, fa
	if tc < ta || tc == ta && fc.Cmp(fa) < 0 {
		tokens, frac = tc, fc
	}
	if tokens >= uint64(newBurst) {
		b.tokens, b.accruedAt = uint64(newBurst), t
		return
	}
	b.tokens, b.accruedAt = tokens, t-frac.Int64()
}

// Reconfigure puts new sizes and a new assignment in force at now: every
// entry takes its identity's policy again and is re-expressed in its
// sizes, a removed policy's overflow buckets go, a new one's are full.
func (m *Model) Reconfigure(sizes map[string]Sizes, assign func(id string) string, now int64) {
	oldSizes := m.sizes
	m.sizes, m.assign = sizes, assign
	for k, e := range m.entries {
		o := oldSizes[e.policy][k.b]
		e.policy = m.PolicyOf(k.id)
		n := sizes[e.policy][k.b]
		reexpress(e, o.Burst, o.Interval, n.Burst, n.Interval, now)
	}
	for k, e := range m.overflow {
		n, ok := sizes[k.policy]
		if !ok {
			delete(m.overflow, k)
			continue
		}
		o := oldSizes[k.policy][k.b]
		reexpress(e, o.Burst, o.Interval, n[k.b].Burst, n[k.b].Interval, now)
	}
	m.fillOverflow()
}

// Sweep reclaims every entry that would be full at now (a reclaim never
// moves an entry's accrual).
func (m *Model) Sweep(now int64) {
	for k, e := range m.entries {
		s := m.sizes[e.policy][k.b]
		c := *e
		refill(&c, s.Burst, s.Interval, now)
		if c.tokens >= uint64(s.Burst) {
			delete(m.entries, k)
			m.count[m.pool(k.id)]--
		}
	}
}
