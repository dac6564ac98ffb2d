package server_test

// Acceptance tests of the connection budgets over real sockets: the unix
// socket and mutual TLS on 127.0.0.1 only. Every adversarial connection is
// opened by the test, bounded in number, given a deadline, and closed by
// the test's cleanup.
//
// "Answered within 1 s" is checked as the issue states it, but what makes
// it hold is structural and asserted too: the newcomer is admitted because
// an idle connection is evicted for it (idle_evicted, handshake_cap), not
// because the attack happened to be slow. A unix or loopback round trip
// takes about a millisecond, so the bound has a margin of hundreds even
// on a loaded machine with the race detector.

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// answerBound is the bound on a newcomer's answer.
const answerBound = time.Second

// ioDeadline bounds every read and write of the tests' own raw
// connections, so that no failure can hang the test.
const ioDeadline = 30 * time.Second

// mintingVerbs answers every mint first_mint and records the callers.
func mintingVerbs(t *testing.T) *fakeVerbs {
	var mu sync.Mutex
	seen := map[string]int{}
	v := &fakeVerbs{t: t}
	v.mint = func(_ context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
		mu.Lock()
		seen[req.CallerIdentity]++
		mu.Unlock()
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint,
			Material: registrar.Material{RoleID: "role", WrappedSecretID: "wrapped", ExpiresAt: time.Now().Add(time.Minute)}}, nil
	}
	return v
}

// idleConns opens n keep-alive connections with dial, each sends one
// health request, reads the answer and stays open, idle. Cleanup closes
// them.
func idleConns(t *testing.T, n int, dial func() (net.Conn, error)) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		c, err := dial()
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(ioDeadline))
		if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: registrar\r\n\r\n"); err != nil {
			continue // evicted before it could ask: that is the budget at work
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		c.SetDeadline(time.Time{})
	}
	return conns
}

// timedMint mints once through c and returns how long the answer took.
func timedMint(t *testing.T, c *wire.Client) time.Duration {
	t.Helper()
	start := time.Now()
	res, err := c.Mint(context.Background(), wiretest.GoodMint())
	took := time.Since(start)
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	if !res.OK() || res.Outcome != "first_mint" {
		t.Fatalf("mint: got %d %s %s, want first_mint", res.StatusCode, res.ErrorID, res.Detail)
	}
	return took
}

func TestTwoHundredIdleConnectionsOfOneUIDDoNotStarveTheSocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    server.Options
	}{
		{"default budgets (the identity cap binds)", server.Options{}},
		{"an identity cap above the listener cap (the listener cap binds)", server.Options{UnixMaxConns: 64, MaxConnsPerIdentity: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Verbs, o.Health = mintingVerbs(t), fixedHolder(t, 0, 0)
			s, err := server.New(o)
			if err != nil {
				t.Fatal(err)
			}
			path := serveUnix(t, s)
			idleConns(t, 200, func() (net.Conn, error) { return net.Dial("unix", path) })

			st := s.Stats()
			limit := int64(min(orDefault(o.UnixMaxConns, server.DefaultUnixMaxConns), orDefault(o.MaxConnsPerIdentity, server.DefaultMaxConnsPerIdentity)))
			if got := st.Connections[server.ListenerUnix]; got > limit {
				t.Fatalf("one uid holds %d connections, want at most %d", got, limit)
			}
			evicted := st.Rejected[server.ListenerUnix][server.ReasonIdleEvicted]
			if evicted < uint64(200-limit) {
				t.Fatalf("idle_evicted %d after 200 connections, want at least %d", evicted, 200-limit)
			}

			// A newcomer of the same uid.
			c := wire.NewUnixClient(path, wire.WithTimeout(ioDeadline))
			defer c.CloseIdleConnections()
			if took := timedMint(t, c); took > answerBound {
				t.Errorf("same-uid newcomer answered after %v, want within %v", took, answerBound)
			}
			if got := s.Stats().Rejected[server.ListenerUnix][server.ReasonIdleEvicted]; got <= evicted && int64(200) >= limit {
				t.Errorf("idle_evicted stayed %d: the newcomer was not admitted by eviction", got)
			}

			// A newcomer of another uid (a child process; needs root).
			mintAsOtherUID(t, path)
		})
	}
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// helperUID is the uid the other-uid caller runs as (nobody).
const helperUID = 65534

// mintAsOtherUID runs this test binary as uid 65534 to mint once over the
// socket and checks it was answered within the bound. The socket's
// directory and the socket are opened to that uid for the test only.
func mintAsOtherUID(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: the other-uid caller is skipped (the same-uid one ran)")
		return
	}
	dir := path[:strings.LastIndexByte(path, '/')]
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o755}, {path, 0o666}} {
		if err := os.Chmod(p.path, p.mode); err != nil {
			t.Fatal(err)
		}
	}
	for d := dir; d != "/" && d != "."; d = d[:max(strings.LastIndexByte(d, '/'), 1)] {
		fi, err := os.Stat(d)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o001) // traversable by the helper: t.TempDir's parents are 0700
		}
		if d == "/tmp" {
			break
		}
	}
	// The test binary's own directory is private to root: run a copy.
	bin := copyExecutable(t)
	cmd := exec.Command(bin, "-test.run=^TestHelperMintOverSocket$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WIRE_HELPER_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: helperUID, Gid: helperUID}}
	cmd.WaitDelay = ioDeadline
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("other-uid caller: %v\n%s", err, out)
	}
	var took time.Duration
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "MINT_TOOK "); ok {
			took, _ = time.ParseDuration(strings.TrimSpace(v))
		}
	}
	if took == 0 {
		t.Fatalf("other-uid caller did not report its mint:\n%s", out)
	}
	t.Logf("uid %d newcomer answered in %v", helperUID, took)
	if took > answerBound {
		t.Errorf("other-uid newcomer answered after %v, want within %v", took, answerBound)
	}
}

// copyExecutable copies the running test binary to a directory the
// helper uid may enter; cleanup removes it.
func copyExecutable(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "wire-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := dir + "/wire.test"
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestHelperMintOverSocket is the other-uid caller; it does nothing
// unless run by mintAsOtherUID.
func TestHelperMintOverSocket(t *testing.T) {
	path := os.Getenv("WIRE_HELPER_SOCKET")
	if path == "" {
		t.Skip("helper process only")
	}
	if os.Geteuid() != helperUID {
		t.Fatalf("helper runs as uid %d, want %d", os.Geteuid(), helperUID)
	}
	c := wire.NewUnixClient(path, wire.WithTimeout(ioDeadline))
	took := timedMint(t, c)
	fmt.Printf("MINT_TOOK %s\n", took)
}

// tlsServer serves s with mutual TLS on 127.0.0.1.
func tlsServer(t *testing.T, s *server.Server, pki *testPKI) string {
	t.Helper()
	l, err := server.ListenTLS("127.0.0.1:0", pki.certFile, pki.keyFile, pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, s, l)
	return l.Addr().String()
}

func TestTwoHundredIdleMutualTLSConnectionsOfOneIdentityDoNotStarveAnother(t *testing.T) {
	pki := newTestPKI(t)
	v := mintingVerbs(t)
	s := newServer(t, v, fixedHolder(t, 0, 0))
	addr := tlsServer(t, s, pki)
	holder := pki.Client(t, "spiffe://registrar.test/holder")
	other := pki.Client(t, "spiffe://registrar.test/other")
	cfg := func(c tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{c}, NextProtos: []string{"http/1.1"}}
	}
	d := &net.Dialer{Timeout: ioDeadline}
	idleConns(t, 200, func() (net.Conn, error) { return tls.DialWithDialer(d, "tcp", addr, cfg(holder)) })

	st := s.Stats()
	if got := st.Connections[server.ListenerTLS]; got > server.DefaultMaxConnsPerIdentity {
		t.Fatalf("one certificate identity holds %d connections, want at most %d", got, server.DefaultMaxConnsPerIdentity)
	}
	if got := st.Rejected[server.ListenerTLS][server.ReasonIdleEvicted]; got < 200-server.DefaultMaxConnsPerIdentity {
		t.Fatalf("idle_evicted %d, want at least %d", got, 200-server.DefaultMaxConnsPerIdentity)
	}
	for _, tc := range []struct {
		name string
		cert tls.Certificate
	}{{"the second certificate's caller", other}, {"the holder's own newcomer", holder}} {
		t.Run(tc.name, func(t *testing.T) {
			c := wire.NewTLSClient(addr, cfg(tc.cert), wire.WithTimeout(ioDeadline))
			defer c.CloseIdleConnections()
			if took := timedMint(t, c); took > answerBound {
				t.Errorf("handshake and mint took %v, want within %v", took, answerBound)
			}
		})
	}
}

// latencyP99 returns the 99th percentile of ds.
func latencyP99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*99+99)/100-1)]
}

func TestNeverHandshakingAndSlowlorisConnectionsDoNotDelayRealCallers(t *testing.T) {
	pki := newTestPKI(t)
	s := newServer(t, mintingVerbs(t), fixedHolder(t, 0, 0))
	path := serveUnix(t, s)
	addr := tlsServer(t, s, pki)

	var attack []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range attack {
			c.Close()
		}
	})
	// 500 TCP connections that never start the handshake.
	for i := range 500 {
		c, err := net.DialTimeout("tcp", addr, ioDeadline)
		if err != nil {
			t.Fatalf("TCP connection %d: %v", i, err)
		}
		attack = append(attack, c)
	}
	// 200 slowloris connections on the socket, each having sent the start
	// of its headers; a dripper adds one byte to each every 100 ms while
	// the callers run (and stops when the test does).
	const slowHeaders = "POST /v1/mint HTTP/1.1\r\nHost: registrar\r\nContent-Type: application/json\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa"
	var slow []net.Conn
	for i := range 200 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("slowloris connection %d: %v", i, err)
		}
		c.SetWriteDeadline(time.Now().Add(ioDeadline))
		c.Write([]byte(slowHeaders[:1]))
		slow = append(slow, c)
	}
	mu.Lock()
	attack = append(attack, slow...)
	mu.Unlock()
	stop := make(chan struct{})
	var dripping sync.WaitGroup
	dripping.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, c := range slow {
				c.Write([]byte{slowHeaders[n%len(slowHeaders)]})
			}
		}
	})
	defer func() {
		close(stop)
		dripping.Wait()
	}()

	// Unix callers, each on a new connection.
	unixClient := wire.NewUnixClient(path, wire.WithoutKeepAlive(), wire.WithTimeout(ioDeadline))
	var lat []time.Duration
	for range 50 {
		lat = append(lat, timedMint(t, unixClient))
	}
	if p99 := latencyP99(lat); p99 > answerBound {
		t.Errorf("unix callers' p99 %v under the attack, want under %v", p99, answerBound)
	}
	// An mTLS caller: handshake and mint.
	cert := pki.Client(t, "spiffe://registrar.test/ctl")
	tc := wire.NewTLSClient(addr, &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{cert}}, wire.WithTimeout(ioDeadline))
	defer tc.CloseIdleConnections()
	if took := timedMint(t, tc); took > answerBound {
		t.Errorf("mTLS handshake and mint took %v under the attack, want within %v", took, answerBound)
	}

	// Why it holds: the pre-handshake budget shed the silent connections
	// oldest first, and the slow ones gave way to the callers.
	st := s.Stats()
	if got := st.Handshaking[server.ListenerTLS]; got > server.DefaultTLSHandshakeMaxConns {
		t.Errorf("%d connections in their handshake, want at most %d", got, server.DefaultTLSHandshakeMaxConns)
	}
	if got := st.Rejected[server.ListenerTLS][server.ReasonHandshakeCap]; got < 500-server.DefaultTLSHandshakeMaxConns {
		t.Errorf("handshake_cap %d, want at least %d", got, 500-server.DefaultTLSHandshakeMaxConns)
	}
	// Part-way through their headers when evicted (idle if the server had
	// read none of them yet).
	if got := st.Rejected[server.ListenerUnix][server.ReasonPartialEvicted] + st.Rejected[server.ListenerUnix][server.ReasonIdleEvicted]; got < 200-server.DefaultMaxConnsPerIdentity {
		t.Errorf("partial_evicted + idle_evicted %d on the socket, want at least %d", got, 200-server.DefaultMaxConnsPerIdentity)
	}
	if got := st.Connections[server.ListenerUnix]; got > server.DefaultMaxConnsPerIdentity {
		t.Errorf("%d unix connections open, want at most %d", got, server.DefaultMaxConnsPerIdentity)
	}
	t.Logf("unix p99 %v, stats %+v", latencyP99(lat), summary(st))
}

func summary(st server.Stats) string {
	var b strings.Builder
	for k := range server.NumListenerKinds {
		fmt.Fprintf(&b, "%s: conns %d handshaking %d", k, st.Connections[k], st.Handshaking[k])
		for r := range server.NumReasons {
			if n := st.Rejected[k][r]; n > 0 {
				fmt.Fprintf(&b, " %s=%d", r, n)
			}
		}
		b.WriteString("; ")
	}
	return b.String()
}

func TestOverLongStoredFieldsAreMalformedAndNeverReachTheVerbs(t *testing.T) {
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	for _, b := range wire.FieldBounds() {
		t.Run(b.Member, func(t *testing.T) {
			req := wiretest.GoodMint()
			long := strings.Repeat("a", b.MaxBytes+1)
			switch b.Member {
			case "service_name":
				req.ServiceName = long
			case "host":
				req.Host = long
			case "component":
				req.Component = long
			case "spec.component":
				req.Spec.Component = long
			case "spec.service_name":
				req.Spec.ServiceName = long
			case "spec.reload":
				req.Spec.Reload = long
			case "idempotency_key":
				req.IdempotencyKey = long
			default:
				t.Fatalf("no case for %s", b.Member)
			}
			res, err := c.Mint(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 400 || res.ErrorID != wire.RequestMalformed || !strings.HasPrefix(res.Detail, b.Member+":") ||
				!strings.Contains(res.Detail, strconv.Itoa(b.MaxBytes)) {
				t.Fatalf("got %d %s %q, want 400 RequestMalformed naming %s and its bound", res.StatusCode, res.ErrorID, res.Detail, b.Member)
			}
			// At the bound exactly it is not malformed (the verbs, here a
			// seam that fails the test, would be reached): checked by the
			// decoder tests; the detail never carries the value.
			if strings.Contains(res.Detail, "aaaa") {
				t.Errorf("detail %q repeats the value", res.Detail)
			}
		})
	}
	if got := s.Stats().Rejected[server.ListenerUnix][server.ReasonMalformed]; got != uint64(len(wire.FieldBounds())) {
		t.Errorf("malformed got %d, want %d", got, len(wire.FieldBounds()))
	}
}

// TestAClientBusierThanItsIdentityCapLosesNoCall: a caller running more
// calls in parallel than registrar.max_conns_per_identity keeps more
// keep-alive connections than the cap, so each newcomer evicts one of its
// own idle connections, often the very one the client is about to reuse.
// The client sends such a call again on a fresh connection (the verbs are
// idempotent, and an idle connection held no request), so every call is
// answered and none fails with a reset or EOF.
func TestAClientBusierThanItsIdentityCapLosesNoCall(t *testing.T) {
	verbs := &fakeVerbs{t: t, mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint,
			Material: registrar.Material{RoleID: "role", WrappedSecretID: "wrapped", ExpiresAt: time.Now().Add(time.Minute)}}, nil
	}}
	const workers, rounds = 2, 60
	s, err := server.New(server.Options{Verbs: verbs, Health: fixedHolder(t, 0, 0), MaxConnsPerIdentity: workers})
	if err != nil {
		t.Fatal(err)
	}
	// Two clients of one identity (two tools of one uid), each keeping its
	// own pool of idle connections, take turns: never more calls in flight
	// than the cap, but more pooled connections than the cap, so each
	// turn's connections evict the other client's idle ones, which that
	// client reuses on its next turn.
	path := serveUnix(t, s)
	clients := []*wire.Client{
		wire.NewUnixClient(path, wire.WithTimeout(30*time.Second)),
		wire.NewUnixClient(path, wire.WithTimeout(30*time.Second)),
	}
	errs := make(chan error, workers*rounds)
	for r := range rounds {
		c := clients[r%len(clients)]
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				res, err := c.Mint(context.Background(), wiretest.GoodMint())
				if err != nil {
					errs <- err
					return
				}
				if !res.OK() {
					t.Errorf("got %d %s, want an answer", res.StatusCode, res.ErrorID)
				}
			})
		}
		wg.Wait()
	}
	close(errs)
	n := 0
	for err := range errs {
		if n == 0 {
			t.Errorf("a call failed on the transport: %v", err)
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of %d calls failed on the transport", n, workers*rounds)
	}
	if got := verbs.calls.Load(); got != workers*rounds {
		t.Errorf("the verbs ran %d times, want %d: a call was lost or run twice", got, workers*rounds)
	}
	if ev := s.Stats().Rejected[server.ListenerUnix][server.ReasonIdleEvicted]; ev == 0 {
		t.Errorf("no idle connection was evicted: the test did not contest the cap")
	}
}
