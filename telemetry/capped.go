package telemetry

import (
	"net"
	"sync"
	"sync/atomic"
)

// cappedListener holds at most max accepted connections open: a connection
// accepted beyond the cap is closed at once, and Accept goes on to the
// next. Unlike a listener that stops accepting at the cap, it leaves no
// connection waiting in the kernel's queue for a slot, so a scraper that
// finds the listener full learns it at once. It is safe for concurrent use.
type cappedListener struct {
	net.Listener
	max  int64
	open atomic.Int64
	// refused counts connections closed at the cap, for tests.
	refused atomic.Uint64
}

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			_ = c.Close()
			continue
		}
		return &cappedConn{Conn: c, l: l}, nil
	}
}

// cappedConn gives its slot back when it is first closed.
type cappedConn struct {
	net.Conn
	l    *cappedListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
