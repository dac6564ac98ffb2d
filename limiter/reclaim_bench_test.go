package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/cputime"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// BenchmarkReclaimWorstCase is a reclaim's worst case: the map at the cap
// with its entries refilling one at a time, so that every miss at the cap
// finds exactly one full entry, reclaims it and inserts the new key in its
// place (before issue 13 each such miss scanned all 8 × 512 slots holding
// every shard lock). Each op is one such miss. PresentKey is the peer
// measured in the same run: a charge of a present key.
func BenchmarkReclaimWorstCase(b *testing.B) {
	const dt = Instant(time.Millisecond)
	pool := make([]string, 1<<16)
	for i := range pool {
		pool[i] = "unix-peer:pid=" + strconv.Itoa(i)
	}
	ctx := context.Background()
	newFull := func(b *testing.B) (*Limiter, Instant) {
		l, err := New(Config{
			PredecisionRefusal: BucketConfig{Burst: 1, RefillInterval: time.Second},
			// One token, refilled in MaxEntries steps: the entry charged at
			// step i is full again at step i+MaxEntries.
			Admission: BucketConfig{Burst: 1, RefillInterval: time.Duration(MaxEntries * dt)},
			Now:       func() Instant { return 0 },
		}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var now Instant
		for i := range MaxEntries {
			now = Instant(i) * dt
			if d := l.ChargeAt(ctx, "seed"+strconv.Itoa(i), vocab.Mint, vocab.Admission, now); !d.Allowed {
				b.Fatal("seeding charge denied")
			}
		}
		return l, now
	}
	b.Run("op=miss-at-cap", func(b *testing.B) {
		l, now := newFull(b)
		before := l.Stats().Reclaimed
		b.ReportAllocs()
		i := 0
		cpu := cputime.Now()
		for b.Loop() {
			now += dt
			if d := l.ChargeAt(ctx, pool[i&(len(pool)-1)], vocab.Mint, vocab.Admission, now); !d.Allowed || d.Overflow {
				b.Fatalf("miss %d: %+v, want a reclaimed slot", i, d)
			}
			i++
		}
		b.ReportMetric(float64(cputime.Now()-cpu)/float64(i), "cpu-ns/op")
		if got := l.Stats().Reclaimed - before; got != uint64(i) {
			b.Fatalf("%d reclaims for %d misses, want one each", got, i)
		}
	})
	b.Run("op=present-key", func(b *testing.B) {
		l, now := newFull(b)
		b.ReportAllocs()
		cpu := cputime.Now()
		for b.Loop() {
			l.ChargeAt(ctx, "seed0", vocab.Mint, vocab.Admission, now)
		}
		b.ReportMetric(float64(cputime.Now()-cpu)/float64(b.N), "cpu-ns/op")
	})
}
