package wire_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

// BenchmarkDecodeDeregister is BenchmarkDecodeMint's sibling: the
// deregister body every throttled deregister is decoded from.
func BenchmarkDecodeDeregister(b *testing.B) {
	body := []byte(deregisterBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := wire.DecodeDeregister(body); err != nil {
			b.Fatal(err)
		}
	}
}
