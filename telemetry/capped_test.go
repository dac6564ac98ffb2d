package telemetry

import (
	"io"
	"net"
	"testing"
	"time"
)

// A connection beyond the cap is closed at once, and a closed one gives
// its slot back.
func TestTheCappedListenerClosesConnectionsBeyondItsCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &cappedListener{Listener: inner, max: 2}
	defer l.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	held := []net.Conn{<-accepted, <-accepted}
	// The third is accepted and closed by the listener: the client reads
	// EOF (bounded by a deadline, not a sleep).
	third := dial()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection beyond the cap read %v, want EOF", err)
	}
	if got := l.refused.Load(); got != 1 {
		t.Errorf("refused %d, want 1", got)
	}
	// Closing one (twice: the slot is given back once) makes room.
	held[0].Close()
	held[0].Close()
	dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted after one was closed")
	}
	if got := l.open.Load(); got != 1 {
		t.Errorf("open %d after closing two of three, want 1", got)
	}
	held[1].Close()
}
