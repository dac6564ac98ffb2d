package server

// Tests of the fair gate as a state machine: arrivals, departures and
// cancellations on a clock the test moves, no goroutine, no sleep.

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// gateClock is a gate on a clock the test moves.
type gateClock struct {
	g   *fairGate
	now time.Time
}

func newTestGate(perIdentity, shared int) *gateClock {
	c := &gateClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	c.g = newFairGate(fairLimits{perIdentity: perIdentity, shared: shared}, func() time.Time { return c.now })
	return c
}

// req is one request through the gate: its flow and its waiter (nil once
// seated at once).
type req struct {
	id string
	f  *flow
	w  *waiter
}

func (c *gateClock) arrive(id string) *req {
	f, w := c.g.arrive(nil, id, ListenerUnix)
	return &req{id: id, f: f, w: w}
}

func (r *req) isSeated() bool {
	if r.w == nil {
		return true
	}
	select {
	case <-r.w.ready:
		return true
	default:
		return false
	}
}

func (c *gateClock) leave(r *req) { c.g.leave(r.f, ListenerUnix) }

func (c *gateClock) arriveN(t *testing.T, id string, n int) []*req {
	t.Helper()
	out := make([]*req, n)
	for i := range out {
		out[i] = c.arrive(id)
	}
	return out
}

func countSeated(rs []*req) int {
	n := 0
	for _, r := range rs {
		if r.isSeated() {
			n++
		}
	}
	return n
}

func TestAnIdentityAloneTakesEverySeatUpToItsCap(t *testing.T) {
	c := newTestGate(64, 8)
	rs := c.arriveN(t, "wave", 65)
	if got := countSeated(rs); got != 64 {
		t.Fatalf("seated got %d, want 64 (the per-identity cap; the shared seats do not bound an identity alone)", got)
	}
	if rs[64].isSeated() {
		t.Fatal("the 65th request was seated past the per-identity cap")
	}
	c.leave(rs[0])
	if !rs[64].isSeated() {
		t.Fatal("the 65th request was not seated when one of its identity's seats freed")
	}
	if got := c.g.seatedBy(ListenerUnix); got != 64 {
		t.Errorf("seated on unix got %d, want 64", got)
	}
}

func TestASecondIdentityStartsAtOnceAndTheFloodShrinksToTheSharedSeats(t *testing.T) {
	c := newTestGate(64, 8)
	flood := c.arriveN(t, "flood", 64)
	innocent := c.arrive("innocent")
	if !innocent.isSeated() {
		t.Fatal("the innocent's request waited behind a flood: an identity with nothing seated must start at once")
	}
	// The flood's next requests wait: its 64 are beyond its share (8/2)
	// and beyond the shared seats.
	more := c.arriveN(t, "flood", 8)
	if got := countSeated(more); got != 0 {
		t.Fatalf("flood requests seated while another identity calls: got %d, want 0", got)
	}
	// As the flood's seated requests leave, its waiting ones are seated
	// only once fewer than 8 are seated in all (the innocent holds one).
	for i := range 57 {
		c.leave(flood[i])
		if got := countSeated(more); got != 0 {
			t.Fatalf("after %d left: %d waiting flood requests seated with %d seated in all, want 0 until fewer than 8", i+1, got, c.g.seated)
		}
	}
	c.leave(flood[57]) // 6 flood + 1 innocent seated: one seat free
	if got := countSeated(more); got != 1 {
		t.Fatalf("waiting flood requests seated got %d, want 1 (7 flood + 1 innocent = the 8 shared seats)", got)
	}
}

func TestAnIdentityWithinItsShareIsSeatedPastTheSharedSeats(t *testing.T) {
	c := newTestGate(64, 8)
	_ = c.arriveN(t, "a", 64)
	b := c.arriveN(t, "b", 4) // share 8/2 = 4, though 64 are seated
	if got := countSeated(b); got != 4 {
		t.Fatalf("b seated got %d, want its share, 4, whatever a holds", got)
	}
	if r := c.arrive("b"); r.isSeated() {
		t.Fatal("b's fifth request was seated beyond its share with every shared seat taken")
	}
}

func TestWaitingIdentitiesAreSeatedRoundRobinLeastRecentlyServedFirst(t *testing.T) {
	c := newTestGate(64, 4)
	// Three identities calling: each is guaranteed 4/3 = 1 seat, and one
	// of the 4 shared seats is left to borrow.
	var all []*req
	for _, id := range []string{"a", "b", "c"} {
		all = append(all, c.arrive(id))
	}
	// a queues three more (its first takes the free seat at once: a is now
	// the identity served last), then b and c three each.
	for _, id := range []string{"a", "b", "c"} {
		all = append(all, c.arriveN(t, id, 3)...)
	}
	borrower := all[3]
	if got := countSeated(all); got != 4 || !borrower.isSeated() {
		t.Fatalf("seated got %d, a's second %v; want 4 and a's second among them", got, borrower.isSeated())
	}
	// Each time the request in the borrowed seat leaves, the seat goes to
	// the identity waiting that was served least recently: b, c, a, b, …
	var order []string
	for range 6 {
		was := map[*req]bool{}
		for _, r := range all {
			was[r] = r.isSeated()
		}
		c.leave(borrower)
		borrower = nil
		for _, r := range all {
			if r.isSeated() && !was[r] {
				if borrower != nil {
					t.Fatalf("two requests seated for one seat freed")
				}
				borrower = r
			}
		}
		if borrower == nil {
			t.Fatalf("no request seated after %v", order)
		}
		order = append(order, borrower.id)
	}
	if want := []string{"b", "c", "a", "b", "c", "a"}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order of service got %v, want %v", order, want)
	}
}

func TestAWaitingRequestWaitsBehindAtMostOneRequestOfEachOtherIdentity(t *testing.T) {
	c := newTestGate(64, 4)
	// Three identities calling: each is guaranteed 4/3 = 1 seat, and one
	// of the 4 shared seats is left to borrow.
	a := []*req{c.arrive("a")}
	b := []*req{c.arrive("b")}
	in := c.arrive("innocent")
	// Two floods queue 100 requests each (a's first borrows the free
	// seat), then the innocent a second request.
	a = append(a, c.arriveN(t, "a", 100)...)
	b = append(b, c.arriveN(t, "b", 100)...)
	second := c.arrive("innocent")
	if !in.isSeated() || !a[1].isSeated() || second.isSeated() {
		t.Fatalf("seated: innocent's first %v (want true), a's borrower %v (want true), innocent's second %v (want false)",
			in.isSeated(), a[1].isSeated(), second.isSeated())
	}
	// Each time the request in the borrowed seat leaves, the seat goes to
	// the next identity waiting, least recently served first: the
	// innocent's second request is seated after at most one request of
	// each flood.
	floods := append(a[2:], b[1:]...)
	borrower, floodSeated := a[1], 0
	for !second.isSeated() {
		was := map[*req]bool{}
		for _, r := range floods {
			was[r] = r.isSeated()
		}
		c.leave(borrower)
		borrower = nil
		for _, r := range floods {
			if r.isSeated() && !was[r] {
				borrower = r
				floodSeated++
			}
		}
		if borrower == nil {
			break
		}
	}
	if !second.isSeated() {
		t.Fatal("the innocent's second request was never seated")
	}
	if floodSeated > 2 {
		t.Errorf("%d flood requests seated before the innocent's waiting one, want at most 2 (one of each other identity)", floodSeated)
	}
}

func TestAnIdentityCountsAsCallingUntilItsLingerEnds(t *testing.T) {
	c := newTestGate(64, 8)
	flood := c.arriveN(t, "flood", 8)
	in := c.arrive("innocent")
	c.leave(in) // its answer is out; it lingers
	waiting := c.arrive("flood")
	if waiting.isSeated() {
		t.Fatal("a flood request was seated beyond the shared seats while another identity lingers")
	}
	c.now = c.now.Add(contendedLinger - time.Nanosecond)
	c.leave(flood[0])
	c.leave(flood[1])
	if got := c.g.seated; got != 7 {
		t.Fatalf("seated got %d, want 7: still contended one nanosecond before the linger ends", got)
	}
	c.now = c.now.Add(time.Nanosecond)
	// The next departure (or arrival) ends the linger: the flood is alone
	// and its waiting request is seated.
	c.leave(flood[2])
	if !waiting.isSeated() {
		t.Fatal("the flood's waiting request was not seated once the other identity's linger ended")
	}
	if got := len(c.g.flows); got != 1 {
		t.Errorf("flows got %d, want 1: the lingering identity's flow is deleted when its linger ends", got)
	}
}

func TestAnArrivalEndsDueLingersBeforeItIsPlaced(t *testing.T) {
	c := newTestGate(64, 2)
	_ = c.arriveN(t, "flood", 2)
	in := c.arrive("innocent")
	waiting := c.arrive("flood")
	c.leave(in)
	c.now = c.now.Add(contendedLinger)
	// Nothing leaves; a third identity arrives after the innocent's
	// linger: the innocent no longer calls, so the flood (then alone
	// until the newcomer is placed) gets its waiting request seated
	// first, and the newcomer its share.
	other := c.arrive("other")
	if !waiting.isSeated() {
		t.Error("the flood's waiting request was not seated when an arrival ended the linger that held it")
	}
	if !other.isSeated() {
		t.Error("the newcomer was not seated: an identity with nothing seated starts at once")
	}
}

func TestACancelledWaiterLeavesTheQueue(t *testing.T) {
	c := newTestGate(1, 8)
	first := c.arrive("a")
	second := c.arrive("a")
	third := c.arrive("a")
	if !c.g.cancel(second.w) {
		t.Fatal("cancel of a waiting request got false, want true")
	}
	c.leave(first)
	if second.isSeated() {
		t.Error("a cancelled request was seated")
	}
	if !third.isSeated() {
		t.Fatal("the request behind a cancelled one was not seated")
	}
	if c.g.cancel(third.w) {
		t.Error("cancel of a seated request got true, want false: its caller holds the seat")
	}
	if !c.g.cancel(c.arrive("a").w) {
		t.Fatal("cancel got false")
	}
	if c.g.ring.head != nil {
		t.Error("a flow whose every waiter was cancelled is still in the ring")
	}
}

func TestRaisedLimitsSeatTheWaitingRequests(t *testing.T) {
	c := newTestGate(2, 8)
	rs := c.arriveN(t, "a", 4)
	if got := countSeated(rs); got != 2 {
		t.Fatalf("seated got %d, want 2", got)
	}
	c.g.setLimits(fairLimits{perIdentity: 3, shared: 8})
	if got := countSeated(rs); got != 3 {
		t.Fatalf("seated after raising the cap to 3 got %d, want 3", got)
	}
}

func TestSeatsAreCountedByListener(t *testing.T) {
	c := newTestGate(64, 8)
	f, _ := c.g.arrive(nil, "a", ListenerTLS)
	f2, _ := c.g.arrive(nil, "b", ListenerUnix)
	_, _ = c.g.arrive(f2, "b", ListenerUnix)
	if got, want := [2]int64{c.g.seatedBy(ListenerUnix), c.g.seatedBy(ListenerTLS)}, [2]int64{2, 1}; got != want {
		t.Fatalf("seated (unix, tls) got %v, want %v", got, want)
	}
	c.g.leave(f, ListenerTLS)
	if got := c.g.seatedBy(ListenerTLS); got != 0 {
		t.Errorf("seated on tls after leaving got %d, want 0", got)
	}
}

// TestTheGateKeepsItsInvariantsUnderAnyOrderOfEvents drives random
// arrivals, departures, cancellations and clock steps, and checks after
// each event what must always hold: the counts agree with the requests,
// no identity is over its cap, every identity below its guaranteed share
// has nothing waiting, and nothing waiting could start (dispatch is
// complete).
func TestTheGateKeepsItsInvariantsUnderAnyOrderOfEvents(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 39))
		per, shared := 1+rng.IntN(6), 1+rng.IntN(8)
		c := newTestGate(per, shared)
		ids := []string{"a", "b", "c", "d"}
		var seatedReqs, waitingReqs []*req
		for step := range 300 {
			switch op := rng.IntN(10); {
			case op < 4:
				r := c.arrive(ids[rng.IntN(len(ids))])
				if r.w == nil {
					seatedReqs = append(seatedReqs, r)
				} else {
					waitingReqs = append(waitingReqs, r)
				}
			case op < 7 && len(seatedReqs) > 0:
				i := rng.IntN(len(seatedReqs))
				c.leave(seatedReqs[i])
				seatedReqs = append(seatedReqs[:i], seatedReqs[i+1:]...)
			case op < 8 && len(waitingReqs) > 0:
				i := rng.IntN(len(waitingReqs))
				if c.g.cancel(waitingReqs[i].w) {
					waitingReqs = append(waitingReqs[:i], waitingReqs[i+1:]...)
				}
			case op < 9:
				c.now = c.now.Add(time.Duration(rng.IntN(int(2 * contendedLinger))))
			default:
				c.g.setLimits(fairLimits{perIdentity: 1 + rng.IntN(6), shared: 1 + rng.IntN(8)})
			}
			// Move the newly seated waiters over.
			for i := 0; i < len(waitingReqs); {
				if waitingReqs[i].isSeated() {
					seatedReqs = append(seatedReqs, waitingReqs[i])
					waitingReqs = append(waitingReqs[:i], waitingReqs[i+1:]...)
					continue
				}
				i++
			}
			if err := checkGate(c.g, seatedReqs, waitingReqs); err != nil {
				t.Fatalf("seed %d step %d (per %d, shared %d): %v", seed, step, per, shared, err)
			}
		}
	}
}

func checkGate(g *fairGate, seatedReqs, waitingReqs []*req) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seated != len(seatedReqs) {
		return fmt.Errorf("gate seated %d, requests seated %d", g.seated, len(seatedReqs))
	}
	if got := g.seatedBy(ListenerUnix); got != int64(len(seatedReqs)) {
		return fmt.Errorf("seated on unix %d, requests seated %d", got, len(seatedReqs))
	}
	if g.calling != len(g.flows) {
		return fmt.Errorf("calling %d, flows %d", g.calling, len(g.flows))
	}
	seatedBy, waitingBy := map[string]int{}, map[string]int{}
	for _, r := range seatedReqs {
		seatedBy[r.id]++
	}
	for _, r := range waitingReqs {
		waitingBy[r.id]++
	}
	inRing := 0
	for f := g.ring.head; f != nil; f = f.ring.next {
		inRing++
		if !f.inRing {
			return fmt.Errorf("%s in the ring without inRing", f.id)
		}
		if p := f.ring.prev; p != nil && p.served > f.served {
			return fmt.Errorf("ring out of order: %s (served %d) before %s (served %d)", p.id, p.served, f.id, f.served)
		}
	}
	if inRing != g.ring.n {
		return fmt.Errorf("ring holds %d flows, counts %d", inRing, g.ring.n)
	}
	for id, f := range g.flows {
		if f.seated != seatedBy[id] {
			return fmt.Errorf("%s: flow seated %d, requests seated %d", id, f.seated, seatedBy[id])
		}
		n := 0
		for w := f.waiters.head; w != nil; w = w.l.next {
			n++
		}
		if n != waitingBy[id] {
			return fmt.Errorf("%s: flow waiters %d, requests waiting %d", id, n, waitingBy[id])
		}
		if f.inRing != (n > 0) {
			return fmt.Errorf("%s: in ring %v with %d waiting", id, f.inRing, n)
		}
		if f.lingers != (f.seated == 0 && n == 0) {
			return fmt.Errorf("%s: lingers %v with %d seated and %d waiting", id, f.lingers, f.seated, n)
		}
		if n > 0 && g.mayStartLocked(f) {
			return fmt.Errorf("%s: %d waiting though one may start (seated %d, all %d, calling %d)", id, n, f.seated, g.seated, g.calling)
		}
		if n > 0 && f.seated < g.shareLocked() && f.seated < g.limits.perIdentity {
			return fmt.Errorf("%s: waiting below its share (%d seated, share %d)", id, f.seated, g.shareLocked())
		}
	}
	for id, n := range seatedBy {
		if g.flows[id] == nil && n > 0 {
			return fmt.Errorf("%s: %d seated without a flow", id, n)
		}
	}
	for id, n := range waitingBy {
		if g.flows[id] == nil && n > 0 {
			return fmt.Errorf("%s: %d waiting without a flow", id, n)
		}
	}
	return nil
}

// A connection caches its identity's flow; once that flow's linger has
// ended and it was deleted, the connection's next request looks the
// identity up again and is counted as calling anew.
func TestACachedFlowDeletedAfterItsLingerIsLookedUpAgain(t *testing.T) {
	c := newTestGate(64, 8)
	f, w := c.g.arrive(nil, "a", ListenerUnix)
	if w != nil {
		t.Fatal("a lone identity's request waited")
	}
	c.g.leave(f, ListenerUnix)
	c.now = c.now.Add(contendedLinger)
	_, _ = c.g.arrive(nil, "b", ListenerUnix) // ends a's linger: a's flow is deleted
	if !f.gone {
		t.Fatal("a's flow was not deleted when its linger ended")
	}
	f2, _ := c.g.arrive(f, "a", ListenerUnix)
	if f2 == f {
		t.Fatal("the deleted flow was used again")
	}
	if got := c.g.calling; got != 2 || len(c.g.flows) != 2 {
		t.Errorf("calling %d, flows %d; want 2 and 2 (a and b)", got, len(c.g.flows))
	}
	if f2.seated != 1 {
		t.Errorf("the new flow holds %d seats, want 1", f2.seated)
	}
}
