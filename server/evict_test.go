package server

// Tests of which connection gives way at a listener's cap (budget.go's
// victimLocked), over in-memory pipes inside a synctest bubble.

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// sendSlowBody sends mintRequest's headers and the first bytes of its body
// on c, which then never finishes it.
func sendSlowBody(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := io.WriteString(c, mintHead+mintBodyForPipes[:5]); err != nil {
		t.Fatal(err)
	}
}

// A connection still sending its body holds no request in flight: a
// newcomer at the cap takes its slot, the verb never sees the request, and
// the eviction is counted as partial_evicted.
func TestAConnectionStillSendingItsBodyIsEvictable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mints atomic.Int32
		s, l, _, served := budgetServer(t, Options{UnixMaxConns: 1, Verbs: countedMints(&mints)})
		slow := l.dial()
		closed := closeOf(slow)
		sendSlowBody(t, slow)
		synctest.Wait()
		c := l.dial()
		if st := getHealth(t, c); st != 200 {
			t.Fatalf("newcomer got %d while a slow body held the only slot", st)
		}
		got := <-closed
		if got.took != 0 || got.received != 0 {
			t.Errorf("the slow body's connection closed after %v with %d bytes, want at once and without an answer", got.took, got.received)
		}
		wantRejected(t, s, ListenerUnix, ReasonPartialEvicted, 1, "")
		wantRejected(t, s, ListenerUnix, ReasonIdleEvicted, 0, ": a connection part-way through its body is not idle")
		wantRejected(t, s, ListenerUnix, ReasonConnCap, 0, "")
		if n := mints.Load(); n != 0 {
			t.Errorf("the verb ran %d times for an evicted body", n)
		}
		slow.Close()
		c.Close()
		shutdown(t, s, served)
	})
}
