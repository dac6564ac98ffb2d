package server

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Connection budgets. Every listener a Server serves has its own budget:
//
//   - a cap on its established connections (UnixMaxConns, TLSMaxConns);
//   - a cap per caller identity on each listener (MaxConnsPerIdentity);
//   - on a TLS listener, a separate, smaller budget for connections still
//     in their TLS handshake (TLSHandshakeMaxConns), each bounded by
//     TLSHandshakeTimeout, so unauthenticated traffic never takes a slot
//     an authenticated or local caller could use.
//
// A request is in flight from the moment its body is whole (read before
// its handler runs, within the body-read timeout: whole.go) until its
// answer is flushed. At a cap a connection that holds no request in flight
// (idle between requests, or still sending its request's headers or body)
// is closed to admit the newcomer: at the identity's cap one of that
// identity's, at the listener's cap one of the identity that holds the
// most connections (the next one's when every connection of that identity
// has a request in flight), so the identities that take the most slots
// give them back first and a caller with one connection keeps it. The
// newcomer is refused only when every slot it could take holds a request
// in flight, which the write timeout bounds. The pre-handshake budget
// always closes its oldest connection.
//
// A connection evicted while its answer is still being flushed (its caller
// is not reading) gives its slot at once but is not closed mid-answer: it
// gets evictedFlushGrace to finish, a write deadline set at eviction, and
// is closed when the answer is out or the deadline passes, whichever comes
// first. At most maxEvictedFlushing such connections per listener are
// finishing at once; while that many are, a flushing connection is not
// evicted (a newcomer takes a connection that has sent nothing, or is
// refused), so the descriptors a listener holds stay within its cap plus
// maxEvictedFlushing, whatever the number of callers that never read.

// evictedFlushGrace is how long an evicted connection may go on flushing
// its answer: enough for a caller that reads to receive an answer of a few
// KiB, far below the 30 s write timeout a caller that never reads would
// otherwise hold its descriptor for.
const evictedFlushGrace = time.Second

// maxEvictedFlushing bounds, per listener, the evicted connections still
// flushing their answer (each for at most evictedFlushGrace): the margin
// of open descriptors over the listener's cap.
const maxEvictedFlushing = 8

// trackedConn is a connection under a budget: the raw connection (below
// TLS, for a TLS listener), with its caller identity and its state.
type trackedConn struct {
	net.Conn
	set     *connSet
	ident   connIdentity
	remote  string
	timeout atomic.Bool  // a read hit its deadline while awaiting headers
	read    atomic.Int64 // bytes read since the connection was last idle
	// awaiting is true while the connection waits for (or reads) a
	// request's headers: from admission or idleness to its handler. Only
	// then is a deadline error a header (or idle) timeout; net/http also
	// aborts its background read with a past deadline after a handler.
	awaiting atomic.Bool

	// body and limit are the request's body as its handler reads it
	// (whole.go); only the connection's serving goroutine touches them.
	body  wholeBody
	limit io.LimitedReader
	// rateLimit is the RateLimit header value of the connection's last
	// verb answer (ratelimit.go); only its serving goroutine touches it.
	rateLimit rateLimitValue

	// Guarded by set.mu.
	busy     bool // a request in flight: its body whole, its handler running
	answered bool // the handler returned; its answer is being flushed
	// closeWhenIdle: evicted while its answer was being flushed; closed
	// once net/http reports it idle, so the answer reaches the caller whole.
	closeWhenIdle bool
	// flushingEvicted: evicted while flushing and not closed yet, counted
	// in set.flushingEvicted.
	flushingEvicted bool
	served          bool // at least one request was handled
	// since orders connections by when they were accepted, or when their
	// last response ended: a value of the set's logical clock (see
	// connSet.clock), not a time. Only the order matters (the oldest idle
	// connection gives way first), and reading the clock on every request
	// cost two clock reads, a tenth of a microsecond on a virtual machine.
	since   uint64
	evicted bool // closed by the budget, or by drain at the shutdown's grace end
	// srv takes the turns of the connection's requests (turn.go); nil
	// without fair dispatch.
	srv *Server
	// turn is the current request's turn state (turnNone … turnDone).
	turn atomic.Uint32
	// gone is closed when the connection is closed (by its budget, or by
	// anyone through Close), so that a request waiting for its turn leaves
	// the queue; nil for a connection that never serves (tests).
	gone     chan struct{}
	goneOnce sync.Once
	// flow is the connection's identity in the fair gate, cached; written
	// by the connection's serving goroutine before turn is set seated.
	flow     *flow
	admitted bool // counted in set.conns
	inHS     bool // counted in set.handshaking
}

// Read reads from the connection. The first read of a new request takes
// its turn (turn.go) before it returns.
func (c *trackedConn) Read(p []byte) (int, error) {
	if c.srv != nil && len(p) > 0 && c.awaiting.Load() && c.turn.Load() == turnNone {
		return c.readFirst(p)
	}
	return c.readConn(p)
}

func (c *trackedConn) readConn(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	if err != nil && c.awaiting.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		c.timeout.Store(true)
	}
	return n, err
}

// budgetEvents is all a connection budget knows of its server: where it
// counts the connections it holds and reports those it turns away. *Server
// implements it (rejections.go); a budget holds no other part of it.
type budgetEvents interface {
	// countConns adds delta to the established connections of kind.
	countConns(kind ListenerKind, delta int64)
	// countHandshaking adds delta to the connections of kind still in
	// their TLS handshake.
	countHandshaking(kind ListenerKind, delta int64)
	// reject counts a rejection and logs it, rate-limited.
	reject(kind ListenerKind, reason Reason, attrs ...slog.Attr)
}

// budgetLimits are one listener's caps (see Options).
type budgetLimits struct {
	maxConns    int // UnixMaxConns or TLSMaxConns
	perIdentity int // MaxConnsPerIdentity
	maxHS       int // TLSHandshakeMaxConns
}

// connSet is one listener's budget.
type connSet struct {
	events      budgetEvents
	kind        ListenerKind
	max         int
	perIdentity int
	maxHS       int
	tlsConfig   *tls.Config // nil for a unix listener

	mu          sync.Mutex
	clock       uint64 // the last since handed out; advanced under mu
	conns       map[*trackedConn]struct{}
	byIdentity  map[string]int
	handshaking map[*trackedConn]struct{}
	// flushingEvicted counts the evicted connections still flushing their
	// answer (at most maxEvictedFlushing).
	flushingEvicted int
	// draining: the shutdown's grace period is over (drain); an answer
	// gets evictedFlushGrace to be written once its handler returns.
	draining bool
}

// tick advances the set's logical clock and returns its new reading.
// cs.mu is held.
func (cs *connSet) tick() uint64 {
	cs.clock++
	return cs.clock
}

func newConnSet(events budgetEvents, kind ListenerKind, limits budgetLimits, tlsConfig *tls.Config) *connSet {
	return &connSet{
		events: events, kind: kind, tlsConfig: tlsConfig,
		max:         limits.maxConns,
		perIdentity: limits.perIdentity,
		maxHS:       limits.maxHS,
		conns:       map[*trackedConn]struct{}{},
		byIdentity:  map[string]int{},
		handshaking: map[*trackedConn]struct{}{},
	}
}

// victimLocked returns the connection to close so that a newcomer may
// have its slot, among those match accepts (nil: all), or nil when every
// one holds a request in flight. It is a connection of the identity that
// holds the most connections among those with a candidate, so at the
// listener's cap the identity that holds the most slots gives one back
// (with match, every candidate is of one identity). Within that identity,
// in order of preference, the oldest of:
//
//  1. a connection that has served a request and holds none in flight
//     (idle, or sending its next request): a client that reuses it after
//     the close sends its call again on a fresh connection (the client
//     marks the verbs idempotent), so nothing is lost;
//  2. one whose handler has returned and whose answer is only being
//     flushed: its caller has (or is about to have) the answer; it is
//     closed once idle, never mid-answer, or once evictedFlushGrace has
//     passed; only while fewer than maxEvictedFlushing evicted connections
//     are still flushing;
//  3. one that has served nothing yet (a newcomer still sending its first
//     request's headers or body, or a slowloris connection that never
//     finishes it): last, because a client cannot resend on a connection it
//     has just opened.
func (cs *connSet) victimLocked(match func(*trackedConn) bool) *trackedConn {
	var best *trackedConn
	var bestRank, bestHeld int
	for c := range cs.conns {
		if match != nil && !match(c) {
			continue
		}
		var rank int
		switch {
		case !c.busy && c.served:
			rank = 0
		case c.busy && c.answered:
			if cs.flushingEvicted >= maxEvictedFlushing {
				continue // enough descriptors over the cap already
			}
			rank = 1
		case !c.busy:
			rank = 2
		default:
			continue // a request in flight
		}
		held := cs.byIdentity[c.ident.id]
		if best == nil || held > bestHeld ||
			held == bestHeld && (rank < bestRank || rank == bestRank && c.since < best.since) {
			best, bestRank, bestHeld = c, rank, held
		}
	}
	return best
}

// admit takes a slot for c, closing a connection without a request in
// flight (victimLocked) of its identity (at the identity's cap) or of the
// listener (at the listener's cap) to make room. It returns false, and the
// reason, when every candidate slot holds a request in flight.
func (cs *connSet) admit(c *trackedConn) (bool, Reason) {
	cs.mu.Lock()
	var victim *trackedConn
	id := c.ident.id
	switch {
	case cs.byIdentity[id] >= cs.perIdentity:
		victim = cs.victimLocked(func(o *trackedConn) bool { return o.ident.id == id })
		if victim == nil {
			cs.mu.Unlock()
			return false, ReasonIdentityConnCap
		}
	case len(cs.conns) >= cs.max:
		victim = cs.victimLocked(nil)
		if victim == nil {
			cs.mu.Unlock()
			return false, ReasonConnCap
		}
	}
	closeNow, evicted := false, ReasonIdleEvicted
	if victim != nil {
		// Bytes read and no request in flight: the victim was part-way
		// through sending one (its headers, or its body).
		if !victim.busy && victim.read.Load() > 0 {
			evicted = ReasonPartialEvicted
		}
		cs.releaseLocked(victim)
		victim.evictLocked()
		// A connection still flushing its answer is closed once it is idle
		// (idle), never in the middle of the answer, and given
		// evictedFlushGrace to get there (the deadline below).
		victim.closeWhenIdle = victim.busy
		closeNow = !victim.busy
		if victim.busy {
			victim.flushingEvicted = true
			cs.flushingEvicted++
		}
	}
	c.since = cs.tick()
	c.admitted = true
	c.awaiting.Store(true)
	cs.conns[c] = struct{}{}
	cs.byIdentity[id]++
	cs.events.countConns(cs.kind, 1)
	cs.mu.Unlock()
	if victim != nil {
		if closeNow {
			_ = victim.Conn.Close()
		} else {
			// The raw connection's deadline (below TLS) bounds the rest of
			// the flush: net/http sets no other before its next request,
			// and there is none, so a caller that never reads loses its
			// descriptor within evictedFlushGrace, not the write timeout.
			_ = victim.Conn.SetWriteDeadline(time.Now().Add(evictedFlushGrace))
		}
		cs.events.reject(cs.kind, evicted, victim.attrs()...)
	}
	return true, 0
}

// evictLocked marks c closed by its budget and tells a request of it
// waiting for its turn. c.set.mu is held.
func (c *trackedConn) evictLocked() {
	c.evicted = true
	c.closeGone()
}

// closeGone tells a request of c waiting for its turn that c is closed.
func (c *trackedConn) closeGone() {
	if c.gone != nil {
		c.goneOnce.Do(func() { close(c.gone) })
	}
}

// Close closes the connection, and tells a request of it waiting for its
// turn (net/http closes an idle connection at shutdown through it).
func (c *trackedConn) Close() error {
	c.closeGone()
	return c.Conn.Close()
}

// releaseLocked gives c's slot back; it is idempotent.
func (cs *connSet) releaseLocked(c *trackedConn) {
	if !c.admitted {
		return
	}
	c.admitted = false
	delete(cs.conns, c)
	if n := cs.byIdentity[c.ident.id]; n <= 1 {
		delete(cs.byIdentity, c.ident.id) // no entry for an identity without a connection
	} else {
		cs.byIdentity[c.ident.id] = n - 1
	}
	cs.events.countConns(cs.kind, -1)
}

// closed is called once the HTTP server is done with c. A seat its
// request still holds (net/http answered it without the handler, or the
// connection broke first) is given back.
func (cs *connSet) closed(c *trackedConn) {
	c.closeGone()
	if c.srv != nil {
		c.srv.leaveTurn(c)
	}
	cs.mu.Lock()
	evicted, busy, served := c.evicted, c.busy, c.served
	cs.releaseLocked(c)
	if c.flushingEvicted {
		c.flushingEvicted = false
		cs.flushingEvicted--
	}
	cs.mu.Unlock()
	// A read deadline that expired while no handler ran is the header
	// timeout: on the first request, or on a later one once some of its
	// bytes had arrived (an idle keep-alive connection that sends nothing
	// is closed by the idle timeout, which is no rejection).
	if !evicted && !busy && c.timeout.Load() && (!served || c.read.Load() > 0) {
		cs.events.reject(cs.kind, ReasonHeaderTimeout, c.attrs()...)
	}
}

// begin marks the end of c's request headers, as its handler starts; a
// request without a body is in flight from then (whole). It returns false
// if c was evicted in the instant between its headers and its handler: the
// connection is closed and the request must not run.
func (cs *connSet) begin(c *trackedConn, hasBody bool) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c.evicted {
		return false
	}
	c.awaiting.Store(false)
	if !hasBody {
		c.busy, c.served = true, true
	}
	return true
}

// whole marks c's request in flight once its body has been read whole:
// from then on c is never evicted. It returns false if c was evicted while
// its body arrived: the connection is closed and the request must not run.
func (cs *connSet) whole(c *trackedConn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c.evicted {
		return false
	}
	c.busy, c.served = true, true
	return true
}

// bodyTimedOut counts c's body timeout, unless the budget closed c first
// (an eviction is counted as such). A connection it counts gives its slot
// back at once and is marked as closed by the budget: it is about to be
// closed without an answer, so no newcomer may pick it as its victim in
// the meantime (which would count the one connection twice, as
// body_timeout and partial_evicted), nor may closed() count it again.
func (cs *connSet) bodyTimedOut(c *trackedConn) {
	cs.mu.Lock()
	evicted := c.evicted
	if !evicted {
		c.evictLocked()
		cs.releaseLocked(c)
	}
	cs.mu.Unlock()
	if !evicted {
		cs.events.reject(cs.kind, ReasonBodyTimeout, c.attrs()...)
	}
}

// answered marks c's handler as returned, its answer about to be flushed.
// Past the shutdown's grace period the flush gets evictedFlushGrace, so a
// caller that never reads cannot hold the stop.
func (cs *connSet) answered(c *trackedConn) {
	cs.mu.Lock()
	c.answered = true
	draining := cs.draining
	cs.mu.Unlock()
	if draining {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(evictedFlushGrace))
	}
}

// drain is the end of the shutdown's grace period. Every connection
// without a request in flight (idle, or still sending its request's
// headers or body) is closed and can no longer start one (begin and whole
// refuse it): its caller sent nothing the verbs saw, and wire.Client may
// send it again elsewhere. A connection with a request in flight is left
// open: its verb call has written (or is
// writing) its audit records, so closing the connection under it would lose
// an answer the records account for, and a client's resend would make a
// second invocation of one call. Its answer gets evictedFlushGrace once the
// handler returns (answered); one already being flushed gets it from now.
// net/http closes each such connection after its answer (no keep-alive
// during shutdown).
func (cs *connSet) drain() {
	cs.mu.Lock()
	cs.draining = true
	var idle, flushing []*trackedConn
	for c := range cs.conns {
		switch {
		case !c.busy:
			c.evictLocked()
			idle = append(idle, c)
		case c.answered:
			flushing = append(flushing, c)
		}
	}
	cs.mu.Unlock()
	for _, c := range idle {
		_ = c.Conn.Close()
	}
	deadline := time.Now().Add(evictedFlushGrace)
	for _, c := range flushing {
		_ = c.Conn.SetWriteDeadline(deadline)
	}
}

// done marks c free of a request in flight once its response is flushed.
func (cs *connSet) done(c *trackedConn) {
	cs.mu.Lock()
	c.busy, c.answered = false, false
	c.since = cs.tick()
	cs.mu.Unlock()
}

// idle marks c idle once net/http waits for its next request, and closes
// it if it was evicted while its last answer was being flushed.
func (cs *connSet) idle(c *trackedConn) {
	cs.mu.Lock()
	c.busy, c.answered = false, false
	c.since = cs.tick()
	closeNow := c.closeWhenIdle
	c.closeWhenIdle = false
	cs.mu.Unlock()
	if closeNow {
		_ = c.Conn.Close()
		return
	}
	c.read.Store(0)
	c.timeout.Store(false)
	c.turn.Store(turnNone)
	c.awaiting.Store(true)
}

// startHandshake takes a pre-handshake slot for c, closing the oldest
// connection still in its handshake when the budget is full.
func (cs *connSet) startHandshake(c *trackedConn) {
	cs.mu.Lock()
	var victim *trackedConn
	if len(cs.handshaking) >= cs.maxHS {
		for o := range cs.handshaking {
			if victim == nil || o.since < victim.since {
				victim = o
			}
		}
		cs.endHandshakeLocked(victim)
		victim.evictLocked()
	}
	c.since = cs.tick()
	c.inHS = true
	cs.handshaking[c] = struct{}{}
	cs.events.countHandshaking(cs.kind, 1)
	cs.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
		cs.events.reject(cs.kind, ReasonHandshakeCap, victim.attrs()...)
	}
}

func (cs *connSet) endHandshakeLocked(c *trackedConn) {
	if c == nil || !c.inHS {
		return
	}
	c.inHS = false
	delete(cs.handshaking, c)
	cs.events.countHandshaking(cs.kind, -1)
}

// endHandshake gives c's pre-handshake slot back and reports whether c is
// still open (false: the budget closed it).
func (cs *connSet) endHandshake(c *trackedConn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.endHandshakeLocked(c)
	return !c.evicted
}

// closeHandshaking closes every connection still in its handshake (at
// shutdown).
func (cs *connSet) closeHandshaking() {
	cs.mu.Lock()
	var all []*trackedConn
	for c := range cs.handshaking {
		all = append(all, c)
	}
	cs.mu.Unlock()
	for _, c := range all {
		_ = c.Conn.Close()
	}
}

func (c *trackedConn) attrs() []slog.Attr {
	var out []slog.Attr
	if c.remote != "" {
		out = append(out, slog.String("remote", c.remote))
	}
	if c.ident.id != "" {
		out = append(out, slog.String("identity", c.ident.id))
	}
	return out
}
