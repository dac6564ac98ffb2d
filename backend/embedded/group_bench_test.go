package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// BenchmarkMintConcurrency measures first mints of distinct ids committed
// (fsynced) by 1 and by 64 concurrent callers on the test's disk: with
// group commit the 64 share write transactions.
func BenchmarkMintConcurrency(b *testing.B) {
	for _, c := range []int{1, 64} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			be := openBackend(b, "", embedded.Options{})
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range c {
				wg.Go(func() {
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						op := baseOp()
						op.RegistrationID = fmt.Sprintf("web-collector-%d", n)
						if st, _, err := be.Mint(context.Background(), op); err != nil || st != registrar.MintCreated {
							b.Errorf("Mint: got %d, %v", st, err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "mints/s")
		})
	}
}
