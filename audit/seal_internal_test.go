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
	if m.ipad != [sha256.BlockSize]byte{} || m.opad != [sha256.BlockSize]byte{} {
		t.Fatal("clear left the pads")
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
