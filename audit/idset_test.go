package audit

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestIDSetMatchesAMap: random adds and lookups of registrar-shaped ids
// (several prefixes, dense and sparse chunks, out of order, past the sorted
// array's size into bitmaps) and of other ids agree with a plain map.
func TestIDSetMatchesAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var s idSet
	m := map[string]bool{}
	prefixes := []string{"AAAAAAAAAAAA.", "BBBBBBBBBBBB.", "a.b."}
	id := func() string {
		switch r.IntN(10) {
		case 0:
			return "other-" + strconv.Itoa(r.IntN(500)) // no sequence
		case 1:
			return prefixes[r.IntN(3)] + "0" + strconv.Itoa(r.IntN(50)) // leading zero: not canonical
		case 2:
			return prefixes[r.IntN(3)] + strconv.FormatUint(r.Uint64(), 10) // sparse, any chunk
		}
		return prefixes[r.IntN(2)] + strconv.Itoa(r.IntN(20000)) // dense: bitmaps
	}
	for i := range 200_000 {
		k := id()
		if got := s.has(k); got != m[k] {
			t.Fatalf("op %d: has(%q) = %v, want %v", i, k, got, m[k])
		}
		if r.IntN(2) == 0 {
			s.add(k)
			m[k] = true
		}
	}
	bitmaps := 0
	for _, ss := range s.seqs {
		for _, c := range ss.chunks {
			if c.bitmap != nil {
				bitmaps++
			}
		}
	}
	if bitmaps == 0 {
		t.Fatal("no chunk became a bitmap: the test does not cover them")
	}
}
