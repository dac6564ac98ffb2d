package wire_test

import (
	"encoding/json"
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

// BenchmarkDecodeMintEncodingJSON is the standard library's peer of
// BenchmarkDecodeMint: the same body into the same type by json.Unmarshal,
// which checks less (no duplicate members, no required ones, no bounds).
func BenchmarkDecodeMintEncodingJSON(b *testing.B) {
	body := []byte(mintBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var req wire.MintRequest
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMint(b *testing.B) {
	body := []byte(mintBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := wire.DecodeMint(body); err != nil {
			b.Fatal(err)
		}
	}
}
