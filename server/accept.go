package server

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// frontListener is what the HTTP server accepts from: connections the
// budget has admitted (TLS ones with their handshake done), handed over
// by the listener's own accept loop.
type frontListener struct {
	raw net.Listener
	set *connSet
	// identify derives a unix (or unknown) connection's identity.
	identify func(net.Conn) connIdentity
	// prepare adds the limiter's Caller to an identity.
	prepare func(connIdentity) connIdentity
	// turns takes the turns of the connections' requests (turn.go); nil
	// without fair dispatch.
	turns *Server
	// handshakeTimeout bounds a TLS handshake.
	handshakeTimeout time.Duration
	ready            chan net.Conn
	done             chan struct{}
	once             sync.Once
	wg               sync.WaitGroup // the accept loop and the handshakes
	err              chan error     // the raw listener's failure, at most one
}

func (f *frontListener) Accept() (net.Conn, error) {
	select {
	case c := <-f.ready:
		return c, nil
	case err := <-f.err:
		return nil, err
	case <-f.done:
		return nil, net.ErrClosed
	}
}

func (f *frontListener) Close() error {
	var err error
	f.once.Do(func() {
		close(f.done)
		err = f.raw.Close()
		f.set.closeHandshaking()
	})
	return err
}

func (f *frontListener) Addr() net.Addr { return f.raw.Addr() }

// hand passes an admitted connection to the HTTP server; at shutdown it
// closes it and gives its slot back instead.
func (f *frontListener) hand(c net.Conn) {
	select {
	case f.ready <- c:
	case <-f.done:
		_ = c.Close()
		if tc := trackedOf(c); tc != nil {
			f.set.closed(tc)
		}
	}
}

// acceptLoop accepts raw connections until the listener closes. It never
// blocks on a connection: the budget decides at once, and a TLS handshake
// runs in its own goroutine.
func (f *frontListener) acceptLoop() {
	defer f.wg.Done()
	var delay time.Duration
	for {
		raw, err := f.raw.Accept()
		if err != nil {
			select {
			case <-f.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// EMFILE and the like: back off as net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-f.done:
					return
				}
			}
			f.err <- err
			return
		}
		delay = 0
		c := &trackedConn{Conn: raw, set: f.set, srv: f.turns, gone: make(chan struct{})}
		if f.set.kind == ListenerTLS {
			c.remote = raw.RemoteAddr().String()
			f.set.startHandshake(c)
			f.wg.Add(1)
			go f.handshake(c)
			continue
		}
		c.ident = f.identify(raw)
		f.admitAndHand(c, c)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// admitAndHand takes a slot for c and hands conn (c, or the TLS connection
// over it) to the HTTP server, or refuses it.
func (f *frontListener) admitAndHand(c *trackedConn, conn net.Conn) {
	if f.prepare != nil {
		c.ident = f.prepare(c.ident) // c is not shared yet
	}
	if ok, reason := f.set.admit(c); !ok {
		_ = conn.Close()
		f.set.events.reject(f.set.kind, reason, c.attrs()...)
		return
	}
	f.hand(conn)
}

// trackedOf returns the budgeted connection under c, if any.
func trackedOf(c net.Conn) *trackedConn {
	switch x := c.(type) {
	case *trackedConn:
		return x
	case *tls.Conn:
		tc, _ := x.NetConn().(*trackedConn)
		return tc
	}
	return nil
}

// connKey is the context key of a request's budgeted connection.
type connKey struct{}
