package server

// Tests of a request's turn (turn.go) over in-memory pipes inside a
// synctest bubble: what a waiting request has read, when it is answered
// RegistrarBusy, what leaves the queue, and what the Observer is told, on
// the bubble's fake clock.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// waits is an Observer that keeps every wait it is told of.
type waits struct {
	mu  sync.Mutex
	got []waitSeen
}

type waitSeen struct {
	kind ListenerKind
	wait time.Duration
}

func (o *waits) Waited(kind ListenerKind, wait time.Duration) {
	o.mu.Lock()
	o.got = append(o.got, waitSeen{kind, wait})
	o.mu.Unlock()
}

func (o *waits) seen() []waitSeen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]waitSeen(nil), o.got...)
}

// writeDone writes s on c from its own goroutine and reports when the
// server has read all of it (a pipe's write returns only then).
func writeDone(c net.Conn, s string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c, s)
		done <- err
	}()
	return done
}

func readAnswer(t *testing.T, c net.Conn) (*http.Response, []byte) {
	t.Helper()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, body
}

// A request that waits for its turn is read no further than the first
// read of the connection's buffer: a body longer than the buffer stays in
// the socket until the request is seated.
func TestAWaitingRequestIsReadNoFurtherThanOneBufferOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 2), make(chan struct{})
		obs := &waits{}
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1, Observer: obs})
		first := startMint(t, l.Dial())
		<-entered
		body := wiretest.Pad(mintBodyForPipes, 32<<10)
		c := l.Dial()
		rest := writeDone(c, "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: "+
			strconv.Itoa(len(body))+"\r\n\r\n"+body)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		select {
		case <-rest:
			t.Error("a request waiting for its turn was read whole")
			rest = writeDone(c, "") // already done: what follows needs a channel that will fire
		default:
		}
		if got := s.Stats().InFlight[ListenerUnix]; got != 1 {
			t.Errorf("in flight got %d, want 1 (the waiting request holds no seat)", got)
		}
		release <- struct{}{}
		if got := <-first; got != http.StatusOK {
			t.Fatalf("first mint got %d, want 200", got)
		}
		if err := <-rest; err != nil {
			t.Fatalf("write: %v", err)
		}
		<-entered
		release <- struct{}{}
		if res, answer := readAnswer(t, c); res.StatusCode != http.StatusOK {
			t.Fatalf("waiting mint got %d (%s), want 200", res.StatusCode, answer)
		}
		synctest.Wait()
		want := []waitSeen{{ListenerUnix, 0}, {ListenerUnix, 100 * time.Millisecond}}
		if got := obs.seen(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("waits seen got %v, want %v", got, want)
		}
		if got := s.Stats().InFlight[ListenerUnix]; got != 0 {
			t.Errorf("in flight after both answers got %d, want 0", got)
		}
		c.Close()
		shutdown(t, s, served)
	})
}

func TestARequestWaitingPastItsTimeoutIsAnsweredBusyAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 2), make(chan struct{})
		obs := &waits{}
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1,
			WaitTimeout: 500 * time.Millisecond, Observer: obs})
		first := startMint(t, l.Dial())
		<-entered
		c := l.Dial()
		start := time.Now()
		body := writeDone(c, mintRequest)
		res, answer := readAnswer(t, c)
		if took := time.Since(start); took != 500*time.Millisecond {
			t.Errorf("answered after %v, want the wait timeout, 500ms", took)
		}
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" {
			t.Errorf("status %d, Retry-After %q; want 429 and 1", res.StatusCode, res.Header.Get("Retry-After"))
		}
		var refusal wire.RefusalResponse
		if err := json.Unmarshal(answer, &refusal); err != nil {
			t.Fatalf("answer %s: %v", answer, err)
		}
		if refusal.Error.ID != wire.RegistrarBusy || refusal.Error.RetryAfter != 1 || refusal.Class != wire.Retryable || refusal.RequestID == "" {
			t.Errorf("answer %s: want a retryable RegistrarBusy with retry_after 1 and a request id", answer)
		}
		if res.Header.Get(wire.HeaderRateLimit) != "" {
			t.Errorf("RateLimit %q on an answer no bucket gave", res.Header.Get(wire.HeaderRateLimit))
		}
		if got := s.Stats().WaitTimeouts; got != [NumListenerKinds]uint64{ListenerUnix: 1} {
			t.Errorf("wait timeouts got %v, want one on unix", got)
		}
		if got := len(obs.seen()); got != 1 {
			t.Errorf("waits seen got %d, want 1: a request that timed out waiting was not served", got)
		}
		// Its body was read whole before the answer (no handler read it);
		// the connection serves on.
		if err := <-body; err != nil {
			t.Fatalf("body write: %v", err)
		}
		release <- struct{}{}
		if got := <-first; got != http.StatusOK {
			t.Fatalf("first mint got %d, want 200", got)
		}
		if got := roundTrip(t, c, bufio.NewReader(c), healthRequest).StatusCode; got != http.StatusOK {
			t.Errorf("health on the connection after its busy answer got %d, want 200", got)
		}
		select {
		case <-entered:
			t.Error("the verb ran for the request that timed out waiting")
		default:
		}
		c.Close()
		shutdown(t, s, served)
	})
}

// A request that waited past its timeout is answered RegistrarBusy only
// once its body is whole, within the body deadline, as any request is: one
// whose body trickles in (issue 41's slow bodies) is closed without an
// answer at the body deadline and counted body_timeout, not as a wait
// timeout; the wait histogram does not see it.
func TestARequestWaitingPastItsTimeoutWithABodyNeverWholeIsClosedUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 2), make(chan struct{})
		obs := &waits{}
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1,
			WaitTimeout: 500 * time.Millisecond, ReadBodyTimeout: 2 * time.Second, Observer: obs})
		first := startMint(t, l.Dial())
		<-entered
		c := l.Dial()
		closed := closeOf(c)
		// The headers and the first byte of a body that declares more.
		go io.WriteString(c, "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: 256\r\n\r\n{")
		got := <-closed
		if got.received != 0 {
			t.Errorf("the slow body's connection received %d bytes, want none (its request never whole)", got.received)
		}
		if want := 500*time.Millisecond + 2*time.Second; got.took != want {
			t.Errorf("closed after %v, want the wait timeout and then the body deadline, %v", got.took, want)
		}
		synctest.Wait()
		mustReject(t, s, ListenerUnix, ReasonBodyTimeout, 1, " (its body never came whole)")
		if got := s.Stats().WaitTimeouts; got != [NumListenerKinds]uint64{} {
			t.Errorf("wait timeouts got %v, want none: no request was answered busy", got)
		}
		release <- struct{}{}
		if got := <-first; got != http.StatusOK {
			t.Fatalf("first mint got %d, want 200", got)
		}
		if got := len(obs.seen()); got != 1 {
			t.Errorf("waits seen got %d, want 1 (the first mint only)", got)
		}
		shutdown(t, s, served)
	})
}

func TestAWaitingConnectionEvictedForANewcomerLeavesTheQueueUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mints atomic.Int32
		entered, release := make(chan struct{}, 2), make(chan struct{})
		obs := &waits{}
		s, l, ids, served := budgetServer(t, Options{Verbs: stubVerbs{mint: func(ctx context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
			mints.Add(1)
			return blockingMint(entered, release).mint(ctx, req)
		}}, UnixMaxConns: 2, MaxInFlightPerIdentity: 1, Observer: obs})
		first := startMint(t, dialAs(l, ids, "a"))
		<-entered
		waiting := dialAs(l, ids, "a")
		go io.WriteString(waiting, mintRequest)
		synctest.Wait()
		closed := closeOf(waiting)
		newcomer := dialAs(l, ids, "b")
		if got := <-closed; got.received != 0 {
			t.Errorf("the evicted waiting connection received %d bytes, want none", got.received)
		}
		// The eviction is counted after the close the caller saw (admit,
		// and net/http closes on the woken read at once): let it finish.
		synctest.Wait()
		mustReject(t, s, ListenerUnix, ReasonPartialEvicted, 1, " (the waiting request had sent its first byte)")
		if got := s.Stats().InFlight[ListenerUnix]; got != 1 {
			t.Errorf("in flight after the waiting request left got %d, want 1 (the first mint's seat only)", got)
		}
		if got := getHealth(t, newcomer); got != http.StatusOK {
			t.Errorf("newcomer's health got %d, want 200", got)
		}
		release <- struct{}{}
		if got := <-first; got != http.StatusOK {
			t.Fatalf("first mint got %d, want 200", got)
		}
		synctest.Wait()
		if got := mints.Load(); got != 1 {
			t.Errorf("mints got %d, want 1: the evicted request never ran", got)
		}
		if got := s.Stats().WaitTimeouts; got != [NumListenerKinds]uint64{} {
			t.Errorf("wait timeouts got %v, want none", got)
		}
		if got := s.Stats().InFlight[ListenerUnix]; got != 0 {
			t.Errorf("in flight after every answer got %d, want 0", got)
		}
		if got := len(obs.seen()); got != 2 {
			t.Errorf("waits seen got %d, want 2 (the first mint and the newcomer's health)", got)
		}
		newcomer.Close()
		shutdown(t, s, served)
	})
}

// A waiting request is told its connection is closed before the
// connection is (evictLocked wakes it under the budget's lock, the close
// comes after; Close wakes it first too). What it returns must end the
// connection silently: net/http answers a read error it does not take for
// a network one with a 400 of its own, which the evicted caller would get
// if the wake won the race with the close.
func TestAWaitingRequestWokenByItsConnectionsCloseIsNotAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		s, l, ids, served := budgetServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1})
		first := startMint(t, dialAs(l, ids, "a"))
		<-entered
		waiting := dialAs(l, ids, "a")
		go io.WriteString(waiting, mintRequest)
		synctest.Wait()
		tc := waitingConnOf(t, s)
		closed := closeOf(waiting)
		tc.closeGone() // the wake alone: the connection is still open
		if got := <-closed; got.received != 0 {
			t.Errorf("the woken waiting connection received %d bytes, want none", got.received)
		}
		release <- struct{}{}
		if got := <-first; got != http.StatusOK {
			t.Fatalf("first mint got %d, want 200", got)
		}
		shutdown(t, s, served)
	})
}

// waitingConnOf returns s's one connection whose request has been read
// from and waits for its turn.
func waitingConnOf(t *testing.T, s *Server) *trackedConn {
	t.Helper()
	var found []*trackedConn
	s.setsMu.Lock()
	for _, cs := range s.sets {
		cs.mu.Lock()
		for c := range cs.conns {
			if c.turn.Load() == turnNone && c.read.Load() > 0 {
				found = append(found, c)
			}
		}
		cs.mu.Unlock()
	}
	s.setsMu.Unlock()
	if len(found) != 1 {
		t.Fatalf("%d connections waiting for their turn, want 1", len(found))
	}
	return found[0]
}

// TestTheWaitCountIsTheRequestsServed: with two identities contending for
// one shared seat, some requests seated at once, some after a wait and some
// past their timeout, the Observer is told of exactly the requests that
// were served, never of one answered busy.
func TestTheWaitCountIsTheRequestsServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &waits{}
		slow := stubVerbs{mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
			time.Sleep(300 * time.Millisecond)
			return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint}, nil
		}}
		s, l, ids, served := budgetServer(t, Options{Verbs: slow, SharedInFlight: 1, MaxInFlightPerIdentity: 2,
			WaitTimeout: time.Second, Observer: obs})
		var statuses []<-chan int
		for i := range 12 {
			id := "a"
			if i%3 == 0 {
				id = "b"
			}
			statuses = append(statuses, startMint(t, dialAs(l, ids, id)))
		}
		answered, busy := 0, 0
		for _, st := range statuses {
			switch got := <-st; got {
			case http.StatusOK:
				answered++
			case http.StatusTooManyRequests:
				busy++
			default:
				t.Fatalf("status %d", got)
			}
		}
		if answered == 0 || busy == 0 {
			t.Fatalf("answered %d, busy %d: the test wants both", answered, busy)
		}
		synctest.Wait()
		seen := obs.seen()
		if len(seen) != answered {
			t.Errorf("waits seen got %d, want %d, the requests served (%d more answered busy)", len(seen), answered, busy)
		}
		var waited int
		for _, w := range seen {
			if w.wait > 0 {
				waited++
			}
		}
		if waited == 0 {
			t.Error("no request served after a wait: the test wants some")
		}
		if got := s.Stats().WaitTimeouts[ListenerUnix]; got != uint64(busy) {
			t.Errorf("wait timeouts got %d, want %d", got, busy)
		}
		shutdown(t, s, served)
	})
}

func TestWithoutFairDispatchEveryRequestStartsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 3), make(chan struct{})
		obs := &waits{}
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1,
			Observer: obs, DisableFairDispatch: true})
		var statuses []<-chan int
		for range 3 {
			statuses = append(statuses, startMint(t, l.Dial()))
		}
		for range 3 {
			<-entered // all three in their verb at once, past the cap of 1
		}
		close(release)
		for _, st := range statuses {
			if got := <-st; got != http.StatusOK {
				t.Errorf("status %d, want 200", got)
			}
		}
		if got := len(obs.seen()); got != 0 {
			t.Errorf("waits seen got %d, want 0 without fair dispatch", got)
		}
		shutdown(t, s, served)
	})
}

func TestRaisingTheCapWhileServingSeatsTheWaitingRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 2), make(chan struct{})
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1})
		first := startMint(t, l.Dial())
		<-entered
		second := startMint(t, l.Dial())
		synctest.Wait()
		select {
		case <-entered:
			t.Fatal("the second mint ran past the cap of 1")
		default:
		}
		if err := s.SetFairness(Fairness{MaxInFlightPerIdentity: 2}); err != nil {
			t.Fatal(err)
		}
		<-entered // seated by the new cap
		close(release)
		for _, st := range []<-chan int{first, second} {
			if got := <-st; got != http.StatusOK {
				t.Errorf("status %d, want 200", got)
			}
		}
		if got, want := s.Fairness(), (Fairness{2, DefaultSharedInFlight, DefaultWaitTimeout, 0}); got != want {
			t.Errorf("settings after SetFairness got %+v, want %+v (a zero value is its default)", got, want)
		}
		shutdown(t, s, served)
	})
}

func TestNegativeFairnessSettingsAreRefused(t *testing.T) {
	for _, o := range []Options{{MaxInFlightPerIdentity: -1}, {SharedInFlight: -1}, {WaitTimeout: -1}, {RefusalPace: -1}, {RefusalPace: MaxRefusalPace + 1}} {
		o.Verbs, o.Health = stubVerbs{}, newTestHolder(t)
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted a negative setting or a pace above the least retry_after", o)
		}
	}
	s, err := New(Options{Verbs: stubVerbs{}, Health: newTestHolder(t), WaitTimeout: time.Second, RefusalPace: MaxRefusalPace})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Fairness{{MaxInFlightPerIdentity: -1}, {SharedInFlight: -1}, {WaitTimeout: -1}, {RefusalPace: -1}, {RefusalPace: MaxRefusalPace + 1}} {
		if err := s.SetFairness(f); err == nil {
			t.Errorf("SetFairness(%+v) accepted a negative setting or a pace above the least retry_after", f)
		}
	}
	if got, want := s.Fairness(), (Fairness{DefaultMaxInFlightPerIdentity, DefaultSharedInFlight, time.Second, MaxRefusalPace}); got != want {
		t.Errorf("settings after refused changes got %+v, want %+v unchanged", got, want)
	}
	// A zero is the default, never a refusal: a reload that drops a key
	// puts its default back. A zero pace is none, and is kept.
	for _, f := range []Fairness{{SharedInFlight: 3, WaitTimeout: time.Second, RefusalPace: time.Millisecond}, {MaxInFlightPerIdentity: 5, WaitTimeout: time.Second}, {MaxInFlightPerIdentity: 5, SharedInFlight: 3, RefusalPace: MaxRefusalPace}} {
		if err := s.SetFairness(f); err != nil {
			t.Fatalf("SetFairness(%+v): %v, want a zero taken as its default", f, err)
		}
		want := Fairness{orDefault(f.MaxInFlightPerIdentity, DefaultMaxInFlightPerIdentity), orDefault(f.SharedInFlight, DefaultSharedInFlight), orDefault(f.WaitTimeout, DefaultWaitTimeout), f.RefusalPace}
		if got := s.Fairness(); got != want {
			t.Errorf("after SetFairness(%+v) got %+v, want %+v", f, got, want)
		}
	}
}

// A request seated after a wait yields its processor first (turn.go's
// yieldAfterHandoff); one seated at once does not.
func TestASeatedWaiterYieldsItsProcessorOnce(t *testing.T) {
	var yields atomic.Int32
	saved := yieldAfterHandoff
	yieldAfterHandoff = func() { yields.Add(1) }
	t.Cleanup(func() { yieldAfterHandoff = saved })
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 2), make(chan struct{})
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1})
		first := startMint(t, l.Dial())
		<-entered
		if got := yields.Load(); got != 0 {
			t.Errorf("yields after a request seated at once got %d, want 0", got)
		}
		second := startMint(t, l.Dial())
		synctest.Wait()
		release <- struct{}{}
		<-entered
		if got := yields.Load(); got != 1 {
			t.Errorf("yields after a request seated after a wait got %d, want 1", got)
		}
		release <- struct{}{}
		for _, st := range []<-chan int{first, second} {
			if got := <-st; got != http.StatusOK {
				t.Errorf("status %d, want 200", got)
			}
		}
		shutdown(t, s, served)
	})
}

// A request net/http answers itself (a request line it cannot parse) took
// its seat at its first byte, and never reaches the handler: the seat is
// given back as its connection closes, and the next request is seated at
// once.
func TestASeatOfARequestNetHTTPAnswersItselfIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &waits{}
		var mints atomic.Int32
		s, l, served := pipeServer(t, Options{Verbs: countedMints(&mints), MaxInFlightPerIdentity: 1, Observer: obs})
		bad := l.Dial()
		closed := closeOf(bad)
		go io.WriteString(bad, "NOT HTTP AT ALL\r\n\r\n")
		if got := <-closed; got.received == 0 {
			t.Error("net/http sent nothing before closing the connection")
		}
		synctest.Wait()
		if got := s.Stats().InFlight[ListenerUnix]; got != 0 {
			t.Fatalf("in flight after net/http's own answer got %d, want 0: the seat was not given back", got)
		}
		if got := <-startMint(t, l.Dial()); got != http.StatusOK {
			t.Fatalf("next mint got %d, want 200", got)
		}
		if got := obs.seen(); len(got) != 2 || got[1].wait != 0 {
			t.Errorf("waits seen got %v, want two, the mint's 0", got)
		}
		shutdown(t, s, served)
	})
}

// A wait for a turn longer than the header timeout does not cost the
// request its headers: the rest of them get a whole timeout after the
// wait, so the request is served, not closed as header_timeout.
func TestTheHeadersGetAWholeTimeoutAfterAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 2), make(chan struct{})
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1,
			ReadHeaderTimeout: time.Second, WaitTimeout: 5 * time.Second})
		first := startMint(t, l.Dial())
		<-entered
		second := startMint(t, l.Dial())
		time.Sleep(1500 * time.Millisecond)
		release <- struct{}{}
		<-entered
		release <- struct{}{}
		for _, st := range []<-chan int{first, second} {
			if got := <-st; got != http.StatusOK {
				t.Errorf("status %d, want 200", got)
			}
		}
		wantRejected(t, s, ListenerUnix, ReasonHeaderTimeout, 0, "")
		shutdown(t, s, served)
	})
}

// Every request of a keep-alive connection takes a turn of its own, those
// pipelined into one write too (their bytes arrive with the first request's,
// so their turn is taken as their handler starts): each is seated and
// counted once, and every seat is given back.
func TestEachRequestOfAKeepAliveConnectionTakesItsOwnTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &waits{}
		s, l, served := pipeServer(t, Options{MaxInFlightPerIdentity: 1, Observer: obs})
		c := l.Dial()
		br := bufio.NewReader(c)
		for range 3 {
			if got := roundTrip(t, c, br, healthRequest).StatusCode; got != http.StatusOK {
				t.Fatalf("health got %d, want 200", got)
			}
		}
		go io.WriteString(c, healthRequest+healthRequest)
		for range 2 {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("pipelined health got %d, want 200", res.StatusCode)
			}
		}
		synctest.Wait()
		if got := len(obs.seen()); got != 5 {
			t.Errorf("waits seen got %d, want 5: one per request", got)
		}
		if got := s.Stats().InFlight[ListenerUnix]; got != 0 {
			t.Errorf("in flight after every answer got %d, want 0", got)
		}
		c.Close()
		shutdown(t, s, served)
	})
}

// A request is parsed only once it has its turn: one net/http cannot parse,
// which it answers 400 as soon as it parses it, is answered only once the
// seat it waits for is free.
func TestARequestIsNotParsedBeforeItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		s, l, served := pipeServer(t, Options{Verbs: blockingMint(entered, release), MaxInFlightPerIdentity: 1})
		first := startMint(t, l.Dial())
		<-entered
		c := l.Dial()
		go io.WriteString(c, "NOT HTTP AT ALL\r\n\r\n")
		answer := make(chan int, 1)
		go func() {
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answer <- -1
				return
			}
			res.Body.Close()
			answer <- res.StatusCode
		}()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		select {
		case got := <-answer:
			t.Fatalf("answered %d while waiting for its turn: it was parsed before its turn", got)
		default:
		}
		release <- struct{}{}
		if got := <-first; got != http.StatusOK {
			t.Fatalf("first mint got %d, want 200", got)
		}
		if got := <-answer; got != http.StatusBadRequest {
			t.Errorf("the unparseable request got %d once seated, want net/http's 400", got)
		}
		c.Close()
		shutdown(t, s, served)
	})
}
