package server

import (
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// TestHandshakeTimeoutsAndTheHandshakeCapAreCountedApart holds a claim a
// hand-made mutant showed nothing held (issue 28): the two ways a
// pre-handshake connection ends (its timeout, the budget) are counted
// apart.
func TestHandshakeTimeoutsAndTheHandshakeCapAreCountedApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePKI(t)
		s, l, served := tlsPipeServer(t, Options{TLSHandshakeMaxConns: 2, TLSHandshakeTimeout: 2 * time.Second}, p)
		// Two silent connections within the budget: both time out.
		a, b := l.dial(), l.dial()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if !isClosed(a) || !isClosed(b) {
			t.Fatal("a silent connection outlived the handshake timeout")
		}
		wantRejected(t, s, ListenerTLS, ReasonHandshakeTimeout, 2, "")
		wantRejected(t, s, ListenerTLS, ReasonHandshakeCap, 0, ": nothing exceeded the budget")
		// Three more at once: the budget closes the oldest (handshake_cap),
		// the other two time out.
		var more []net.Conn
		for range 3 {
			more = append(more, l.dial())
			synctest.Wait()
		}
		if !isClosed(more[0]) {
			t.Fatal("the oldest pre-handshake connection is still open past the budget")
		}
		wantRejected(t, s, ListenerTLS, ReasonHandshakeCap, 1, "")
		if got := rejected(s, ListenerTLS, ReasonHandshakeTimeout); got != 2 {
			t.Errorf("handshake_timeout got %d before the timeout, want still 2", got)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		wantRejected(t, s, ListenerTLS, ReasonHandshakeTimeout, 4, "")
		if got := rejected(s, ListenerTLS, ReasonHandshakeCap); got != 1 {
			t.Errorf("handshake_cap got %d after the timeouts, want still 1", got)
		}
		for _, c := range append(more, a, b) {
			c.Close()
		}
		shutdown(t, s, served)
	})
}
