package server

// Tests of the connection budgets over in-memory pipes inside a synctest
// bubble: the eviction, refusal and timeout rules are checked as what
// happens to which connection, on fake time, so nothing sleeps and nothing
// depends on the machine's speed.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/wire"
)

// identities maps the server end of a pipe to the identity the test gives
// it (pipes have no peer credentials).
type identities struct{ m sync.Map }

func (ids *identities) identify(c net.Conn) connIdentity {
	if v, ok := ids.m.Load(c); ok {
		return connIdentity{id: v.(string)}
	}
	return connIdentity{id: "test"}
}

// dialAs queues a connection of identity id.
func dialAs(l *pipeListener, ids *identities, id string) net.Conn {
	c, s := net.Pipe()
	ids.m.Store(s, id)
	l.Queue(s)
	return c
}

// budgetServer is pipeServer with per-test identities.
func budgetServer(t *testing.T, o Options) (*Server, *pipeListener, *identities, chan error) {
	t.Helper()
	ids := &identities{}
	s, l, served := pipeServerWith(t, o, ids.identify)
	return s, l, ids, served
}

func pipeServerWith(t *testing.T, o Options, identify func(net.Conn) connIdentity) (*Server, *pipeListener, chan error) {
	t.Helper()
	return servePipes(t, o, identify, nil)
}

// servePipes serves a pipe listener (as wrap makes it, if wrap is not
// nil), o's Health and Verbs defaulting to a fresh holder and stubVerbs,
// with identify for the connections' identities.
func servePipes(t *testing.T, o Options, identify func(net.Conn) connIdentity, wrap func(*pipeListener) net.Listener) (*Server, *pipeListener, chan error) {
	t.Helper()
	if o.Health == nil {
		o.Health = newTestHolder(t)
	}
	if o.Verbs == nil {
		o.Verbs = stubVerbs{}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	s.identifyOther = identify
	l := newPipeListener()
	var served net.Listener = l
	if wrap != nil {
		served = wrap(l)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(served) }()
	return s, l, done
}

// isClosed reports whether the server has closed c: a read fails with
// something other than its own (fake-clock) deadline.
func isClosed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func newTestHolder(t *testing.T) *health.Holder {
	t.Helper()
	h, err := health.NewHolder()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func getHealth(t *testing.T, c net.Conn) int {
	t.Helper()
	return roundTrip(t, c, bufio.NewReader(c), healthRequest).StatusCode
}

func rejected(s *Server, k ListenerKind, r Reason) uint64 { return s.Stats().Rejected[k][r] }

// wantRejected fails the test unless want rejections of reason were counted
// on listeners of kind; why, if any, follows the want in the message.
func wantRejected(t *testing.T, s *Server, kind ListenerKind, reason Reason, want uint64, why string) {
	t.Helper()
	if got := rejected(s, kind, reason); got != want {
		t.Errorf("%v got %d, want %d%s", reason, got, want, why)
	}
}

// mustReject is wantRejected, stopping the test.
func mustReject(t *testing.T, s *Server, kind ListenerKind, reason Reason, want uint64, why string) {
	t.Helper()
	if got := rejected(s, kind, reason); got != want {
		t.Fatalf("%v got %d, want %d%s", reason, got, want, why)
	}
}

func TestAtTheCapTheOldestIdleConnectionIsClosedForTheNewcomer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, _, served := budgetServer(t, Options{UnixMaxConns: 2})
		a := l.Dial()
		if st := getHealth(t, a); st != 200 {
			t.Fatalf("a: status %d", st)
		}
		time.Sleep(time.Second)
		b := l.Dial()
		if st := getHealth(t, b); st != 200 {
			t.Fatalf("b: status %d", st)
		}
		synctest.Wait()
		if got := s.Stats().Connections[ListenerUnix]; got != 2 {
			t.Fatalf("connections got %d, want 2", got)
		}

		c := l.Dial()
		if st := getHealth(t, c); st != 200 {
			t.Fatalf("the newcomer got status %d, want 200", st)
		}
		synctest.Wait()
		if !isClosed(a) {
			t.Fatal("the oldest idle connection is still open")
		}
		if isClosed(b) {
			t.Fatal("the younger idle connection was closed, want the oldest")
		}
		if st := getHealth(t, b); st != 200 {
			t.Fatalf("b after the eviction: status %d", st)
		}
		wantRejected(t, s, ListenerUnix, ReasonIdleEvicted, 1, "")
		if got := s.Stats().Connections[ListenerUnix]; got != 2 {
			t.Errorf("connections got %d, want 2", got)
		}
		for _, c := range []net.Conn{a, b, c} {
			c.Close()
		}
		shutdown(t, s, served)
	})
}

// blockingMint is a verbs stub whose mints wait for release.
func blockingMint(entered chan<- struct{}, release <-chan struct{}) stubVerbs {
	return stubVerbs{mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
		entered <- struct{}{}
		<-release
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint}, nil
	}}
}

const mintBodyForPipes = `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review","spec":{"component":"review","service_name":"review","reload":"r"},"wrap_ttl":300}`

var mintRequest = "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nContent-Length: " +
	strconv.Itoa(len(mintBodyForPipes)) + "\r\n\r\n" + mintBodyForPipes

// startMint sends a mint on c and returns its status when answered.
func startMint(t *testing.T, c net.Conn) <-chan int {
	status := make(chan int, 1)
	go func() {
		if _, err := io.WriteString(c, mintRequest); err != nil {
			status <- -1
			return
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			status <- -1
			return
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		status <- res.StatusCode
	}()
	return status
}

func TestANewcomerIsRefusedOnlyWhenEverySlotHasARequestInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 4), make(chan struct{})
		s, l, _, served := budgetServer(t, Options{UnixMaxConns: 1, Verbs: blockingMint(entered, release)})
		a := l.Dial()
		status := startMint(t, a)
		<-entered

		b := l.Dial()
		synctest.Wait()
		if !isClosed(b) {
			t.Fatal("a newcomer was kept while the only slot had a request in flight")
		}
		wantRejected(t, s, ListenerUnix, ReasonConnCap, 1, "")
		wantRejected(t, s, ListenerUnix, ReasonIdleEvicted, 0, ": a busy connection was evicted")
		close(release)
		if st := <-status; st != 200 {
			t.Fatalf("the in-flight mint got %d, want 200", st)
		}
		// Now idle, the first connection gives way to the next newcomer.
		synctest.Wait()
		c := l.Dial()
		if st := getHealth(t, c); st != 200 {
			t.Fatalf("newcomer after the request finished: status %d", st)
		}
		synctest.Wait()
		if !isClosed(a) {
			t.Error("the idle connection was not evicted for the newcomer")
		}
		a.Close()
		b.Close()
		c.Close()
		shutdown(t, s, served)
	})
}

func TestOneIdentityCannotHoldEverySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 4), make(chan struct{})
		s, l, ids, served := budgetServer(t, Options{UnixMaxConns: 4, MaxConnsPerIdentity: 2, Verbs: blockingMint(entered, release)})
		x1 := dialAs(l, ids, "x")
		if st := getHealth(t, x1); st != 200 {
			t.Fatal(st)
		}
		time.Sleep(time.Second)
		y1 := dialAs(l, ids, "y")
		if st := getHealth(t, y1); st != 200 {
			t.Fatal(st)
		}
		time.Sleep(time.Second)
		x2 := dialAs(l, ids, "x")
		if st := getHealth(t, x2); st != 200 {
			t.Fatal(st)
		}
		// x is at its cap: its own oldest idle connection goes, not y's
		// (which is older still).
		x3 := dialAs(l, ids, "x")
		if st := getHealth(t, x3); st != 200 {
			t.Fatal(st)
		}
		synctest.Wait()
		if !isClosed(x1) {
			t.Fatal("x's oldest connection is still open with x at its cap")
		}
		if isClosed(y1) {
			t.Fatal("y's connection was closed for x's newcomer")
		}
		wantRejected(t, s, ListenerUnix, ReasonIdleEvicted, 1, "")

		// Both of x's slots busy: x's next newcomer is refused, y's is not.
		s2, s3 := startMint(t, x2), startMint(t, x3)
		<-entered
		<-entered
		x4 := dialAs(l, ids, "x")
		synctest.Wait()
		if !isClosed(x4) {
			t.Fatal("x got a third connection past its cap of 2 with both busy")
		}
		wantRejected(t, s, ListenerUnix, ReasonIdentityConnCap, 1, "")
		y2 := dialAs(l, ids, "y")
		if st := getHealth(t, y2); st != 200 {
			t.Fatalf("y's newcomer got %d while x was at its cap", st)
		}
		close(release)
		if a, b := <-s2, <-s3; a != 200 || b != 200 {
			t.Fatalf("x's mints got %d and %d", a, b)
		}
		// The identity map holds only identities with a connection.
		synctest.Wait()
		for _, c := range []net.Conn{x1, x2, x3, x4, y1, y2} {
			c.Close()
		}
		synctest.Wait()
		if st := s.Stats(); st.Connections[ListenerUnix] != 0 {
			t.Errorf("connections got %d after every client closed, want 0", st.Connections[ListenerUnix])
		}
		shutdown(t, s, served)
	})
}

func TestAConnectionStillSendingItsHeadersIsEvictable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, _, served := budgetServer(t, Options{UnixMaxConns: 1})
		slow := l.Dial()
		if _, err := io.WriteString(slow, "GET /v1/health HTTP/1.1\r\nHo"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c := l.Dial()
		if st := getHealth(t, c); st != 200 {
			t.Fatalf("newcomer got %d while a slowloris held the slot", st)
		}
		synctest.Wait()
		if !isClosed(slow) {
			t.Fatal("the slow connection still holds the slot")
		}
		wantRejected(t, s, ListenerUnix, ReasonPartialEvicted, 1, "")
		wantRejected(t, s, ListenerUnix, ReasonIdleEvicted, 0, ": a connection part-way through its headers is not idle")
		slow.Close()
		c.Close()
		shutdown(t, s, served)
	})
}

func TestHeaderTimeoutsAreCountedAndIdleTimeoutsAreNot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, _, served := budgetServer(t, Options{ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 7 * time.Second})
		partial := l.Dial()
		silent := l.Dial()
		if _, err := io.WriteString(partial, "GET /v1/health HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		idle := l.Dial()
		if st := getHealth(t, idle); st != 200 {
			t.Fatal(st)
		}
		// Past the header timeout: the partial and the silent connection
		// are closed and counted.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if !isClosed(partial) || !isClosed(silent) {
			t.Fatal("a connection without its headers outlived the header timeout")
		}
		wantRejected(t, s, ListenerUnix, ReasonHeaderTimeout, 2, "")
		// Past the idle timeout: the idle keep-alive connection is closed,
		// which is no rejection.
		time.Sleep(8 * time.Second)
		synctest.Wait()
		if !isClosed(idle) {
			t.Fatal("the idle connection outlived the idle timeout")
		}
		if got := rejected(s, ListenerUnix, ReasonHeaderTimeout); got != 2 {
			t.Errorf("header_timeout got %d after an idle timeout, want still 2", got)
		}
		// A kept-alive connection that starts its next request and stalls
		// is a header timeout again.
		again := l.Dial()
		if st := getHealth(t, again); st != 200 {
			t.Fatal(st)
		}
		// (net/http may answer the broken request line with a plain 400
		// before closing: read it, as a socket's buffer would take it.)
		drained := readUntilClosed(again)
		if _, err := io.WriteString(again, "GET /v1/he"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		<-drained
		synctest.Wait()

		wantRejected(t, s, ListenerUnix, ReasonHeaderTimeout, 3, "")
		// A request that closes its connection: net/http aborts its
		// background read with a past deadline, which is no header timeout.
		closing := l.Dial()
		drainedClosing := readUntilClosed(closing)
		if _, err := io.WriteString(closing, "GET /v1/health HTTP/1.1\r\nHost: registrar\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		<-drainedClosing
		synctest.Wait()
		if got := rejected(s, ListenerUnix, ReasonHeaderTimeout); got != 3 {
			t.Errorf("header_timeout got %d after a Connection: close request, want still 3", got)
		}
		for _, c := range []net.Conn{partial, silent, idle, again, closing} {
			c.Close()
		}
		shutdown(t, s, served)
	})
}

// logRecorder keeps the records logged through it.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// rejections returns the WARN rejection lines as maps of their attributes.
func (h *logRecorder) rejections() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.records {
		if r.Level != slog.LevelWarn || r.Message != "wire: rejected" {
			continue
		}
		m := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}

func TestRejectionWarningsAreRateLimitedAndCountWhatTheySuppressed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &logRecorder{}
		s, l, _, served := budgetServer(t, Options{Logger: slog.New(rec), RejectionLogInterval: 10 * time.Second, IdleTimeout: time.Minute})
		c := l.Dial()
		br := bufio.NewReader(c)
		get := "GET /nowhere HTTP/1.1\r\nHost: registrar\r\n\r\n"
		for range 5 {
			if res := roundTrip(t, c, br, get); res.StatusCode != 400 {
				t.Fatalf("status %d, want 400", res.StatusCode)
			}
		}
		lines := rec.rejections()
		if len(lines) != 1 {
			t.Fatalf("%d WARN lines for 5 rejections within the interval, want 1: %v", len(lines), lines)
		}
		if lines[0]["reason"] != "malformed" || lines[0]["listener"] != "unix" || lines[0]["suppressed"] != "0" {
			t.Errorf("first line %v, want reason malformed, listener unix, suppressed 0", lines[0])
		}
		time.Sleep(11 * time.Second)
		if res := roundTrip(t, c, br, get); res.StatusCode != 400 {
			t.Fatalf("status %d, want 400", res.StatusCode)
		}
		lines = rec.rejections()
		if len(lines) != 2 {
			t.Fatalf("%d WARN lines after the interval, want 2", len(lines))
		}
		if lines[1]["suppressed"] != "4" {
			t.Errorf("second line says %s suppressed, want 4", lines[1]["suppressed"])
		}
		wantRejected(t, s, ListenerUnix, ReasonMalformed, 6, ": every rejection is counted, logged or not")
		c.Close()
		shutdown(t, s, served)
	})
}

func TestEvictionBetweenHeadersAndHandlerStopsTheRequest(t *testing.T) {
	cs := &connSet{conns: map[*trackedConn]struct{}{}, byIdentity: map[string]int{}}
	for _, hasBody := range []bool{false, true} {
		c := &trackedConn{set: cs, evicted: true}
		if cs.begin(c, hasBody) {
			t.Fatalf("begin (body %v) admitted a request on an evicted connection", hasBody)
		}
		c.evicted = false
		if !cs.begin(c, hasBody) || c.busy != !hasBody {
			t.Fatalf("begin (body %v) refused a live connection, or got busy %v", hasBody, c.busy)
		}
	}
}

// A request whose body arrives whole on a connection the budget closed
// meanwhile never runs: whole refuses it, and a live one is in flight.
func TestEvictionWhileTheBodyArrivesStopsTheRequest(t *testing.T) {
	cs := &connSet{conns: map[*trackedConn]struct{}{}, byIdentity: map[string]int{}}
	c := &trackedConn{set: cs}
	if !cs.begin(c, true) || c.busy || c.served {
		t.Fatalf("begin of a request with a body: busy %v served %v, want neither until the body is whole", c.busy, c.served)
	}
	c.evicted = true
	if cs.whole(c) || c.busy {
		t.Fatal("whole let a request run on an evicted connection")
	}
	c.evicted = false
	if !cs.whole(c) || !c.busy || !c.served {
		t.Fatal("whole refused a live connection, or left it without a request in flight")
	}
}

// Within the identity holding the most, the victim is the oldest of the
// best rank: an older connection of a worse rank (one that has served
// nothing) gives way only after every better one. victimLocked walks a map,
// whose order changes from walk to walk: it is asked many times.
func TestTheVictimIsTheOldestOfTheBestRank(t *testing.T) {
	cs := &connSet{conns: map[*trackedConn]struct{}{}, byIdentity: map[string]int{"x": 4}}
	x := connIdentity{id: "x"}
	newest := &trackedConn{set: cs, ident: x, served: true, since: 5}
	oldest := &trackedConn{set: cs, ident: x, served: true, since: 3}
	fresh := &trackedConn{set: cs, ident: x, since: 1}      // has served nothing: rank 2
	inFlight := &trackedConn{set: cs, ident: x, busy: true} // never a victim
	for _, c := range []*trackedConn{newest, oldest, fresh, inFlight} {
		cs.conns[c] = struct{}{}
	}
	for range 64 {
		if v := cs.victimLocked(nil); v != oldest {
			t.Fatalf("victim since %d served %v, want the oldest served one (since %d)", v.since, v.served, oldest.since)
		}
	}
}

// An identity whose last connection is gone leaves no entry behind: the
// count of every identity that ever connected would otherwise grow without
// bound.
func TestAnIdentityWithoutConnectionsHoldsNoEntry(t *testing.T) {
	cs := &connSet{conns: map[*trackedConn]struct{}{}, byIdentity: map[string]int{}}
	a := &trackedConn{set: cs, ident: connIdentity{id: "x"}, admitted: true}
	b := &trackedConn{set: cs, ident: connIdentity{id: "x"}, admitted: true}
	cs.conns[a], cs.conns[b] = struct{}{}, struct{}{}
	cs.byIdentity["x"] = 2
	cs.events = nopBudgetEvents{}
	cs.releaseLocked(a)
	if n, ok := cs.byIdentity["x"]; n != 1 || !ok {
		t.Fatalf("after one of two released: x holds %d (entry %v), want 1", n, ok)
	}
	cs.releaseLocked(b)
	cs.releaseLocked(b) // idempotent
	if len(cs.byIdentity) != 0 || len(cs.conns) != 0 {
		t.Errorf("after both released: identities %v, %d connections, want none", cs.byIdentity, len(cs.conns))
	}
}

// A connection turned away is logged with its remote address and its
// identity, each only when it has one.
func TestARejectedConnectionIsLoggedWithWhatItHas(t *testing.T) {
	for _, c := range []struct {
		conn *trackedConn
		want string
	}{
		{&trackedConn{remote: "192.0.2.1:4433", ident: connIdentity{id: "unix-peer:uid=1000"}}, "[remote=192.0.2.1:4433 identity=unix-peer:uid=1000]"},
		{&trackedConn{remote: "192.0.2.1:4433"}, "[remote=192.0.2.1:4433]"},
		{&trackedConn{ident: connIdentity{id: "unix-peer:uid=1000"}}, "[identity=unix-peer:uid=1000]"},
		{&trackedConn{}, "[]"},
	} {
		if got := fmt.Sprint(c.conn.attrs()); got != c.want {
			t.Errorf("attrs() = %s, want %s", got, c.want)
		}
	}
}

type nopBudgetEvents struct{}

func (nopBudgetEvents) countConns(ListenerKind, int64)            {}
func (nopBudgetEvents) countHandshaking(ListenerKind, int64)      {}
func (nopBudgetEvents) reject(ListenerKind, Reason, ...slog.Attr) {}

// ---------------------------------------------------------------------------
// TLS, over pipes: the server's own handshakes.

// pipePKI is a CA and a server certificate for "registrar", made inside
// the bubble so that their validity matches its clock.
type pipePKI struct {
	*pkitest.CA
	server tls.Certificate
}

func newPipePKI(t *testing.T) *pipePKI {
	t.Helper()
	ca := pkitest.New(t)
	return &pipePKI{CA: ca, server: ca.Issue(t, pkitest.Options{DNS: []string{"registrar"}, Usage: x509.ExtKeyUsageServerAuth})}
}

func (p *pipePKI) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{p.server},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.Pool(), NextProtos: []string{"http/1.1"},
	}
}

// tlsPipeServer serves a TLS listener made of pipes.
func tlsPipeServer(t *testing.T, o Options, p *pipePKI) (*Server, *pipeListener, chan error) {
	t.Helper()
	return servePipes(t, o, nil, func(l *pipeListener) net.Listener {
		return &tlsListener{Listener: l, config: p.serverConfig()}
	})
}

// tlsDial handshakes over a new pipe with the given client certificate
// (none when cert is nil).
func tlsDial(l *pipeListener, p *pipePKI, cert *tls.Certificate) (*tls.Conn, error) {
	cfg := &tls.Config{RootCAs: p.Pool(), ServerName: "registrar", NextProtos: []string{"http/1.1"}}
	if cert != nil {
		// Sent whatever the server asks for: Go's client would otherwise
		// keep back a certificate of another CA, or one it cannot parse,
		// and the server would see none.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c := tls.Client(l.Dial(), cfg)
	if err := c.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// tlsRefused reports whether the server refuses a handshake with cert. In
// TLS 1.3 the client's side is done before the server has checked the
// client's certificate: the refusal arrives as an alert on the first read.
func tlsRefused(l *pipeListener, p *pipePKI, cert *tls.Certificate) bool {
	c, err := tlsDial(l, p, cert)
	if err != nil {
		return true
	}
	defer c.Close()
	var b [1]byte
	_, err = c.Read(b[:])
	return err != nil
}

func TestTLSHandshakesHaveTheirOwnBudgetAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePKI(t)
		rec := &logRecorder{}
		s, l, served := tlsPipeServer(t, Options{TLSHandshakeMaxConns: 2, TLSHandshakeTimeout: 2 * time.Second, Logger: slog.New(rec)}, p)
		// Three connections that never start their handshake: the budget
		// of 2 closes the oldest.
		var silent []net.Conn
		for range 3 {
			silent = append(silent, l.Dial())
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		if !isClosed(silent[0]) {
			t.Fatal("the oldest pre-handshake connection is still open past the budget")
		}
		wantRejected(t, s, ListenerTLS, ReasonHandshakeCap, 1, "")
		if got := s.Stats().Handshaking[ListenerTLS]; got != 2 {
			t.Errorf("handshaking got %d, want 2", got)
		}
		// An authenticated caller still gets through at once, its own
		// handshake taking the place of the oldest silent one.
		cert := p.Client(t, "spiffe://registrar.test/ctl")
		c, err := tlsDial(l, p, &cert)
		if err != nil {
			t.Fatalf("an authenticated caller's handshake failed behind the silent ones: %v", err)
		}
		if st := getHealth(t, c); st != 200 {
			t.Fatalf("status %d", st)
		}
		if got := s.Stats().Connections[ListenerTLS]; got != 1 {
			t.Errorf("established TLS connections got %d, want 1", got)
		}
		// The rest time out.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for i, sc := range silent {
			if !isClosed(sc) {
				t.Errorf("silent connection %d outlived the handshake timeout", i)
			}
		}
		if got := rejected(s, ListenerTLS, ReasonHandshakeTimeout) + rejected(s, ListenerTLS, ReasonHandshakeCap); got != 3 {
			t.Errorf("handshake_timeout + handshake_cap got %d, want 3", got)
		}
		if got := s.Stats().Handshaking[ListenerTLS]; got != 0 {
			t.Errorf("handshaking got %d after the timeouts, want 0", got)
		}
		if st := getHealth(t, c); st != 200 {
			t.Fatalf("the authenticated connection after the timeouts: status %d", st)
		}
		// Nothing unauthenticated reached the unix side of the accounting.
		if got := s.Stats().Connections[ListenerUnix]; got != 0 {
			t.Errorf("unix connections got %d, want 0", got)
		}
		c.Close()
		for _, sc := range silent {
			sc.Close()
		}
		shutdown(t, s, served)
	})
}

func TestRejectedCertificatesAndMissingIdentitiesAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePKI(t)
		rec := &logRecorder{}
		s, l, served := tlsPipeServer(t, Options{Logger: slog.New(rec)}, p)

		if !tlsRefused(l, p, nil) {
			t.Fatal("a handshake without a client certificate succeeded")
		}
		rogue := pkitest.New(t).Client(t, "spiffe://elsewhere/x")
		if !tlsRefused(l, p, &rogue) {
			t.Fatal("a handshake with another CA's certificate succeeded")
		}
		wrongEKU := p.Issue(t, pkitest.Options{URIs: []string{"spiffe://registrar.test/x"}, Usage: x509.ExtKeyUsageServerAuth})
		if !tlsRefused(l, p, &wrongEKU) {
			t.Fatal("a handshake with a server-auth-only certificate succeeded")
		}
		synctest.Wait()
		wantRejected(t, s, ListenerTLS, ReasonTLSHandshake, 3, "")
		lines := rec.rejections()
		if len(lines) != 1 || lines[0]["reason"] != "tls_handshake" || lines[0]["error"] == "" || lines[0]["remote"] == "" {
			t.Errorf("WARN lines %v, want one tls_handshake line with the error and the remote address", lines)
		}

		noSAN := p.Client(t)
		c, err := tlsDial(l, p, &noSAN)
		if err != nil {
			t.Fatal(err)
		}
		res := roundTrip(t, c, bufio.NewReader(c), mintRequest)
		if res.StatusCode != 400 {
			t.Fatalf("a caller without an identity got %d, want 400", res.StatusCode)
		}
		wantRejected(t, s, ListenerTLS, ReasonNoIdentity, 1, "")
		wantRejected(t, s, ListenerTLS, ReasonMalformed, 0, " (counted as no_identity)")
		c.Close()
		shutdown(t, s, served)
	})
}

func TestAnOverLongCertificateIdentityIsNoIdentity(t *testing.T) {
	long := "spiffe://registrar.test/" + strings.Repeat("a", wire.MaxIdentityBytes)
	u, err := url.Parse(long)
	if err != nil {
		t.Fatal(err)
	}
	cs := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{URIs: []*url.URL{u}}}}}
	if id, problem := tlsIdentity(cs); id != "" || !strings.Contains(problem, "longer than") {
		t.Fatalf("got %q, %q; want no identity and a problem naming the bound", id, problem)
	}
}

// TestAConnectionFlushingItsAnswerIsClosedOnlyOnceIdle holds mutant W1
// (issue 28): an evicted connection flushing its answer is closed once idle,
// never mid-answer.
func TestAConnectionFlushingItsAnswerIsClosedOnlyOnceIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, _, served := budgetServer(t, Options{UnixMaxConns: 1})
		a := l.Dial()
		// A pipe has no buffer: the server's flush blocks until a reads, so
		// a stays "answered, being flushed" while the newcomer arrives.
		if _, err := io.WriteString(a, healthRequest); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		b := l.Dial()
		synctest.Wait()
		mustReject(t, s, ListenerUnix, ReasonIdleEvicted, 1, ": the flushing connection was not the one to give way")
		res, err := http.ReadResponse(bufio.NewReader(a), nil)
		if err != nil {
			t.Fatalf("the evicted connection's answer was cut off: %v", err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || !strings.Contains(string(body), "registrar_health") {
			t.Fatalf("the evicted connection's answer: status %d, body %q, err %v; want it whole", res.StatusCode, body, err)
		}
		synctest.Wait()
		if !isClosed(a) {
			t.Error("the evicted connection stayed open once idle")
		}
		if st := getHealth(t, b); st != 200 {
			t.Errorf("the newcomer got %d", st)
		}
		a.Close()
		b.Close()
		shutdown(t, s, served)
	})
}

// TestAClosedConnectionGivesItsIdentitySlotBack holds a claim a hand-made
// mutant showed nothing held: a closed connection gives its identity's slot
// back.
func TestAClosedConnectionGivesItsIdentitySlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, l, ids, served := budgetServer(t, Options{UnixMaxConns: 16, MaxConnsPerIdentity: 2})
		for round := range 3 {
			x1, x2 := dialAs(l, ids, "x"), dialAs(l, ids, "x")
			for _, c := range []net.Conn{x1, x2} {
				if st := getHealth(t, c); st != 200 {
					t.Fatalf("round %d: status %d", round, st)
				}
			}
			x1.Close()
			x2.Close()
			synctest.Wait()
			if got := s.Stats().Connections[ListenerUnix]; got != 0 {
				t.Fatalf("round %d: connections got %d after both closed, want 0", round, got)
			}
		}
		wantRejected(t, s, ListenerUnix, ReasonIdentityConnCap, 0, ": closed connections still counted against x")
		wantRejected(t, s, ListenerUnix, ReasonIdleEvicted, 0, ": x was at its cap with closed connections")
		shutdown(t, s, served)
	})
}

// Issue 27, item 8: connections evicted while their answer is flushing
// once stayed open for the 30 s write timeout (300 never-reading clients
// held 315 descriptors while the gauge said 64). Now each is closed within
// evictedFlushGrace, and at most maxEvictedFlushing are finishing at once.

// openConn is a server end that counts itself open until first closed.
type openConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *openConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

func TestEvictedConnectionsThatNeverReadHoldNoDescriptorsPastTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxConns, callers = 4, 60
		s, l, ids, served := budgetServer(t, Options{UnixMaxConns: maxConns, WriteTimeout: 30 * time.Second})
		var open atomic.Int64
		var clients []net.Conn
		for i := range callers {
			// A caller that sends its request and never reads: a pipe has no
			// buffer, so the server's flush of the answer blocks for good.
			c, srv := net.Pipe()
			oc := &openConn{Conn: srv, open: &open}
			open.Add(1)
			ids.m.Store(oc, "caller-"+strconv.Itoa(i))
			l.Queue(oc)
			clients = append(clients, c)
			go io.WriteString(c, healthRequest) // fails once the server closes c
			synctest.Wait()
			if got, bound := open.Load(), int64(maxConns+maxEvictedFlushing); got > bound {
				t.Fatalf("after %d callers that never read: %d server connections open, want at most the cap %d + %d",
					i+1, got, maxConns, maxEvictedFlushing)
			}
			if got := s.Stats().Connections[ListenerUnix]; got > maxConns {
				t.Fatalf("after %d callers: gauge %d over the cap %d", i+1, got, maxConns)
			}
		}
		if got := rejected(s, ListenerUnix, ReasonIdleEvicted); got < maxEvictedFlushing {
			t.Errorf("idle_evicted got %d, want at least %d flushing connections evicted", got, maxEvictedFlushing)
		}
		if got := rejected(s, ListenerUnix, ReasonConnCap); got == 0 {
			t.Error("conn_cap got 0, want newcomers refused while the evicted ones finish")
		}

		// Within the grace (and far within the write timeout), every evicted
		// connection is closed: only the cap's worth stays open.
		time.Sleep(evictedFlushGrace)
		synctest.Wait()
		if got := open.Load(); got > maxConns {
			t.Fatalf("%v after the last eviction: %d server connections open, want at most the cap %d", evictedFlushGrace, got, maxConns)
		}
		// The slots work again: the evicted are gone and no longer counted
		// as finishing, so new callers evict the flushing ones afresh
		// rather than being refused.
		before := rejected(s, ListenerUnix, ReasonConnCap)
		for i := range maxEvictedFlushing {
			c := dialAs(l, ids, "late-"+strconv.Itoa(i))
			clients = append(clients, c)
			go io.WriteString(c, healthRequest)
			synctest.Wait()
		}
		if got := rejected(s, ListenerUnix, ReasonConnCap); got != before {
			t.Errorf("conn_cap went from %d to %d after the grace, want no refusal", before, got)
		}
		for _, c := range clients {
			c.Close()
		}
		shutdown(t, s, served)
	})
}

// countingEvents counts a budget's rejections by reason and its
// connections.
type countingEvents struct {
	mu       sync.Mutex
	rejected map[Reason]int
	conns    int64
}

func (e *countingEvents) countConns(_ ListenerKind, d int64) {
	e.mu.Lock()
	e.conns += d
	e.mu.Unlock()
}
func (e *countingEvents) countHandshaking(_ ListenerKind, _ int64) {}
func (e *countingEvents) reject(_ ListenerKind, r Reason, _ ...slog.Attr) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rejected == nil {
		e.rejected = map[Reason]int{}
	}
	e.rejected[r]++
}

// A connection whose body timed out is counted once, body_timeout: its
// slot is given back as it is counted, so a newcomer arriving before the
// connection is closed takes a free slot instead of evicting it (which
// counted it a second time, partial_evicted: 640 rejections for 639 slow
// connections in the slow-body run), and its close counts nothing more.
func TestABodyTimeoutFreesItsSlotAndIsCountedOnce(t *testing.T) {
	ev := &countingEvents{}
	cs := newConnSet(ev, ListenerUnix, budgetLimits{maxConns: 1, perIdentity: 1}, nil)
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	slow := &trackedConn{Conn: a, set: cs, ident: connIdentity{id: "unix-peer:uid=61000"}}
	if ok, _ := cs.admit(slow); !ok || !cs.begin(slow, true) {
		t.Fatal("the slow connection was not admitted")
	}
	slow.read.Store(100) // part of its body arrived
	slow.timeout.Store(true)
	cs.bodyTimedOut(slow)
	if ev.conns != 0 {
		t.Errorf("after the body timeout the listener holds %d connections, want 0", ev.conns)
	}
	newcomer := &trackedConn{Conn: b, set: cs, ident: connIdentity{id: "unix-peer:uid=61000"}}
	if ok, why := cs.admit(newcomer); !ok {
		t.Fatalf("a newcomer was refused (%v) while the timed-out connection is closing", why)
	}
	cs.closed(slow)
	if cs.whole(slow) {
		t.Error("whole let the timed-out connection's request run")
	}
	want := map[Reason]int{ReasonBodyTimeout: 1}
	if !maps.Equal(ev.rejected, want) || ev.conns != 1 {
		t.Errorf("rejections %v and %d connections held, want %v and the newcomer's 1", ev.rejected, ev.conns, want)
	}
}
