package embedded_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// BenchmarkMint measures one committed (fsynced) mint transaction.
func BenchmarkMint(b *testing.B) {
	b.Run("first mint of distinct ids", func(b *testing.B) {
		be := openBackend(b, "", embedded.Options{})
		op := baseOp()
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			op.RegistrationID = "web-collector-" + strconv.Itoa(i)
			i++
			if st, _, err := be.Mint(context.Background(), op); err != nil || st != registrar.MintCreated {
				b.Fatalf("Mint: got %d, %v, want MintCreated", st, err)
			}
		}
	})
	b.Run("remint", func(b *testing.B) {
		be := openBackend(b, "", embedded.Options{})
		mint(b, be, baseOp())
		b.ReportAllocs()
		for b.Loop() {
			if st, _, err := be.Mint(context.Background(), baseOp()); err != nil || st != registrar.MintReissued {
				b.Fatalf("Mint: got %d, %v, want MintReissued", st, err)
			}
		}
	})
}

// BenchmarkMintConcurrency measures first mints of distinct ids committed
// (fsynced) by 1 and by 64 concurrent callers on the test's disk: with
// group commit the 64 share write transactions.
func BenchmarkMintConcurrency(b *testing.B) {
	for _, c := range []int{1, 64} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			be := openBackend(b, "", embedded.Options{})
			embedded.ConcurrentFirstMints(b, c, baseOp(), func(op registrar.MintOp) (registrar.MintStatus, error) {
				st, _, err := be.Mint(context.Background(), op)
				return st, err
			})
		})
	}
}
