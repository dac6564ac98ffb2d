//go:build unix

package audit_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// openSealBenchStore opens a store on the benchmark's disk, sealed (a key
// made in a state directory beside it) or not, with the real clock.
func openSealBenchStore(b *testing.B, sealed bool) *audit.Store {
	b.Helper()
	root := b.TempDir()
	opts := audit.Options{Dir: filepath.Join(root, "audit")}
	if sealed {
		state := filepath.Join(root, "state")
		if err := os.Mkdir(state, 0o700); err != nil {
			b.Fatal(err)
		}
		d, err := os.Open(state)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		if _, _, err := audit.CreateSealKey(d, rand.Reader); err != nil {
			b.Fatal(err)
		}
		if opts.Seal, err = audit.OpenSealKey(d); err != nil {
			b.Fatal(err)
		}
	}
	s, err := audit.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSealedAppend is what sealing adds to a record: batches of 256
// mint records (intent and outcome pairs, as the verbs write them) committed
// with one write and one fsync, into an unsealed and a sealed store on
// the same disk. Run it with -count so the two interleave and compare
// ns/record: the difference is the chain (an HMAC-SHA256 and 43 bytes
// per line, both in the commit), the fsync amortised over the batch.
func BenchmarkSealedAppend(b *testing.B) {
	const batch = 256
	recs := make([]*audit.Record, batch)
	for i := range recs {
		if i%2 == 0 {
			recs[i] = intent(fmt.Sprintf("Zm9vYmFyYmF6.%d", i))
		} else {
			recs[i] = mintOutcome(fmt.Sprintf("Zm9vYmFyYmF6.%d", i-1), "unix-peer:uid=1000")
		}
	}
	for _, sealed := range []bool{false, true} {
		b.Run(fmt.Sprintf("sealed=%v", sealed), func(b *testing.B) {
			s := openSealBenchStore(b, sealed)
			defer s.Close()
			b.ReportAllocs()
			for b.Loop() {
				for _, err := range s.AppendBatch(context.Background(), recs) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
		})
	}
}
