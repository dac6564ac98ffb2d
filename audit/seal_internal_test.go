package audit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"
)

// TestMACIsHMACSHA256: the store's HMAC, written out so that its pads can
// be overwritten, is crypto/hmac's, for the chain values and the next key
// alike.
func TestMACIsHMACSHA256(t *testing.T) {
	var key [SealKeyBytes]byte
	rand.Read(key[:])
	var m macKey
	m.set(&key)
	x := newMacer()
	var prev chainValue
	rand.Read(prev[:])
	for _, msg := range [][]byte{nil, []byte("{}\n"), make([]byte, 200), make([]byte, 16683)} {
		want := hmac.New(sha256.New, key[:])
		want.Write(prev[:])
		want.Write(msg)
		got := x.chain(&m, &prev, msg, nil)
		if w := want.Sum(nil); string(got[:]) != string(w[:chainBytes]) {
			t.Fatalf("chain of %d bytes: got %x, want %x", len(msg), got, w[:chainBytes])
		}
	}
	want := hmac.New(sha256.New, key[:])
	want.Write([]byte(labelNext))
	var next [SealKeyBytes]byte
	x.nextKey(&m, &next)
	if string(next[:]) != string(want.Sum(nil)) {
		t.Fatalf("next key: got %x", next)
	}
	m.clear()
	if m.inner != [sha256StateBytes]byte{} || m.outer != [sha256StateBytes]byte{} {
		t.Fatal("clear left the key's states")
	}
}

// TestMaxSealLineBytesBoundsEverySealLine: the bound counted before a
// seal's write is at least any seal line.
func TestMaxSealLineBytesBoundsEverySealLine(t *testing.T) {
	for r := SealReasonStart; r.Valid(); r++ {
		line, err := Marshal(sealRecord(time.Date(2026, 8, 23, 12, 0, 0, 0, time.UTC), 1<<63, r, "0123456789abcdef"))
		if err != nil {
			t.Fatal(err)
		}
		if n := uint64(len(line) + ChainSuffixBytes); n > maxSealLineBytes {
			t.Errorf("a %s seal line is %d bytes, above maxSealLineBytes %d", r, n, maxSealLineBytes)
		}
	}
}

// BenchmarkChainLine is the chain's own cost per line, what writeSync adds
// to every line of a sealed store: an HMAC-SHA256 of the previous value
// and the line (a mint outcome's, 333 bytes) and the copy with the value
// appended; "copy" is the copy alone, the floor.
func BenchmarkChainLine(b *testing.B) {
	line, err := Marshal(&Record{Phase: PhaseOutcome, TS: time.Date(2026, 8, 23, 12, 0, 0, 0, time.UTC), RequestID: "Zm9vYmFyYmF6.12345",
		Verb: 1, CallerIdentity: "unix-peer:uid=1000", Requested: &Requested{ServiceName: "review", Host: "host-42", Instance: 7},
		RegistrationID: "host-42-review-007", Outcome: &Outcome{Class: 1}})
	if err != nil {
		b.Fatal(err)
	}
	var key [SealKeyBytes]byte
	var m macKey
	m.set(&key)
	x := newMacer()
	var prev chainValue
	out := make([]byte, 0, 1024)
	b.Run("chain", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			prev = x.chain(&m, &prev, line, nil)
			out = appendChained(out[:0], line, &prev)
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			out = append(out[:0], line...)
		}
	})
}
