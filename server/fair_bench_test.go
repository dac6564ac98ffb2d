package server

import (
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkTurnArriveLeave is what the fair gate adds to every request
// seated at once: an arrival and a departure, of one identity alone (a
// flood: every request on this path) and of 16 identities (their own
// flows), from as many goroutines as processors.
func BenchmarkTurnArriveLeave(b *testing.B) {
	for _, ids := range []int{1, 16} {
		b.Run("identities="+strconv.Itoa(ids), func(b *testing.B) {
			g := newFairGate(fairLimits{perIdentity: 1 << 20, shared: 1 << 20}, nil)
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				id := "unix-peer:uid=" + strconv.Itoa(int(next.Add(1))%ids)
				var f *flow
				for pb.Next() {
					var w *waiter
					f, w = g.arrive(f, id, ListenerUnix)
					if w != nil {
						b.Fatal("a request waited")
					}
					g.leave(f, ListenerUnix)
				}
			})
		})
	}
}
