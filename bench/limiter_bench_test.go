// Package bench measures registrar-otel's limiter side by side with the two
// usual Go peers, on the same key workloads, in one `go test -bench` run:
//
//   - xrate: golang.org/x/time/rate, one *rate.Limiter per key in a map
//     behind a mutex (the usual per-client use);
//   - memstore: github.com/sethvargo/go-limiter/memorystore.
//
// It is a separate module so the peers never become dependencies of the
// daemon. Every limiter is configured like the shipped admission bucket:
// burst 512, one token per 500 ms, unless a benchmark says otherwise (the
// allow-path variants use a burst no run can drain).
//
// Read the peers as ratios within one pass, passes interleaved: `make
// bench` runs the compiled benchmarks several times in alternation and
// prints a benchstat comparison.
package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"
)

const (
	burst    = 512
	interval = 500 * time.Millisecond
)

// charger is the common shape of the three limiters: charge one key, clock
// read included.
type charger interface {
	charge(k *benchKey) bool
}

// benchKey carries the key in every form a limiter wants it, built before
// the timer starts so no limiter pays for key construction.
type benchKey struct {
	identity string
	joined   string // identity|verb|bucket for the string-keyed peers
	// caller is the identity prepared by ours (limiter.Caller), as the
	// server prepares a connection's identity once when it is accepted;
	// preparedBy is the limiter that prepared it.
	caller     limiter.Caller
	preparedBy *limiter.Limiter
}

func newKey(identity string) *benchKey {
	return &benchKey{identity: identity, joined: identity + "|mint|admission"}
}

type ours struct{ l *limiter.Limiter }

func newOurs(tb testing.TB) *ours { return newOursBurst(tb, burst) }

// benchPolicies is the caller policies ours runs with: 1,024 of them, each
// naming one identity and sizing it like the default, so a charge applies
// its identity's policy (resolved when the entry is made, as in the
// daemon). Every identity the benchmarks charge matches none of them but
// "registrar-client:spiffe://ctl", which matches the first.
const benchPolicies = 1024

func newOursBurst(tb testing.TB, burst uint32) *ours { return newOursSink(tb, burst, limiter.Discard) }

// countEvents is a sink that counts limited charges.
type countEvents struct{ atomic.Int64 }

func (n *countEvents) Limited(context.Context, limiter.Event) { n.Add(1) }

func newOursSink(tb testing.TB, burst uint32, sink limiter.Sink) *ours {
	sizes := limiter.Sizes{
		PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: burst, RefillInterval: interval},
	}
	policies := make([]limiter.Policy, benchPolicies)
	index := make(map[string]int, benchPolicies)
	for i := range policies {
		policies[i] = limiter.Policy{Name: "p" + strconv.Itoa(i), Sizes: sizes}
		index["registrar-client:policy-"+strconv.Itoa(i)] = i
	}
	index["registrar-client:spiffe://ctl"] = 0
	l, err := limiter.New(limiter.Config{
		PredecisionRefusal: sizes.PredecisionRefusal,
		Admission:          sizes.Admission,
		Policies:           policies,
		Match: func(id string) (int, bool) {
			i, ok := index[id]
			return i, ok
		},
	}, sink)
	if err != nil {
		tb.Fatal(err)
	}
	return &ours{l}
}

// charge charges k's prepared Caller at a time.Now reading, as the verbs
// do with the invocation's arrival.
func (o *ours) charge(k *benchKey) bool {
	if k.preparedBy != o.l {
		k.caller, k.preparedBy = o.l.Caller(k.identity), o.l
	}
	return o.l.ChargeCaller(context.Background(), &k.caller, vocab.Mint, vocab.Admission, time.Time{}).Allowed
}

type xrate struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	burst int
}

func newXrate(tb testing.TB) *xrate { return newXrateBurst(tb, burst) }

func newXrateBurst(_ testing.TB, burst int) *xrate {
	return &xrate{m: make(map[string]*rate.Limiter), burst: burst}
}

func (x *xrate) charge(k *benchKey) bool {
	x.mu.Lock()
	l, ok := x.m[k.joined]
	if !ok {
		l = rate.NewLimiter(rate.Every(interval), x.burst)
		x.m[k.joined] = l
	}
	x.mu.Unlock()
	return l.Allow()
}

// memstore is github.com/sethvargo/go-limiter/memorystore. It is not a
// token bucket but a fixed window: Tokens per Interval, and the first take
// in a new interval (a new "tick") refills the bucket to the full Tokens at
// once, however it was spent. Configured as Tokens 512 per 512 × 500 ms it
// allows the same long-run rate as the others, but a caller that drains it
// gets all 512 back at the next tick instead of one every 500 ms: it is
// compared here on cost, not on what it admits.
type memstore struct {
	s interface {
		Take(context.Context, string) (uint64, uint64, uint64, bool, error)
	}
}

func newMemstore(tb testing.TB) *memstore { return newMemstoreBurst(tb, burst) }

func newMemstoreBurst(tb testing.TB, burst uint64) *memstore {
	s, err := memorystore.New(&memorystore.Config{Tokens: burst, Interval: time.Duration(burst) * interval})
	if err != nil {
		tb.Fatal(err)
	}
	return &memstore{s}
}

func (m *memstore) charge(k *benchKey) bool {
	_, _, _, ok, _ := m.s.Take(context.Background(), k.joined)
	return ok
}

var peers = []struct {
	name string
	make func(testing.TB) charger
}{
	{"ours", func(tb testing.TB) charger { return newOurs(tb) }},
	{"xrate", func(tb testing.TB) charger { return newXrate(tb) }},
	{"memstore", func(tb testing.TB) charger { return newMemstore(tb) }},
}

// allowPeers are the peers with a burst no benchmark run can drain, so
// every charge is allowed.
const neverDrains = 1 << 30

var allowPeers = []struct {
	name string
	make func(testing.TB) charger
}{
	{"ours", func(tb testing.TB) charger { return newOursBurst(tb, neverDrains) }},
	{"xrate", func(tb testing.TB) charger { return newXrateBurst(tb, neverDrains) }},
	{"memstore", func(tb testing.TB) charger { return newMemstoreBurst(tb, neverDrains) }},
}

// BenchmarkPresentKey charges one present key, clock read included, on
// the deny path (the key drained before the timer starts: a flood's steady
// state) and on the allow path (a burst no run drains: ordinary traffic).
func BenchmarkPresentKey(b *testing.B) {
	for _, p := range peers {
		b.Run("path=deny/peer="+p.name, func(b *testing.B) {
			c := p.make(b)
			k := newKey("registrar-client:spiffe://ctl")
			for c.charge(k) {
			}
			b.ReportAllocs()
			allowed := 0
			for b.Loop() {
				if c.charge(k) {
					allowed++
				}
			}
			// Refills during a long run are a few in a million charges.
			b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
		})
	}
	// Ours again with a sink that takes every limited charge's event (a
	// counter, as a metric would), where the runs above give it Discard,
	// which the limiter skips: what the flood's event adds to a denial.
	b.Run("path=deny/peer=ours-events", func(b *testing.B) {
		var n countEvents
		c := newOursSink(b, burst, &n)
		k := newKey("registrar-client:spiffe://ctl")
		for c.charge(k) {
		}
		b.ReportAllocs()
		before := n.Load()
		for b.Loop() {
			c.charge(k)
		}
		if n.Load()-before < int64(b.N)/2 {
			b.Fatalf("%d events for %d denials", n.Load()-before, b.N)
		}
	})
	for _, p := range allowPeers {
		b.Run("path=allow/peer="+p.name, func(b *testing.B) {
			c := p.make(b)
			k := newKey("registrar-client:spiffe://ctl")
			c.charge(k)
			b.ReportAllocs()
			for b.Loop() {
				if !c.charge(k) {
					b.Fatal("denied on the allow path")
				}
			}
		})
	}
}

// BenchmarkPresentKeyParallel charges present keys from every core:
//   - keys=same: every goroutine on one key, the realistic flood from one
//     uid (all contention on one entry);
//   - keys=distinct: each goroutine cycles over its own 32 keys of a
//     256-key working set, so the result does not hang on whether two
//     goroutines' keys happen to share a shard (with one key each, one run
//     in eight put both on one shard of ours).
//
// Both on the deny path (keys drained first) and the allow path.
func BenchmarkPresentKeyParallel(b *testing.B) {
	keys := make([]*benchKey, 256)
	for i := range keys {
		keys[i] = newKey("unix-peer:uid=" + strconv.Itoa(1000+i))
	}
	run := func(b *testing.B, c charger, drain bool) {
		for _, k := range keys {
			for c.charge(k) && drain {
			}
		}
		b.Run("keys=same", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.charge(keys[0])
				}
			})
		})
		b.Run("keys=distinct", func(b *testing.B) {
			var next atomic.Uint32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				g := int(next.Add(1)-1) % (len(keys) / 32)
				mine := keys[g*32 : (g+1)*32]
				i := 0
				for pb.Next() {
					c.charge(mine[i&31])
					i++
				}
			})
		})
	}
	for _, p := range peers {
		b.Run("path=deny/peer="+p.name, func(b *testing.B) { run(b, p.make(b), true) })
	}
	for _, p := range allowPeers {
		b.Run("path=allow/peer="+p.name, func(b *testing.B) { run(b, p.make(b), false) })
	}
}

// identities is a pool of distinct identities, built once, outside every
// timer, so the churn benchmarks measure the limiters and not strconv.
var identities = sync.OnceValue(func() []*benchKey {
	ks := make([]*benchKey, 1_000_000)
	for i := range ks {
		ks[i] = newKey("unix-peer:pid=" + strconv.Itoa(i))
	}
	return ks
})

// BenchmarkChurnDrainedMap is the attack path: a flood of new identities
// (an identity unstable across connections) against a map already
// saturated with drained entries. Ours answers from the overflow bucket of
// the (verb, bucket) pair without growing; the peers grow a new entry per
// identity.
//
// No entry refills to full during a run (one token per 500 ms against a
// burst of 512), so ours never reclaims here: this is the path where the
// reclaim is skipped (the "reclaims" metric says so). The reclaim's own
// worst case, entries refilling one at a time so every miss reclaims, is
// limiter.BenchmarkReclaimWorstCase in the main module, measured on an
// injected clock the peers do not have.
func BenchmarkChurnDrainedMap(b *testing.B) {
	pool := identities()
	for _, p := range peers {
		b.Run("peer="+p.name, func(b *testing.B) {
			c := p.make(b)
			for i := range limiter.MaxEntries {
				k := newKey("drained" + strconv.Itoa(i))
				for c.charge(k) {
				}
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				c.charge(pool[i])
				if i++; i == len(pool) {
					i = 0
				}
			}
			if o, ok := c.(*ours); ok {
				st := o.l.Stats()
				b.ReportMetric(float64(st.Entries), "entries")
				b.ReportMetric(float64(st.Reclaimed), "reclaims")
			}
		})
	}
}

// BenchmarkMillionIdentities charges 1,000,000 distinct identities once
// each and reports the entries held and the heap retained afterwards.
func BenchmarkMillionIdentities(b *testing.B) {
	pool := identities()
	for _, p := range peers {
		b.Run("peer="+p.name, func(b *testing.B) {
			var growth uint64
			var c charger
			for b.Loop() {
				c = p.make(b)
				before := heapInUse()
				for _, k := range pool {
					c.charge(k)
				}
				if after := heapInUse(); after > before {
					growth = after - before
				}
			}
			b.ReportMetric(float64(growth), "heap-retained-B")
			if o, ok := c.(*ours); ok {
				entries := o.l.Stats().Entries
				b.ReportMetric(float64(entries), "entries")
				if entries > limiter.MaxEntries {
					b.Fatalf("%d entries after 1,000,000 identities, cap %d", entries, limiter.MaxEntries)
				}
			}
			runtime.KeepAlive(c)
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
