package limiter

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// BenchmarkChargeDuringReconfigure is a charge of a present key with the
// map at the cap (so every re-expression pass has MaxEntries entries to
// rewrite), measured with no reload (quiet) and with a goroutine reloading
// back to back on the other core (reloading): the pair bounds what a reload
// costs a charge on the request path. ReconfigurePass is the cost of one
// whole pass; a charge waits for at most one shard's part of it (the
// shards are locked one at a time), and the documented bound (the daemon
// page, docs/en/operations.md#changing-limits) is that pass.
func BenchmarkChargeDuringReconfigure(b *testing.B) {
	ctx := context.Background()
	c1 := cfg(32, time.Second, 512, 500*time.Millisecond)
	c2 := cfg(64, 250*time.Millisecond, 1024, 100*time.Millisecond)
	full := func(b *testing.B) *Limiter {
		l := mustNew(b, c1, nil)
		for i := range MaxEntries {
			l.Charge(ctx, "seed"+strconv.Itoa(i), vocab.Mint, vocab.Admission)
		}
		return l
	}
	for _, mode := range []string{"quiet", "reloading"} {
		b.Run("mode="+mode, func(b *testing.B) {
			l := full(b)
			var stop atomic.Bool
			var wg sync.WaitGroup
			var passes atomic.Int64
			if mode == "reloading" {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						c := c1
						if i&1 == 1 {
							c = c2
						}
						if err := l.Reconfigure(c); err != nil {
							b.Error(err)
							return
						}
						passes.Add(1)
					}
				})
			}
			b.ReportAllocs()
			for b.Loop() {
				l.Charge(ctx, "seed7", vocab.Mint, vocab.Admission)
			}
			stop.Store(true)
			wg.Wait()
			if mode == "reloading" {
				b.ReportMetric(float64(passes.Load()), "reloads")
			}
		})
	}
	b.Run("op=ReconfigurePass", func(b *testing.B) {
		l := full(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c := c1
			if i&1 == 1 {
				c = c2
			}
			if err := l.Reconfigure(c); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
