package audit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"testing"
	"time"
)

// TestMACIsHMACSHA256: the store's HMAC, written out so that its pads can
// be overwritten, is crypto/hmac's, for the chain values (over the
// previous chain value and the line's SHA-256) and the next key alike.
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
		d := sha256.Sum256(msg)
		want.Write(d[:])
		got := x.chain(&m, &prev, msg, nil)
		if h := len(msg) / 2; x.chain(&m, &prev, msg[:h], msg[h:]) != got {
			t.Fatalf("chain of %d bytes given as a head and a tail differs", len(msg))
		}
		if x.chainDigest(&m, &prev, &d) != got {
			t.Fatalf("chain of %d bytes from its digest differs", len(msg))
		}
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

// BenchmarkChainLine is the chain's own cost per line of a sealed store
// (a mint outcome's, 333 bytes): "chain" is all of it, the line's SHA-256
// and the HMAC-SHA256 of the previous value and that digest, with the
// copy with the value appended; "commit" is the part writeSync does in
// the commit leader, serially, once the appender has computed the digest
// (the HMAC and the copy); "copy" is the copy alone, the floor.
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
	d := x.digest(line, nil)
	b.Run("commit", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			prev = x.chainDigest(&m, &prev, &d)
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

// splitChained at its length bound: the shortest chained line ("{", the
// suffix, "}\n") splits; every shorter line ending as a chained one does
// is refused without reading before its start.
func TestSplitChainedAtItsLengthBound(t *testing.T) {
	hex32 := "0123456789abcdef0123456789abcdef"
	shortest := []byte(`{,"chain":"` + hex32 + "\"}\n")
	if len(shortest) != ChainSuffixBytes+len("{}\n") {
		t.Fatalf("the shortest chained line is %d bytes, want %d", len(shortest), ChainSuffixBytes+len("{}\n"))
	}
	head, c, ok := splitChained(shortest)
	if !ok || string(head) != "{" || c.hexString() != hex32 {
		t.Errorf("splitChained(%q) = %q, %s, %v; want \"{\", %s, true", shortest, head, c.hexString(), ok, hex32)
	}
	for n := len(`"}`) + 1; n < len(shortest); n++ {
		line := []byte(strings.Repeat("a", n-3) + "\"}\n")
		if _, _, ok := splitChained(line); ok {
			t.Errorf("splitChained of %d bytes = ok, want refused: shorter than any chained line", n)
		}
	}
}
