package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// Fair dispatch among identities (issue 39). A request holds a seat from
// its first bytes (nothing of it parsed yet) until its answer is flushed.
// The gate hands the seats out:
//
//   - An identity that is the only one calling may have up to
//     perIdentity requests seated at once (MaxInFlightPerIdentity): a
//     control plane's wave alone runs as it would without the gate.
//   - Once two or more identities are calling, each has a guaranteed share
//     of the shared seats (SharedInFlight / the number calling, at least
//     one), so an identity with nothing seated always starts at once; a
//     request beyond its identity's share starts only while fewer than
//     SharedInFlight requests are seated in all (it borrows a seat nobody
//     is using), still within perIdentity.
//   - A request that cannot start waits, read no further than its first
//     read, in its
//     identity's queue (first come, first served within one identity). When
//     a seat frees, the identities with a request waiting are offered it in
//     round-robin order, the one served least recently first, one request
//     each per round: a request waits behind at most one request of each
//     other identity that is waiting too.
//
// An identity is calling while it has a request seated or waiting, and
// for contendedLinger after its last answer: a serial caller's next request
// follows its answer within that time, so a flood does not reclaim every
// seat in the gap between two of its calls.
//
// The gate is a state machine under one mutex; it never blocks. Server's
// turn.go waits on the waiter it returns, with the wait deadline.

// contendedLinger is how long an identity still counts as calling after
// its last answer. Measured: a serial mTLS caller's next request arrives
// within 2 ms of its answer during a c=64 flood on a 2-core machine (the
// fairness benchmark, daemon/fairness_bench_test.go); 20 ms leaves a wide
// margin, and a lone identity pays it only if another identity called
// within the last 20 ms.
const contendedLinger = 20 * time.Millisecond

// fairLimits are the gate's caps (the defaults filled in).
type fairLimits struct {
	perIdentity int // MaxInFlightPerIdentity
	shared      int // SharedInFlight
}

// fairGate is the server's dispatcher of seats. It is safe for concurrent
// use.
type fairGate struct {
	// now reads the clock: time.Now, or a test's.
	now func() time.Time

	mu     sync.Mutex
	limits fairLimits
	// flows holds every calling identity's flow (none other: a flow is
	// deleted when its linger ends).
	flows map[string]*flow
	// seated is the requests seated, all identities.
	seated int
	// serial numbers the seats taken, for flow.served.
	serial uint64
	// calling is len(flows): identities seated, waiting or lingering.
	calling int
	// callingNow mirrors calling for readers outside the mutex (a
	// refusal's pace, turn.go): written under g.mu, read without it.
	callingNow atomic.Int32
	// ring is the flows with a request waiting, least recently served
	// first.
	ring flowList
	// lingering is the flows with nothing seated or waiting, soonest end
	// of linger first (contendedLinger is constant, so that is the order
	// they were added in).
	lingering flowList

	// byKind is the requests seated by listener kind, for Stats.
	byKind [NumListenerKinds]atomic.Int64
}

// flow is one identity's state in the gate. Guarded by fairGate.mu.
type flow struct {
	id      string
	seated  int
	waiters waiterList
	// served is the gate's serial number of the flow's last seat taken:
	// the ring keeps its flows in increasing order of it.
	served uint64
	// lingerUntil is when the flow stops counting as calling, once it is
	// in the lingering list.
	lingerUntil time.Time
	inRing      bool
	lingers     bool
	// gone: deleted from the gate (its linger ended); a connection that
	// cached it looks its identity up again.
	gone bool
	ring links[flow]
	ling links[flow]
}

// waiter is a request waiting for a seat.
type waiter struct {
	f    *flow
	kind ListenerKind
	// since is when it started waiting (the gate's clock).
	since time.Time
	// ready is closed when the request is given its seat.
	ready   chan struct{}
	granted bool
	l       links[waiter]
}

func newFairGate(l fairLimits, now func() time.Time) *fairGate {
	if now == nil {
		now = time.Now
	}
	return &fairGate{
		now:       now,
		limits:    l,
		flows:     map[string]*flow{},
		ring:      flowList{link: func(f *flow) *links[flow] { return &f.ring }},
		lingering: flowList{link: func(f *flow) *links[flow] { return &f.ling }},
	}
}

// setLimits puts new caps in force (a reload) and seats the waiting
// requests they let start.
func (g *fairGate) setLimits(l fairLimits) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limits = l
	g.dispatchLocked()
}

// currentLimits returns the caps in force.
func (g *fairGate) currentLimits() fairLimits {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limits
}

// shareLocked is a calling identity's guaranteed seats. g.mu is held.
func (g *fairGate) shareLocked() int {
	return max(1, g.limits.shared/max(1, g.calling))
}

// mayStartLocked reports whether a request of f may take a seat now.
// g.mu is held.
func (g *fairGate) mayStartLocked(f *flow) bool {
	switch {
	case f.seated >= g.limits.perIdentity:
		return false
	case g.calling <= 1:
		return true // alone: only its own cap
	case f.seated < g.shareLocked():
		return true // within its guaranteed share
	}
	return g.seated < g.limits.shared // a seat nobody else is using
}

// arrive is a request of identity id on a listener of kind: it either
// takes a seat at once (a nil waiter) or must wait on the returned
// waiter, whose ready channel is closed when it is seated. f is the
// caller's cached flow for id (nil the first time; a connection's identity
// never changes); the flow to cache is returned.
func (g *fairGate) arrive(f *flow, id string, kind ListenerKind) (*flow, *waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var now time.Time
	if g.lingering.head != nil {
		now = g.now()
		if g.expireLocked(now) {
			// Fewer identities calling: larger shares for those waiting,
			// who were here first.
			g.dispatchLocked()
		}
	}
	if f == nil || f.gone {
		f = g.flows[id]
		if f == nil {
			f = &flow{id: id}
			g.flows[id] = f
			g.calling++
			g.callingNow.Store(int32(g.calling))
		}
	}
	if f.lingers {
		g.lingering.remove(f)
		f.lingers = false
	}
	if f.waiters.head == nil && g.mayStartLocked(f) {
		g.seatLocked(f, kind)
		return f, nil
	}
	if now.IsZero() {
		now = g.now()
	}
	w := &waiter{f: f, kind: kind, since: now, ready: make(chan struct{})}
	f.waiters.push(w)
	if !f.inRing {
		f.inRing = true
		g.enterRingLocked(f)
	}
	return f, w
}

// enterRingLocked places f, which starts waiting, in the ring by when it
// was last served: after every flow served before it. A flow's requests
// may have been seated at once on arrival while others waited (within its
// share), so the ring's tail is not always the most recently served.
func (g *fairGate) enterRingLocked(f *flow) {
	at := g.ring.tail
	for at != nil && at.served > f.served {
		at = at.ring.prev
	}
	g.ring.insertAfter(at, f)
}

func (g *fairGate) seatLocked(f *flow, kind ListenerKind) {
	f.seated++
	g.seated++
	g.serial++
	f.served = g.serial
	g.byKind[kind].Add(1)
}

// leave gives back a seat of f's, taken on a listener of kind, and seats
// the waiting requests that may start now.
func (g *fairGate) leave(f *flow, kind ListenerKind) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.seated--
	g.seated--
	g.byKind[kind].Add(-1)
	switch {
	case f.seated == 0 && f.waiters.head == nil:
		now := g.now()
		g.expireLocked(now)
		f.lingerUntil = now.Add(contendedLinger)
		f.lingers = true
		g.lingering.push(f)
	case g.lingering.head != nil:
		g.expireLocked(g.now())
	}
	g.dispatchLocked()
}

// cancel takes w out of its queue (its deadline passed, or its connection
// was closed). It returns false if w was seated meanwhile: the caller
// holds that seat and must leave it.
func (g *fairGate) cancel(w *waiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted {
		return false
	}
	f := w.f
	f.waiters.remove(w)
	if f.waiters.head == nil && f.inRing {
		f.inRing = false
		g.ring.remove(f)
	}
	// f has a request seated (a flow with none seated never keeps a
	// waiter: dispatch seats it), so it lingers when that one leaves.
	return true
}

// expireLocked ends the lingers due at now: those flows stop calling and
// are deleted. It reports whether any ended. g.mu is held.
func (g *fairGate) expireLocked(now time.Time) bool {
	ended := false
	for f := g.lingering.head; f != nil && !f.lingerUntil.After(now); f = g.lingering.head {
		g.lingering.remove(f)
		f.lingers = false
		f.gone = true
		delete(g.flows, f.id)
		g.calling--
		g.callingNow.Store(int32(g.calling))
		ended = true
	}
	return ended
}

// dispatchLocked seats waiting requests while any may start: in rounds,
// each flow waiting when a round begins is offered one seat, least
// recently served first, and a flow served goes to the back of the ring.
// A seated waiter's ready channel is closed. g.mu is held.
func (g *fairGate) dispatchLocked() {
	for progress := true; progress && g.ring.head != nil; {
		progress = false
		f := g.ring.head
		for n := g.ring.n; n > 0; n-- {
			next := f.ring.next
			if g.mayStartLocked(f) {
				w := f.waiters.pop()
				w.granted = true
				g.seatLocked(f, w.kind)
				close(w.ready)
				g.ring.remove(f)
				if f.waiters.head != nil {
					g.ring.push(f)
				} else {
					f.inRing = false
				}
				progress = true
			}
			if next == nil {
				break
			}
			f = next
		}
	}
}

// contended reports whether more than one identity is calling (seated,
// waiting or lingering), as of the gate's last arrival. Safe for
// concurrent use without g.mu.
func (g *fairGate) contended() bool { return g.callingNow.Load() > 1 }

// seatedBy returns the requests seated on listeners of kind.
func (g *fairGate) seatedBy(kind ListenerKind) int64 { return g.byKind[kind].Load() }

// links are the two pointers of an element of an intrusive list.
type links[T any] struct{ prev, next *T }

// flowList is an intrusive doubly linked list of flows through the links
// link returns.
type flowList struct {
	head, tail *flow
	n          int
	link       func(*flow) *links[flow]
}

func (l *flowList) push(f *flow) {
	lk := l.link(f)
	lk.prev, lk.next = l.tail, nil
	if l.tail != nil {
		l.link(l.tail).next = f
	} else {
		l.head = f
	}
	l.tail = f
	l.n++
}

// insertAfter puts f after at, or first when at is nil.
func (l *flowList) insertAfter(at, f *flow) {
	if at == nil || at == l.tail {
		if at == nil && l.head != nil {
			lk := l.link(f)
			lk.prev, lk.next = nil, l.head
			l.link(l.head).prev = f
			l.head = f
			l.n++
			return
		}
		l.push(f)
		return
	}
	lk, ak := l.link(f), l.link(at)
	lk.prev, lk.next = at, ak.next
	l.link(ak.next).prev = f
	ak.next = f
	l.n++
}

func (l *flowList) remove(f *flow) {
	lk := l.link(f)
	if lk.prev != nil {
		l.link(lk.prev).next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		l.link(lk.next).prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
	l.n--
}

// waiterList is a flow's queue of waiters, first come first.
type waiterList struct{ head, tail *waiter }

func (l *waiterList) push(w *waiter) {
	w.l.prev, w.l.next = l.tail, nil
	if l.tail != nil {
		l.tail.l.next = w
	} else {
		l.head = w
	}
	l.tail = w
}

func (l *waiterList) pop() *waiter {
	w := l.head
	l.remove(w)
	return w
}

func (l *waiterList) remove(w *waiter) {
	if w.l.prev != nil {
		w.l.prev.l.next = w.l.next
	} else {
		l.head = w.l.next
	}
	if w.l.next != nil {
		w.l.next.l.prev = w.l.prev
	} else {
		l.tail = w.l.prev
	}
	w.l.prev, w.l.next = nil, nil
}
