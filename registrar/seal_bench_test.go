package registrar_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/cputime"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
)

// BenchmarkAdmittedMintsC64 is issue 40's "admitted mints at c=64": 64
// callers mint distinct registrations through the verbs into a real audit
// store on the benchmark's disk (each mint an intent and an outcome, group
// committed) over the in-memory backend, the store unsealed and sealed.
// Run it in alternating processes and compare mints/s and, on a shared
// machine, cpu-ns/mint (the process's CPU time, which time spent
// descheduled behind other work does not inflate).
func BenchmarkAdmittedMintsC64(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		b.Run(fmt.Sprintf("sealed=%v", sealed), func(b *testing.B) {
			root := b.TempDir()
			opts := audit.Options{Dir: filepath.Join(root, "audit"), MaxFileBytes: 64 << 20}
			if sealed {
				state := filepath.Join(root, "state")
				if err := os.Mkdir(state, 0o700); err != nil {
					b.Fatal(err)
				}
				d, err := os.Open(state)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				if _, _, err := audit.CreateSealKey(d, rand.Reader); err != nil {
					b.Fatal(err)
				}
				if opts.Seal, err = audit.OpenSealKey(d); err != nil {
					b.Fatal(err)
				}
			}
			store, err := audit.Open(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			lim, err := limiter.New(limiter.Config{
				PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
				Admission:          limiter.BucketConfig{Burst: 1 << 31, RefillInterval: time.Second},
				Now:                func() limiter.Instant { return 0 },
			}, counting.New())
			if err != nil {
				b.Fatal(err)
			}
			v, err := registrar.New(registrar.Config{Components: testComponents, MaxWrapTTLSeconds: 1800}, registrar.Deps{
				Limiter: lim, Audit: store, Backend: registrartest.NewBackend(b),
			})
			if err != nil {
				b.Fatal(err)
			}
			var host atomic.Int64
			b.SetParallelism(32) // 64 callers on the 2 cores the figures were taken on
			b.ReportAllocs()
			cpu := cputime.Now()
			b.RunParallel(func(pb *testing.PB) {
				req := goodMint()
				for pb.Next() {
					req.Host = fmt.Sprintf("h%d", host.Add(1))
					if _, err := v.Mint(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "mints/s")
			if cputime.Available() {
				// The figure a shared machine does not blur: CPU per mint.
				b.ReportMetric(float64(cputime.Now()-cpu)/float64(b.N), "cpu-ns/mint")
			}
		})
	}
}
