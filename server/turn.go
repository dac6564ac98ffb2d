package server

import (
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// A request's turn. On a connection under a budget every request takes a
// seat of the fair gate (fair.go) as its headers end, before its body is
// read: a request that waits is read no further than its headers, so
// waiting costs a flood no buffer. It waits at most the wait timeout; past
// it the request is answered RegistrarBusy (retry_after 1) and counted
// (Stats.WaitTimeouts), its body unread. A connection closed by its
// budget while its request waits (evicted for a newcomer, or at the end of
// the shutdown's grace period: it held no request in flight) leaves the
// queue at once, without an answer. Every seated request is reported to
// the Observer with the time it waited, zero when it was seated at once,
// so the wait histogram counts exactly the requests served.

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

// turn is what awaitTurn decided.
type turn uint8

const (
	// seated: the request holds a seat; leaveTurn must follow.
	seated turn = iota
	// answeredBusy: the request waited past its deadline and was answered
	// RegistrarBusy.
	answeredBusy
	// abandoned: the connection was closed while the request waited; it
	// must not run, and gets no answer.
	abandoned
)

// awaitTurn seats tc's request r, at once or after a wait (see above).
func (s *Server) awaitTurn(w http.ResponseWriter, r *http.Request, tc *trackedConn) turn {
	g, kind := s.gate, tc.set.kind
	f, wt := g.arrive(tc.flow, tc.ident.id, kind)
	tc.flow = f
	if wt == nil {
		s.observer.Waited(kind, 0)
		return seated
	}
	timer := time.NewTimer(s.WaitTimeout())
	defer timer.Stop()
	select {
	case <-wt.ready:
		yieldAfterHandoff()
	case <-tc.gone:
		if !g.cancel(wt) {
			g.leave(f, kind) // seated in the same instant: give it back
		}
		return abandoned
	case <-timer.C:
		if g.cancel(wt) {
			s.stats.waitTimeouts[kind].Add(1)
			s.busy(w, r)
			return answeredBusy
		}
		// Seated in the same instant as its deadline: it is served.
	}
	s.observer.Waited(kind, g.now().Sub(wt.since))
	return seated
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
// request was abandoned).
func (s *Server) leaveTurn(tc *trackedConn) { s.gate.leave(tc.flow, tc.set.kind) }

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
// MaxInFlightPerIdentity, SharedInFlight and WaitTimeout. A plain value.
type Fairness struct {
	MaxInFlightPerIdentity int
	SharedInFlight         int
	WaitTimeout            time.Duration
}

// SetFairness puts new fair-dispatch settings in force (a live reload):
// the caps apply from the next seat handed out (raised caps seat the
// requests waiting at once), the wait timeout to the requests that start
// waiting from now on. A zero value means its default; a negative one is
// refused, and nothing changes. Safe for concurrent use.
func (s *Server) SetFairness(f Fairness) error {
	switch {
	case f.MaxInFlightPerIdentity < 0:
		return fmt.Errorf("wire: SetFairness: MaxInFlightPerIdentity %d is negative", f.MaxInFlightPerIdentity)
	case f.SharedInFlight < 0:
		return fmt.Errorf("wire: SetFairness: SharedInFlight %d is negative", f.SharedInFlight)
	case f.WaitTimeout < 0:
		return fmt.Errorf("wire: SetFairness: WaitTimeout %v is negative", f.WaitTimeout)
	}
	s.waitTimeout.Store(int64(orDefault(f.WaitTimeout, DefaultWaitTimeout)))
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
	return Fairness{MaxInFlightPerIdentity: l.perIdentity, SharedInFlight: l.shared, WaitTimeout: s.WaitTimeout()}
}

// WaitTimeout returns the wait timeout in force. Safe for concurrent use.
func (s *Server) WaitTimeout() time.Duration { return time.Duration(s.waitTimeout.Load()) }
