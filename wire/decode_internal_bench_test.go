package wire

import "testing"

// The decoder alone, on bodies already copied to strings: the part of
// BenchmarkDecodeMint and BenchmarkDecodeDeregister that is not the one
// allocation (the body's copy) and the garbage collector's share of it,
// whose cost swings with whatever else the machine is running.

const (
	benchMintBody = `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review",` +
		`"spec":{"component":"review","service_name":"review","reload":"systemctl reload review"},"wrap_ttl":300,"idempotency_key":"k1"}`
	benchDeregisterBody = `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review","idempotency_key":"k1"}`
)

func BenchmarkDecodeMintNoCopy(b *testing.B) {
	b.SetBytes(int64(len(benchMintBody)))
	for b.Loop() {
		if _, err := decodeMint(benchMintBody); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDeregisterNoCopy(b *testing.B) {
	b.SetBytes(int64(len(benchDeregisterBody)))
	for b.Loop() {
		if _, err := decodeDeregister(benchDeregisterBody); err != nil {
			b.Fatal(err)
		}
	}
}
