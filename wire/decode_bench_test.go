package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

// BenchmarkDecodeDeregister is BenchmarkDecodeMint's sibling: the
// deregister body every throttled deregister is decoded from.
func BenchmarkDecodeDeregister(b *testing.B) {
	benchDecode(b, deregisterBody, wire.DecodeDeregister)
}

// BenchmarkDecodeMintEncodingJSON is the standard library's peer of
// BenchmarkDecodeMint: the same body into the same type by json.Unmarshal,
// which checks less (no duplicate members, no required ones, no bounds).
func BenchmarkDecodeMintEncodingJSON(b *testing.B) {
	benchDecode(b, mintBody, func(body []byte) (req wire.MintRequest, err error) {
		return req, json.Unmarshal(body, &req)
	})
}

func BenchmarkDecodeMint(b *testing.B) {
	benchDecode(b, mintBody, wire.DecodeMint)
}

// benchDecode measures decode on body, allocations and throughput.
func benchDecode[R any](b *testing.B, body string, decode func([]byte) (R, error)) {
	in := []byte(body)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := decode(in); err != nil {
			b.Fatal(err)
		}
	}
}
