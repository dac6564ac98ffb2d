package server

// Issue 27, item 8: connections evicted while their answer is flushing
// once stayed open for the 30 s write timeout (300 never-reading clients
// held 315 descriptors while the gauge said 64). Now each is closed within
// evictedFlushGrace, and at most maxEvictedFlushing are finishing at once.

import (
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// openConn is a server end that counts itself open until first closed.
type openConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *openConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

func TestEvictedConnectionsThatNeverReadHoldNoDescriptorsPastTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxConns, callers = 4, 60
		s, l, ids, served := budgetServer(t, Options{UnixMaxConns: maxConns, WriteTimeout: 30 * time.Second})
		var open atomic.Int64
		var clients []net.Conn
		for i := range callers {
			// A caller that sends its request and never reads: a pipe has no
			// buffer, so the server's flush of the answer blocks for good.
			c, srv := net.Pipe()
			oc := &openConn{Conn: srv, open: &open}
			open.Add(1)
			ids.m.Store(oc, "caller-"+strconv.Itoa(i))
			l.queue <- oc
			clients = append(clients, c)
			go io.WriteString(c, healthRequest) // fails once the server closes c
			synctest.Wait()
			if got, bound := open.Load(), int64(maxConns+maxEvictedFlushing); got > bound {
				t.Fatalf("after %d callers that never read: %d server connections open, want at most the cap %d + %d",
					i+1, got, maxConns, maxEvictedFlushing)
			}
			if got := s.Stats().Connections[ListenerUnix]; got > maxConns {
				t.Fatalf("after %d callers: gauge %d over the cap %d", i+1, got, maxConns)
			}
		}
		if got := rejected(s, ListenerUnix, ReasonIdleEvicted); got < maxEvictedFlushing {
			t.Errorf("idle_evicted got %d, want at least %d flushing connections evicted", got, maxEvictedFlushing)
		}
		if got := rejected(s, ListenerUnix, ReasonConnCap); got == 0 {
			t.Error("conn_cap got 0, want newcomers refused while the evicted ones finish")
		}

		// Within the grace (and far within the write timeout), every evicted
		// connection is closed: only the cap's worth stays open.
		time.Sleep(evictedFlushGrace)
		synctest.Wait()
		if got := open.Load(); got > maxConns {
			t.Fatalf("%v after the last eviction: %d server connections open, want at most the cap %d", evictedFlushGrace, got, maxConns)
		}
		// The slots work again: the evicted are gone and no longer counted
		// as finishing, so new callers evict the flushing ones afresh
		// rather than being refused.
		before := rejected(s, ListenerUnix, ReasonConnCap)
		for i := range maxEvictedFlushing {
			c := dialAs(l, ids, "late-"+strconv.Itoa(i))
			clients = append(clients, c)
			go io.WriteString(c, healthRequest)
			synctest.Wait()
		}
		if got := rejected(s, ListenerUnix, ReasonConnCap); got != before {
			t.Errorf("conn_cap went from %d to %d after the grace, want no refusal", before, got)
		}
		for _, c := range clients {
			c.Close()
		}
		shutdown(t, s, served)
	})
}
