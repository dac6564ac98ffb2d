// Package bench measures registrar-otel's limiter side by side with the two
// usual Go peers, on the same key workloads, in one `go test -bench` run:
//
//   - xrate: golang.org/x/time/rate, one *rate.Limiter per key in a map
//     behind a mutex (the usual per-client use);
//   - memstore: github.com/sethvargo/go-limiter/memorystore.
//
// It is a separate module so the peers never become dependencies of the
// daemon. Every limiter is configured like the shipped admission bucket:
// burst 512, one token per 500 ms.
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
}

func newKey(identity string) *benchKey {
	return &benchKey{identity: identity, joined: identity + "|mint|admission"}
}

type ours struct{ l *limiter.Limiter }

func newOurs(tb testing.TB) *ours {
	l, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: burst, RefillInterval: interval},
	}, limiter.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	return &ours{l}
}

func (o *ours) charge(k *benchKey) bool {
	return o.l.Charge(context.Background(), k.identity, limiter.Mint, limiter.Admission).Allowed
}

type xrate struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newXrate(testing.TB) *xrate { return &xrate{m: make(map[string]*rate.Limiter)} }

func (x *xrate) charge(k *benchKey) bool {
	x.mu.Lock()
	l, ok := x.m[k.joined]
	if !ok {
		l = rate.NewLimiter(rate.Every(interval), burst)
		x.m[k.joined] = l
	}
	x.mu.Unlock()
	return l.Allow()
}

type memstore struct {
	s interface {
		Take(context.Context, string) (uint64, uint64, uint64, bool, error)
	}
}

func newMemstore(tb testing.TB) *memstore {
	s, err := memorystore.New(&memorystore.Config{Tokens: burst, Interval: burst * interval})
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

// BenchmarkPresentKey charges one present key, clock read included.
func BenchmarkPresentKey(b *testing.B) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			c := p.make(b)
			k := newKey("registrar-client:spiffe://ctl")
			c.charge(k)
			b.ReportAllocs()
			for b.Loop() {
				c.charge(k)
			}
		})
	}
}

// BenchmarkPresentKeyParallel charges present keys from every core, each
// goroutine on its own key of a 64-key working set.
func BenchmarkPresentKeyParallel(b *testing.B) {
	keys := make([]*benchKey, 64)
	for i := range keys {
		keys[i] = newKey("unix-peer:uid=" + strconv.Itoa(1000+i))
	}
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			c := p.make(b)
			for _, k := range keys {
				c.charge(k)
			}
			var next atomic.Uint32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				k := keys[next.Add(1)%uint32(len(keys))]
				for pb.Next() {
					c.charge(k)
				}
			})
		})
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
func BenchmarkChurnDrainedMap(b *testing.B) {
	pool := identities()
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
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
				b.ReportMetric(float64(o.l.Stats().Entries), "entries")
			}
		})
	}
}

// BenchmarkMillionIdentities charges 1,000,000 distinct identities once
// each and reports the entries held and the heap retained afterwards.
func BenchmarkMillionIdentities(b *testing.B) {
	pool := identities()
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
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
