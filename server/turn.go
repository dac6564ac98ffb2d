package server

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// A request's turn. On a connection under a budget every request takes a
// seat of the fair gate (fair.go) as its first bytes arrive, before the
// daemon parses it: the connection's first read of a new request, into
// the connection's own read buffer, takes the turn before it returns
// (trackedConn.Read, readFirst). A request that waits is read no further
// than that one read (at most the buffer, 4 KiB over the socket): its body
// is not read into a buffer of its own and nothing of it is parsed, and
// the goroutine of a waiting request is parked, not runnable, so what runs
// beside another identity's request is at most the seated requests.
// Reading one byte first would keep the rest of the request in the socket,
// at the price of a second read system call on every request's path, a
// few per cent of a throttled answer's cost; the connection's buffer is
// allocated whatever the request, so waiting with it full costs nothing
// more. A request waits at most the wait timeout; past it the request is
// parsed, its body read whole within the body deadline as every request's
// is (whole.go: one that is not whole in time is closed without an answer,
// a body timeout), and answered RegistrarBusy (retry_after 1) without a
// seat, its body not read by any handler, and counted (Stats.WaitTimeouts). A
// connection closed while its request waits (evicted for a newcomer,
// drained or closed at shutdown: it held no request in flight) leaves the
// queue at once, without an answer. Every seated request is reported to
// the Observer with the time it waited, zero when it was seated at once,
// so the wait histogram counts exactly the requests served. The seat is
// given back once the answer is flushed, or when the connection closes
// first (net/http answers a request it cannot parse itself, and closes).

// Observer is told of every request seated by the fair gate. Its methods
// are called concurrently, on every request's path: they must be cheap
// and safe for concurrent use.
type Observer interface {
	// Waited reports a request seated on a listener of kind after waiting
	// wait for its turn (zero: seated at once).
	Waited(kind ListenerKind, wait time.Duration)
}

type nopObserver struct{}

func (nopObserver) Waited(ListenerKind, time.Duration) {}

// busyRetryAfter is the retry_after, in seconds, of a request that waited
// past its deadline: the least the protocol allows. A seat frees within
// milliseconds unless the daemon is overloaded; a caller's jitter spreads
// the retries.
const busyRetryAfter = 1

// A connection's turn state (trackedConn.turn), per request.
const (
	// turnNone: the request has not had its turn yet; the connection's
	// next read of a new request takes it.
	turnNone uint32 = iota
	// turnSeated: the request holds a seat; leaveTurn (or the
	// connection's close) gives it back.
	turnSeated
	// turnLate: the request waited past the wait timeout; its handler
	// answers RegistrarBusy without a seat.
	turnLate
	// turnDone: the request has had its turn; reads until the next
	// request (its body discarded, net/http's background read) take none.
	turnDone
)

// readFirst reads the first bytes of a new request on c and takes the
// request's turn: at once, or after a wait. It returns what it read, or
// the error that ended the wait (the connection was closed meanwhile).
func (c *trackedConn) readFirst(p []byte) (int, error) {
	n, err := c.readConn(p)
	if n == 0 {
		return n, err
	}
	if !c.srv.takeTurn(c) {
		return 0, c.closedReadError()
	}
	return n, err
}

// closedReadError is the error of a read whose connection was closed
// while its request waited: the one a read of the closed connection
// returns, a *net.OpError of op "read" (errors.Is net.ErrClosed), which
// net/http ends the connection on without a word. The wait is woken before the connection is closed
// (evictLocked, Close), so the connection may still be open: a bare
// net.ErrClosed would have net/http write its own 400 Bad Request on it.
func (c *trackedConn) closedReadError() error {
	return &net.OpError{Op: "read", Addr: c.RemoteAddr(), Err: net.ErrClosed}
}

// takeTurn seats c's new request, at once or after a wait, or marks it
// late past the wait timeout. It returns false if the connection was
// closed while the request waited.
func (s *Server) takeTurn(c *trackedConn) bool {
	g, kind := s.gate, c.set.kind
	f, wt := g.arrive(c.flow, c.ident.id, kind)
	c.flow = f
	if wt == nil {
		c.turn.Store(turnSeated)
		s.observer.Waited(kind, 0)
		return true
	}
	timer := time.NewTimer(s.WaitTimeout())
	defer timer.Stop()
	select {
	case <-wt.ready:
		yieldAfterHandoff()
	case <-c.gone:
		if !g.cancel(wt) {
			g.leave(f, kind) // seated in the same instant: give it back
		}
		return false
	case <-timer.C:
		if g.cancel(wt) {
			c.turn.Store(turnLate)
			c.rearmHeaderDeadline(s.opts.ReadHeaderTimeout)
			return true
		}
		// Seated in the same instant as its deadline: it is served.
	}
	c.turn.Store(turnSeated)
	s.observer.Waited(kind, g.now().Sub(wt.since))
	c.rearmHeaderDeadline(s.opts.ReadHeaderTimeout)
	return true
}

// rearmHeaderDeadline gives the rest of a request's headers a whole header
// timeout after its wait for a turn: the wait took time from the deadline
// net/http set before the first bytes.
func (c *trackedConn) rearmHeaderDeadline(d time.Duration) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(d))
}

// awaitTurn is the handler's side of a request's turn, before its body is
// read. A request seated at its first bytes goes on. A request whose bytes
// came without a turn (read by net/http's background read while the
// previous request ran) takes its turn here: its headers are parsed, its
// body is not read yet. It reports late for a request that waited past
// its deadline, which holds no seat and is to be answered RegistrarBusy
// once its body is whole (busyLate), and abandoned when the request's
// connection was closed while it waited: the handler must not go on.
func (s *Server) awaitTurn(tc *trackedConn) (late, abandoned bool) {
	if tc.turn.Load() == turnNone && !s.takeTurn(tc) {
		return false, true
	}
	return tc.turn.CompareAndSwap(turnLate, turnDone), false
}

// busyLate answers RegistrarBusy to a request that waited past its turn's
// deadline, and counts it (Stats.WaitTimeouts). Its body has been read
// whole first (receive), within the body deadline, as every request's is:
// a request that is not whole in time is closed without an answer and
// counted as a body timeout, not here, so a connection that sends its body
// a byte at a time gets no answer whether or not it had to wait (issue 41).
func (s *Server) busyLate(w http.ResponseWriter, r *http.Request, tc *trackedConn) {
	s.stats.waitTimeouts[tc.set.kind].Add(1)
	s.busy(w, r)
}

// yieldAfterHandoff is a seated waiter's first act. Closing its ready
// channel made it the next goroutine of the processor the seat was given
// back on, with the rest of that goroutine's time slice: without a yield,
// one identity's waiters pass the seat down a chain that holds the
// processor for a whole slice (10 ms), while the goroutines of every other
// identity, woken by the network, wait in its run queue. Yielding puts the
// waiter behind them.
var yieldAfterHandoff = runtime.Gosched

// leaveTurn gives tc's seat back, once its answer is flushed (or its
// request was abandoned), unless the connection's close gave it back
// first.
func (s *Server) leaveTurn(tc *trackedConn) {
	if tc.turn.CompareAndSwap(turnSeated, turnDone) {
		s.gate.leave(tc.flow, tc.set.kind)
	}
}

// busy answers a request that waited past its deadline: RegistrarBusy,
// as the admission throttle's, with a request id of the wire's own (no
// verb saw the request) and no RateLimit fields (no bucket was charged).
func (s *Server) busy(w http.ResponseWriter, _ *http.Request) {
	s.write(w, http.StatusTooManyRequests, &wire.RefusalResponse{
		ProtocolVersion: wire.ProtocolVersion,
		RequestID:       s.nextID(),
		Class:           wire.Retryable,
		Error:           wire.ErrorBody{ID: wire.RegistrarBusy, RetryAfter: busyRetryAfter},
		RegistrarHealth: s.healthJSON(),
	}, busyRetryAfter)
}

// Fairness is the fair dispatch's settings: Options'
// MaxInFlightPerIdentity, SharedInFlight, WaitTimeout and RefusalPace. A
// plain value.
type Fairness struct {
	MaxInFlightPerIdentity int
	SharedInFlight         int
	WaitTimeout            time.Duration
	RefusalPace            time.Duration
}

// SetFairness puts new fair-dispatch settings in force (a live reload):
// the caps apply from the next seat handed out (raised caps seat the
// requests waiting at once), the wait timeout to the requests that start
// waiting from now on, the refusal pace to the refusals answered from now
// on. A zero cap or wait timeout means its default, a zero pace none; a
// negative value, or a pace above MaxRefusalPace, is refused, and nothing
// changes. Safe for concurrent use.
func (s *Server) SetFairness(f Fairness) error {
	switch {
	case f.MaxInFlightPerIdentity < 0:
		return fmt.Errorf("wire: SetFairness: MaxInFlightPerIdentity %d is negative", f.MaxInFlightPerIdentity)
	case f.SharedInFlight < 0:
		return fmt.Errorf("wire: SetFairness: SharedInFlight %d is negative", f.SharedInFlight)
	case f.WaitTimeout < 0:
		return fmt.Errorf("wire: SetFairness: WaitTimeout %v is negative", f.WaitTimeout)
	case f.RefusalPace < 0:
		return fmt.Errorf("wire: SetFairness: RefusalPace %v is negative", f.RefusalPace)
	case f.RefusalPace > MaxRefusalPace:
		return fmt.Errorf("wire: SetFairness: RefusalPace %v is above %v, the least retry_after", f.RefusalPace, MaxRefusalPace)
	}
	s.waitTimeout.Store(int64(orDefault(f.WaitTimeout, DefaultWaitTimeout)))
	s.refusalPace.Store(int64(f.RefusalPace))
	s.gate.setLimits(fairLimits{
		perIdentity: orDefault(f.MaxInFlightPerIdentity, DefaultMaxInFlightPerIdentity),
		shared:      orDefault(f.SharedInFlight, DefaultSharedInFlight),
	})
	return nil
}

// Fairness returns the fair-dispatch settings in force. Safe for
// concurrent use.
func (s *Server) Fairness() Fairness {
	l := s.gate.currentLimits()
	return Fairness{MaxInFlightPerIdentity: l.perIdentity, SharedInFlight: l.shared, WaitTimeout: s.WaitTimeout(),
		RefusalPace: time.Duration(s.refusalPace.Load())}
}

// WaitTimeout returns the wait timeout in force. Safe for concurrent use.
func (s *Server) WaitTimeout() time.Duration { return time.Duration(s.waitTimeout.Load()) }
