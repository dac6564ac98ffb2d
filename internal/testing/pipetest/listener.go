// Package pipetest is a net.Listener of in-memory pipes, for tests of a
// server inside a synctest bubble: a real socket's blocking is not the
// bubble's, a net.Pipe's is.
package pipetest

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener hands out the server ends of net.Pipe connections; its queue
// plays the kernel's backlog.
type Listener struct {
	queue    chan net.Conn
	done     chan struct{}
	once     sync.Once
	accepted atomic.Int32
}

// NewListener returns a listener whose queue holds backlog connections
// not yet accepted (0: Dial waits for Accept).
func NewListener(backlog int) *Listener {
	return &Listener{queue: make(chan net.Conn, backlog), done: make(chan struct{})}
}

// Accept returns the next connection dialled, or net.ErrClosed once the
// listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.queue:
		l.accepted.Add(1)
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; it may be called more than once.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the listener's address: Addr{}.
func (l *Listener) Addr() net.Addr { return Addr{} }

// Dial queues a new connection for Accept and returns the client's end.
func (l *Listener) Dial() net.Conn {
	c, s := net.Pipe()
	l.Queue(s)
	return c
}

// Queue queues server, a connection's server end the test made (a pipe
// it wrapped, say), for Accept.
func (l *Listener) Queue(server net.Conn) { l.queue <- server }

// Accepted is how many connections Accept has returned.
func (l *Listener) Accepted() int32 { return l.accepted.Load() }

// Addr is a pipe's address, network and string "pipe".
type Addr struct{}

func (Addr) Network() string { return "pipe" }
func (Addr) String() string  { return "pipe" }
