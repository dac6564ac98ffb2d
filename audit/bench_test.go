//go:build unix

package audit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// BenchmarkAppend measures durable appends (write + fsync each) on the
// test's temporary directory, with one writer and with 16 concurrent
// writers (whose lines the store commits in shared fsyncs).
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, err := audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit")})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			var appends atomic.Int64
			if writers == 1 {
				r := intent("bench.1")
				for b.Loop() {
					if err := s.Append(ctx, r); err != nil {
						b.Fatal(err)
					}
					appends.Add(1)
				}
			} else {
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range writers {
					r := intent(fmt.Sprintf("bench.%d", w))
					wg.Go(func() {
						for appends.Add(1) <= int64(b.N) {
							if err := s.Append(ctx, r); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				appends.Store(int64(b.N))
			}
			b.ReportMetric(float64(appends.Load())/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
