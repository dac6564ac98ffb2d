package server

// Tests of which connection gives way at a listener's cap (budget.go's
// victimLocked), over in-memory pipes inside a synctest bubble: the
// identity that holds the most connections gives one back, from among its
// connections without a request in flight; a request in flight is never
// cut.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// sendSlowBody sends mintRequest's headers and the first bytes of its body
// on c, which then never finishes it.
func sendSlowBody(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := io.WriteString(c, mintHead+mintBodyForPipes[:5]); err != nil {
		t.Fatal(err)
	}
}

// A connection still sending its body holds no request in flight: a
// newcomer at the cap takes its slot, the verb never sees the request, and
// the eviction is counted as partial_evicted.
func TestAConnectionStillSendingItsBodyIsEvictable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mints atomic.Int32
		s, l, _, served := budgetServer(t, Options{UnixMaxConns: 1, Verbs: countedMints(&mints)})
		slow := l.Dial()
		closed := closeOf(slow)
		sendSlowBody(t, slow)
		synctest.Wait()
		c := l.Dial()
		if st := getHealth(t, c); st != 200 {
			t.Fatalf("newcomer got %d while a slow body held the only slot", st)
		}
		got := <-closed
		if got.took != 0 || got.received != 0 {
			t.Errorf("the slow body's connection closed after %v with %d bytes, want at once and without an answer", got.took, got.received)
		}
		wantRejected(t, s, ListenerUnix, ReasonPartialEvicted, 1, "")
		wantRejected(t, s, ListenerUnix, ReasonIdleEvicted, 0, ": a connection part-way through its body is not idle")
		wantRejected(t, s, ListenerUnix, ReasonConnCap, 0, "")
		if n := mints.Load(); n != 0 {
			t.Errorf("the verb ran %d times for an evicted body", n)
		}
		slow.Close()
		c.Close()
		shutdown(t, s, served)
	})
}

// At the listener's cap the identity holding the most connections gives
// one back, even when another identity's connection is older; when every
// connection of that identity has a request in flight, the next identity
// gives one back, and the requests in flight are answered.
func TestAtTheListenersCapTheIdentityHoldingTheMostGivesWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlockedMint()
		defer b.unblock()
		s, l, ids, served := budgetServer(t, Options{UnixMaxConns: 4, Verbs: b.verbs()})
		// y's connection is the oldest and idle; x holds three.
		y1 := dialAs(l, ids, "y")
		if st := getHealth(t, y1); st != 200 {
			t.Fatal(st)
		}
		time.Sleep(time.Second)
		var xs []net.Conn
		for range 3 {
			x := dialAs(l, ids, "x")
			if st := getHealth(t, x); st != 200 {
				t.Fatal(st)
			}
			xs = append(xs, x)
			time.Sleep(time.Second)
		}
		z := dialAs(l, ids, "z")
		if st := getHealth(t, z); st != 200 {
			t.Fatalf("z's newcomer got %d", st)
		}
		synctest.Wait()
		if isClosed(y1) {
			t.Fatal("y's only connection gave way though x held three")
		}
		if !isClosed(xs[0]) || isClosed(xs[1]) || isClosed(xs[2]) {
			t.Fatalf("x's connections closed: %v %v %v, want only the oldest", isClosed(xs[0]), isClosed(xs[1]), isClosed(xs[2]))
		}
		mustReject(t, s, ListenerUnix, ReasonIdleEvicted, 1, "")

		// x's two remaining connections each have a mint in flight: x still
		// holds the most, but none of them may be cut; y's (older than z's)
		// gives way.
		answers := []<-chan error{mintAnswer(xs[1]), mintAnswer(xs[2])}
		<-b.entered
		<-b.entered
		w := dialAs(l, ids, "w")
		if st := getHealth(t, w); st != 200 {
			t.Fatalf("w's newcomer got %d", st)
		}
		synctest.Wait()
		if !isClosed(y1) || isClosed(z) {
			t.Fatalf("y closed %v, z closed %v: want the oldest connection of the next identity, y's", isClosed(y1), isClosed(z))
		}
		mustReject(t, s, ListenerUnix, ReasonIdleEvicted, 2, "")
		b.unblock()
		for i, a := range answers {
			if err := <-a; err != nil {
				t.Errorf("x's mint in flight %d lost its answer: %v", i, err)
			}
		}
		wantRejected(t, s, ListenerUnix, ReasonConnCap, 0, "")
		for _, c := range append(xs, y1, z, w) {
			c.Close()
		}
		shutdown(t, s, served)
	})
}

// Issue 41's attack, on pipes: two identities each hold their full share of
// slow bodies, every slot of the listener. A victim identity is answered on
// every call, each on a new connection, at once (on the bubble's clock: no
// time passes); every slow connection is closed, by an eviction or at its
// body deadline, and counted as one or the other.
func TestSlowBodiesOfTwoIdentitiesLeaveAVictimAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perIdentity, victimCalls = 4, 5
		var mints atomic.Int32
		s, l, ids, served := budgetServer(t, Options{UnixMaxConns: 2 * perIdentity, MaxConnsPerIdentity: perIdentity,
			ReadBodyTimeout: 2 * time.Second, Verbs: countedMints(&mints)})
		var slow []net.Conn
		var gone sync.WaitGroup
		var closedIn atomic.Int64 // the latest close, in ns since its connection's start
		for _, id := range []string{"a", "b"} {
			for range perIdentity {
				c := dialAs(l, ids, id)
				closed := closeOf(c)
				sendSlowBody(t, c)
				slow = append(slow, c)
				gone.Go(func() {
					took := (<-closed).took
					for {
						old := closedIn.Load()
						if int64(took) <= old || closedIn.CompareAndSwap(old, int64(took)) {
							return
						}
					}
				})
			}
		}
		synctest.Wait()
		for i := range victimCalls {
			v := dialAs(l, ids, "victim")
			start := time.Now()
			res := roundTrip(t, v, bufio.NewReader(v), mintRequest)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("victim call %d got %d", i, res.StatusCode)
			}
			if took := time.Since(start); took > 0 {
				t.Errorf("victim call %d answered after %v, want at once", i, took)
			}
			v.Close()
			synctest.Wait()
		}
		gone.Wait()
		if took := time.Duration(closedIn.Load()); took > 2*time.Second {
			t.Errorf("the last slow connection closed after %v, want within the body timeout, 2s", took)
		}
		st := s.Stats()
		byBody, byEviction := st.Rejected[ListenerUnix][ReasonBodyTimeout], st.Rejected[ListenerUnix][ReasonPartialEvicted]
		if byBody+byEviction != 2*perIdentity || byEviction == 0 {
			t.Errorf("body_timeout %d + partial_evicted %d, want every one of the %d slow connections counted, some evicted", byBody, byEviction, 2*perIdentity)
		}
		if n := mints.Load(); n != victimCalls {
			t.Errorf("%d mints ran, want the victim's %d only", n, victimCalls)
		}
		for _, c := range slow {
			c.Close()
		}
		t.Logf("%d victim calls; slow connections: %s", victimCalls, strconv.Itoa(int(byEviction))+" evicted, "+strconv.Itoa(int(byBody))+" at the body deadline")
		shutdown(t, s, served)
	})
}

// A TLS connection that finished its handshake and sent nothing since is
// idle when it gives way: what the handshake read is no part of a request.
func TestAnEvictedTLSConnectionThatSentNothingIsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePKI(t)
		s, l, served := tlsPipeServer(t, Options{TLSMaxConns: 1}, p)
		x := p.Client(t, "spiffe://registrar.test/x")
		a, err := tlsDial(l, p, &x)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		y := p.Client(t, "spiffe://registrar.test/y")
		b, err := tlsDial(l, p, &y)
		if err != nil {
			t.Fatal(err)
		}
		if st := getHealth(t, b); st != 200 {
			t.Fatalf("the newcomer got %d", st)
		}
		wantRejected(t, s, ListenerTLS, ReasonIdleEvicted, 1, "")
		wantRejected(t, s, ListenerTLS, ReasonPartialEvicted, 0, ": the handshake's bytes counted as part of a request")
		a.Close()
		b.Close()
		shutdown(t, s, served)
	})
}
