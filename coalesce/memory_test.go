package coalesce

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/registrar-otel/registrar-otel/limiter"
)

// TestMemoryIsBoundedAsDocumented fills the ring and the hand-off with
// 8,192 windows and checks the heap the sink holds against the documented
// bound: WindowBytes per window slot (ring, hand-off, key map), plus the
// identity strings, whatever the number of identities flooding.
func TestMemoryIsBoundedAsDocumented(t *testing.T) {
	if s := unsafe.Sizeof(window{}) + unsafe.Sizeof(closed{}); s > WindowBytes {
		t.Fatalf("a window slot and a hand-off slot take %d bytes, above WindowBytes %d", s, WindowBytes)
	}
	const idLen = 39
	ids := make([]string, MaxOpenWindows+MaxPending)
	for i := range ids {
		ids[i] = fmt.Sprintf("spiffe://fleet.test/host-%014d", i)
		if len(ids[i]) != idLen {
			t.Fatalf("identity %q is %d bytes", ids[i], len(ids[i]))
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	s, err := New(Options{Store: &memStore{}, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		s.Limited(context.Background(), limiter.Event{Identity: id, Verb: limiter.Mint, Bucket: limiter.Admission})
	}
	if st := s.Stats(); st.OpenWindows != MaxOpenWindows || st.Pending != MaxPending {
		t.Fatalf("stats %+v, want ring and hand-off full", st)
	}
	used := heap() - before // the identity strings were allocated before
	limit := uint64(MaxOpenWindows * WindowBytes)
	t.Logf("sink holding %d windows: %d bytes (%.0f per open window); documented bound %d + identity bytes",
		MaxOpenWindows+MaxPending, used, float64(used)/MaxOpenWindows, limit)
	if used > limit {
		t.Fatalf("the sink holds %d bytes, above the documented %d (WindowBytes × MaxOpenWindows)", used, limit)
	}
	runtime.KeepAlive(s)
}
