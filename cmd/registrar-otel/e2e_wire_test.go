package main

// End-to-end tests of the daemon under attack and at fleet scale. First the
// connection budgets: the real daemon with its unix socket and a mutual-TLS
// listener on 127.0.0.1, attacked by bounded sets of connections the test
// opens and closes; its memory read from /proc/<pid>/status, its
// rejections from /metrics and its log. Then, each in its part below: the
// descriptor attacks of issue 27, the mTLS identity attacks, the fleet-scale
// floods and wave, and kill -9 during a flood.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

// e2eIODeadline bounds every read and write of the tests' raw connections.
const e2eIODeadline = 30 * time.Second

// rssSlack is the issue's bound on the daemon's growth over one attack.
const rssSlack = 32 << 20

// e2ePKI is a CA and its server certificate for 127.0.0.1, as files.
type e2ePKI struct {
	*pkitest.CA
	caFile, certFile, keyFile string
}

// tlsLines are the [registrar] lines of a TLS listener on addr with this
// PKI's server certificate, key and client CA.
func (p *e2ePKI) tlsLines(addr string) string {
	return tlsListenLines(addr, p.certFile, p.keyFile, p.caFile)
}

func newE2EPKI(t *testing.T) *e2ePKI {
	t.Helper()
	p := &e2ePKI{CA: pkitest.New(t)}
	p.caFile, p.certFile, p.keyFile = p.ServerFiles(t)
	return p
}

func (p *e2ePKI) clientConfig(cert *tls.Certificate) *tls.Config {
	cfg := &tls.Config{RootCAs: p.Pool(), NextProtos: []string{"http/1.1"}}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

var tlsAddrRE = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// clientsPolicy admits every certificate holder: with caller policies in
// force, a caller that is no operator and matches no policy is refused
// no_policy. Its callers are sized by the [registrar] keys, under the
// policy name "clients".
const clientsPolicy = `
[registrar.callers.clients]
identity_prefixes = ["registrar-client:"]
`

// withClients is extra with clientsPolicy after it, unless extra names
// caller policies of its own.
func withClients(extra string) string {
	if strings.Contains(extra, "[registrar.callers.") {
		return extra
	}
	return extra + clientsPolicy
}

// startTLSDaemon starts the daemon with a mutual-TLS listener on a free
// port of 127.0.0.1 and returns it with the listener's address. Unless
// extra names caller policies, every certificate holder takes
// clientsPolicy.
func startTLSDaemon(t *testing.T, p *e2ePKI, extra string) (*daemonProc, string) {
	t.Helper()
	return startTLSDaemonWith(t, p, extra, "")
}

// startTLSDaemonWith is startTLSDaemon with tables (TOML tables, such as
// [openbao]) added after [telemetry].
func startTLSDaemonWith(t *testing.T, p *e2ePKI, extra, tables string) (*daemonProc, string) {
	t.Helper()
	d := startDaemon(t, p.tlsLines("127.0.0.1:0")+withClients(extra), tables)
	addr := tlsAddrRE.FindString(strings.ReplaceAll(d.ready, d.metricsURL, ""))
	if addr == "" {
		t.Fatalf("no TLS listener address in %q", d.ready)
	}
	return d, addr
}

// rss is the daemon's resident set in bytes, from /proc/<pid>/status.
func (d *daemonProc) rss() int64 {
	d.t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		d.t.Fatalf("reading the daemon's status: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				d.t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	d.t.Fatal("no VmRSS in the daemon's status")
	return 0
}

// scrape returns the daemon's /metrics exposition.
func (d *daemonProc) scrape() string {
	d.t.Helper()
	return getBody(d.t, &http.Client{Timeout: e2eIODeadline}, d.metricsURL)
}

// rejected reads registrar_wire_rejected_total{listener,reason}.
func rejectedIn(exposition, listener, reason string) float64 {
	re := regexp.MustCompile(`(?m)^registrar_wire_rejected_total\{[^}]*listener="` + listener + `"[^}]*reason="` + reason + `"[^}]*\} ([0-9.e+]+)`)
	m := re.FindStringSubmatch(exposition)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// attack is a bounded set of connections the test closes.
type attack struct{ conns []net.Conn }

func (a *attack) close() {
	for _, c := range a.conns {
		c.Close()
	}
	a.conns = nil
}

// idle opens n connections that each ask for /v1/health once and stay.
func (a *attack) idle(t *testing.T, n int, dial func() (net.Conn, error)) {
	t.Helper()
	for i := range n {
		c, err := dial()
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		a.conns = append(a.conns, c)
		c.SetDeadline(time.Now().Add(e2eIODeadline))
		if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: registrar\r\n\r\n"); err != nil {
			continue
		}
		if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		c.SetDeadline(time.Time{})
	}
}

// reviewMint is a well-formed mint of the review component on host.
func reviewMint(host string, instance uint32) wire.MintRequest {
	return wire.MintRequest{ServiceName: "review", Host: host, Instance: instance, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"}, WrapTTL: 60}
}

func mintOK(t *testing.T, c *wire.Client) time.Duration {
	t.Helper()
	return mintOKOn(t, c, "h1")
}

// mintOKOn is mintOK on host: callers of two identities mint on hosts of
// their own, since a registration is its first minter's (not_owner for
// the other).
func mintOKOn(t *testing.T, c *wire.Client, host string) time.Duration {
	t.Helper()
	req := reviewMint(host, 1)
	start := time.Now()
	res, err := c.Mint(context.Background(), req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	if !res.OK() {
		t.Fatalf("mint: %d %s %s", res.StatusCode, res.ErrorID, res.Detail)
	}
	return took
}

func healthOK(t *testing.T, c *wire.Client) time.Duration {
	t.Helper()
	start := time.Now()
	res, err := c.Health(context.Background())
	took := time.Since(start)
	if err != nil || !res.OK() {
		t.Fatalf("health: %+v, %v", res, err)
	}
	return took
}

func TestEndToEndAttacksLeaveTheDaemonsMemoryAndCallersAlone(t *testing.T) {
	p := newE2EPKI(t)
	d, addr := startTLSDaemon(t, p, "")
	holder := p.Client(t, "spiffe://registrar.test/holder")
	caller := p.Client(t, "spiffe://registrar.test/caller")
	unixCaller := wire.NewUnixClient(d.socket, wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
	tlsCaller := func() *wire.Client {
		return wire.NewTLSClient(addr, p.clientConfig(&caller), wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
	}
	mintOK(t, unixCaller) // warm up: first mint, bbolt file, pools
	mintOKOn(t, tlsCaller(), "h2")
	dialer := &net.Dialer{Timeout: e2eIODeadline}

	for _, tc := range []struct {
		name string
		run  func(a *attack)
	}{
		{"200 idle unix connections of one uid", func(a *attack) {
			a.idle(t, 200, func() (net.Conn, error) { return net.Dial("unix", d.socket) })
		}},
		{"200 idle mTLS connections of one certificate", func(a *attack) {
			a.idle(t, 200, func() (net.Conn, error) { return tls.DialWithDialer(dialer, "tcp", addr, p.clientConfig(&holder)) })
		}},
		{"500 TCP connections that never handshake", func(a *attack) {
			for i := range 500 {
				c, err := net.DialTimeout("tcp", addr, e2eIODeadline)
				if err != nil {
					t.Fatalf("TCP connection %d: %v", i, err)
				}
				a.conns = append(a.conns, c)
			}
		}},
		{"200 slowloris connections", func(a *attack) {
			for i := range 200 {
				c, err := net.Dial("unix", d.socket)
				if err != nil {
					t.Fatalf("slowloris connection %d: %v", i, err)
				}
				c.SetWriteDeadline(time.Now().Add(e2eIODeadline))
				io.WriteString(c, "POST /v1/mint HTTP/1.1\r\nHost: r")
				a.conns = append(a.conns, c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := d.rss()
			a := &attack{}
			defer a.close()
			tc.run(a)
			peak := d.rss()
			// The transport's share is bounded on /v1/health (no fsync);
			// a mint adds the audit and registry fsyncs, whose time is
			// the disk's, so mints are required to succeed and are
			// reported. (The wire package's acceptance tests bound the
			// mint itself, with verbs that do not touch a disk.)
			var lat, mints []time.Duration
			for range 20 {
				lat = append(lat, healthOK(t, unixCaller))
				mints = append(mints, mintOK(t, unixCaller))
			}
			tlsTook := healthOK(t, tlsCaller())
			mintOKOn(t, tlsCaller(), "h2")
			a.close()
			after := d.rss()
			t.Logf("RSS before %d KiB, under attack %d KiB, after %d KiB; unix health max %v, unix mint max %v, mTLS handshake+health %v",
				before>>10, peak>>10, after>>10, maxDuration(lat), maxDuration(mints), tlsTook)
			if peak-before > rssSlack || after-before > rssSlack {
				t.Errorf("RSS grew by %d KiB under the attack and %d KiB after it, want at most %d KiB",
					(peak-before)>>10, (after-before)>>10, rssSlack>>10)
			}
			if m := maxDuration(lat); m > time.Second {
				t.Errorf("a unix caller waited %v under the attack, want under 1 s", m)
			}
			if tlsTook > time.Second {
				t.Errorf("the mTLS caller's handshake and answer took %v, want within 1 s", tlsTook)
			}
		})
	}
	exp := d.scrape()
	for _, want := range []struct{ listener, reason string }{
		{"unix", "idle_evicted"}, {"tls", "idle_evicted"}, {"tls", "handshake_cap"},
	} {
		if v := rejectedIn(exp, want.listener, want.reason); v <= 0 {
			t.Errorf("registrar_wire_rejected_total{listener=%q,reason=%q} = %v after the attacks, want > 0", want.listener, want.reason, v)
		}
	}
	// hundreds of rejections, a handful of WARN lines
	if n := strings.Count(d.logs.String(), `reason=handshake_cap`); n == 0 || n > 5 {
		t.Errorf("%d WARN lines for handshake_cap, want at least one and no flood", n)
	}
	d.stop()
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// readUntilClosedBy reads c until the daemon closes it (bounded).
func readUntilClosedBy(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(e2eIODeadline))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the daemon did not close the connection within %v", e2eIODeadline)
		}
	}
}

func TestEndToEndEveryRejectionIsCountedAndLoggedWithoutFlooding(t *testing.T) {
	p := newE2EPKI(t)
	d, addr := startTLSDaemon(t, p, "tls_handshake_timeout_ms = 300\nread_header_timeout_ms = 300\n")
	d.scrape()

	// tls_handshake: no client certificate, another CA's.
	for _, cfg := range []*tls.Config{p.clientConfig(nil), func() *tls.Config {
		c := pkitest.New(t).Client(t, "spiffe://elsewhere/x")
		cfg := p.clientConfig(&c)
		return cfg
	}()} {
		c, err := tls.Dial("tcp", addr, cfg)
		if err == nil {
			readUntilClosedBy(t, c) // TLS 1.3: the refusal arrives after the client's side
			c.Close()
		}
	}
	// handshake_timeout: a TCP connection that says nothing.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	readUntilClosedBy(t, silent)
	silent.Close()
	// header_timeout: a socket connection that never finishes its headers.
	slow, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(slow, "GET /v1/health HTTP/1.1\r\n")
	readUntilClosedBy(t, slow)
	slow.Close()
	// no_identity: a certificate without a SAN; malformed: an unknown path.
	noSAN := p.Client(t)
	res, err := wire.NewTLSClient(addr, p.clientConfig(&noSAN)).Health(context.Background())
	if err != nil || !res.OK() {
		t.Fatalf("health without an identity: %+v, %v (health needs none)", res, err)
	}
	mres, err := wire.NewTLSClient(addr, p.clientConfig(&noSAN)).Mint(context.Background(), wire.MintRequest{ServiceName: "review"})
	if err != nil || mres.ErrorID != wire.RequestMalformed {
		t.Fatalf("mint without an identity: %+v, %v, want RequestMalformed", mres, err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}, Timeout: e2eIODeadline}
	for range 3 {
		r, err := hc.Get("http://registrar/v1/nowhere")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}

	exp := d.scrape()
	for _, want := range []struct {
		listener, reason string
		atLeast          float64
	}{
		{"tls", "tls_handshake", 2}, {"tls", "handshake_timeout", 1}, {"unix", "header_timeout", 1},
		{"tls", "no_identity", 1}, {"unix", "malformed", 3},
	} {
		if v := rejectedIn(exp, want.listener, want.reason); v < want.atLeast {
			t.Errorf("registrar_wire_rejected_total{listener=%q,reason=%q} = %v, want at least %v", want.listener, want.reason, v, want.atLeast)
		}
	}
	logs := d.logs.String()
	for _, reason := range []string{"tls_handshake", "handshake_timeout", "header_timeout", "no_identity", "malformed"} {
		if !strings.Contains(logs, "reason="+reason) {
			t.Errorf("no WARN line for %s in the daemon log", reason)
		}
	}
	// Three malformed requests within the interval: one line.
	if n := strings.Count(logs, "listener=unix reason=malformed"); n != 1 {
		t.Errorf("%d WARN lines for 3 malformed requests within the interval, want 1", n)
	}
	d.stop()
}

func TestEndToEndAnOverLongFieldNeverReachesTheRegistry(t *testing.T) {
	d := startDaemon(t, "", "")
	c := wire.NewUnixClient(d.socket, wire.WithTimeout(e2eIODeadline))
	mintOK(t, c)
	db := filepath.Join(d.dir, "lib", "registrar.db")
	before, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		member string
		mut    func(*wire.MintRequest)
	}{
		{"spec.reload", func(r *wire.MintRequest) { r.Spec.Reload = strings.Repeat("r", 60<<10) }},
		{"idempotency_key", func(r *wire.MintRequest) { r.IdempotencyKey = strings.Repeat("k", 200) }},
		{"host", func(r *wire.MintRequest) { r.Host = strings.Repeat("h", 300) }},
	} {
		req := wire.MintRequest{ServiceName: "review", Host: "h2", Instance: 2, Component: "review",
			Spec: wire.Spec{Component: "review", ServiceName: "review", Reload: "r"}, WrapTTL: 60}
		tc.mut(&req)
		res, err := c.Mint(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 400 || res.ErrorID != wire.RequestMalformed || !strings.HasPrefix(res.Detail, tc.member+":") {
			t.Fatalf("%s: got %d %s %q, want 400 RequestMalformed naming %s", tc.member, res.StatusCode, res.ErrorID, res.Detail, tc.member)
		}
	}
	d.stop()
	after, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() {
		t.Errorf("the registry grew from %d to %d bytes on refused requests", before.Size(), after.Size())
	}
	code, rep := d.scan()
	if code != 0 || rep.Records.Intent != 1 || rep.Records.Outcome != 1 {
		t.Errorf("audit scan: exit %d, records %+v; want only the one good mint recorded", code, rep.Records)
	}
}

// The attack of issue 27, item 4: under a 512-descriptor limit, 500 idle
// connections to the metrics listener (any local uid reaches it) took
// every descriptor and `registrar-otel mint` timed out. The listener holds
// at most telemetry.MetricsMaxConns now, closing the rest at once.
func TestEndToEndIdleMetricsConnectionsLeaveMintsAnswered(t *testing.T) {
	bin := buildBinary(t)
	dir := shortTempDir(t)
	socket, _, _ := daemonPaths(dir)
	cfg := writeConfig(t, dir, serveDoc(dir, "", `metrics_listen = "127.0.0.1:0"`+"\n"), 0o600)
	// The shell sets the soft and hard limit, then becomes the daemon.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n 512 && exec "$0" serve --config "$1"`, bin, cfg)
	p, line := startLogged(t, "daemon", cmd, "registrar-otel serving")
	m := metricsRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no metrics address in %q", line)
	}
	addr := m[1][len("http://") : len(m[1])-len("/metrics")]

	client := func() *wire.Client {
		// The CLI's patience: a mint that cannot get a descriptor waits
		// for the idle connections' 10 s header timeout, and fails this.
		return wire.NewUnixClient(socket, wire.WithoutKeepAlive(), wire.WithTimeout(5*time.Second))
	}
	mintOK(t, client()) // warm up: the bbolt file, the audit generation

	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range 500 {
		c, err := net.DialTimeout("tcp", addr, e2eIODeadline)
		if err != nil {
			t.Fatalf("metrics connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	for i := range 3 {
		req := reviewMint(fmt.Sprintf("h%d", i+2), 1)
		res, err := client().Mint(context.Background(), req)
		if err != nil || !res.OK() {
			t.Fatalf("mint %d with 500 idle metrics connections open: %+v, %v; want it answered", i, res, err)
		}
	}
	// The daemon holds the capped few, not the 500: read after the mints,
	// by which time the connections beyond the cap were accepted and closed.
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fds); n > 100 {
		t.Errorf("the daemon holds %d descriptors with 500 idle metrics connections open, want at most 100 (the cap is %d)", n, telemetry.MetricsMaxConns)
	}
	p.terminate(t, "daemon")
}

// The attack of issue 27, item 8, against the real daemon: connections
// evicted while their answer was flushing to a caller that never reads
// stayed open for the 30 s write timeout (300 such callers held 315
// descriptors while the gauge said 64). Now the daemon's sockets stay
// within the cap plus the evicted ones still finishing (at most 8), and
// those are closed within a second.
func TestEndToEndCallersThatNeverReadHoldNoDescriptorsPastTheCap(t *testing.T) {
	const maxConns, callers = 8, 120
	d := startDaemon(t, fmt.Sprintf("unix_max_conns = %d\n", maxConns), "")
	d.scrape() // its keep-alive connection is part of the daemon at rest
	base := d.openSockets()
	// processed is how many callers the budget has decided on: the cap's
	// worth admitted, every other one admitted by evicting another or
	// refused.
	processed := func() int {
		m := d.scrape()
		return maxConns + int(rejectedIn(m, "unix", "idle_evicted")) + int(rejectedIn(m, "unix", "conn_cap"))
	}
	peak := 0
	sample := func() int {
		n := d.openSockets() - base
		peak = max(peak, n)
		return n
	}
	// Each caller pipelines health requests and never reads: enough
	// answers to fill the socket buffers, so the daemon's flush blocks.
	pipelined := strings.Repeat("GET /v1/health HTTP/1.1\r\nHost: registrar\r\n\r\n", 2000)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range callers {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		conns = append(conns, c)
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte(pipelined)) // stops when the daemon stops reading, or it closes c
		// The next caller comes once this one's requests are no longer
		// read: the daemon is stuck flushing an answer to it (or has
		// closed it), so the budget sees a flushing connection, not one
		// idle between two pipelined requests.
		settled(t, c)
		sample()
	}
	// Sampled until the budget has seen every caller (the kernel's backlog
	// holds the rest meanwhile), bounded far below the 30 s write timeout.
	deadline := time.Now().Add(20 * time.Second)
	for processed() < callers {
		if time.Now().After(deadline) {
			t.Fatalf("the budget decided on %d of %d callers within 20 s", processed(), callers)
		}
		sample()
		time.Sleep(5 * time.Millisecond)
	}
	m := d.scrape()
	t.Logf("peak %d sockets over %d at rest; idle_evicted %v, conn_cap %v, identity_conn_cap %v", peak, base, rejectedIn(m, "unix", "idle_evicted"), rejectedIn(m, "unix", "conn_cap"), rejectedIn(m, "unix", "identity_conn_cap"))
	// The bound: the cap, the evicted ones finishing, and one the accept
	// loop may hold before the budget decides.
	if bound := maxConns + 8 + 1; peak > bound {
		t.Fatalf("%d callers that never read: the daemon held %d sockets over its %d at rest, want at most %d (cap %d + 8)",
			callers, peak, base, bound, maxConns)
	}
	if ev := rejectedIn(d.scrape(), "unix", "idle_evicted"); ev < 8 {
		t.Errorf("idle_evicted %v, want the flushing connections evicted", ev)
	}
	// Within a second or so of the last eviction, only the cap's worth is
	// open.
	deadline = time.Now().Add(5 * time.Second)
	for sample() > maxConns {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the last caller: %d sockets over the daemon's %d at rest, want at most the cap %d", sample(), base, maxConns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openSockets counts the daemon's open socket descriptors.
func (d *daemonProc) openSockets() int {
	d.t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		d.t.Fatalf("reading the daemon's descriptors: %v", err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// settled returns once the daemon has stopped reading what c sent: the
// bytes c has sent that the daemon has not read (TIOCOUTQ) are the same
// over three samples 10 ms apart. Bounded at 2 s.
func settled(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	unread := func() int32 {
		var n int32
		_ = raw.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
		})
		return n
	}
	prev, same := unread(), 0
	for deadline := time.Now().Add(2 * time.Second); same < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if n := unread(); n == prev {
			same++
		} else {
			prev, same = n, 0
		}
	}
}

// End-to-end attacks on the identities of mTLS callers (issue 27, items 5
// and 7): a spoofed certificate is not the real one, and drained
// certificate identities leave the unix caller its own pool.

// oneMintAnHour is a daemon's [registrar] lines for one admitted mint an
// hour per identity: a second mint on the same identity is limited.
const oneMintAnHour = "rate_limit_admission_burst = 1\nrate_limit_admission_refill_interval_ms = 3600000\n"

// The attack of issue 27, item 7, against the real daemon: a certificate
// with DNS SAN attacker.example.net and a scheme-less URI SAN
// control-plane.example.net was audited as the real control-plane's
// identity and spent its buckets. Now it is refused (no_identity), a URI
// SAN naming that host is an identity of its own, and only a respelling of
// the real DNS name shares the real certificate's bucket.
func TestEndToEndASANSpoofingCertificateIsNotTheRealOne(t *testing.T) {
	p := newE2EPKI(t)
	// One admitted mint an hour per identity: a second mint on the same
	// identity is limited, one on a fresh identity admitted.
	d, addr := startTLSDaemon(t, p, oneMintAnHour)
	mint := func(t *testing.T, uris, dns []string, instance uint32) *wire.Response {
		t.Helper()
		cert := p.Issue(t, pkitest.Options{URIs: uris, DNS: dns, Usage: x509.ExtKeyUsageClientAuth})
		c := wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
		defer c.CloseIdleConnections()
		res, err := c.Mint(context.Background(), reviewMint("h1", instance))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := mint(t, nil, []string{"control-plane.example.net"}, 1); !res.OK() {
		t.Fatalf("the real certificate's mint: %d %s %s", res.StatusCode, res.ErrorID, res.Detail)
	}
	before := rejectedIn(d.scrape(), "tls", "no_identity")
	res := mint(t, []string{"control-plane.example.net"}, []string{"attacker.example.net"}, 2)
	if res.StatusCode != 400 || res.ErrorID != wire.RequestMalformed || !strings.Contains(res.Detail, "no scheme") {
		t.Fatalf("the spoofing certificate's mint: %d %s %q, want 400 RequestMalformed naming the missing scheme", res.StatusCode, res.ErrorID, res.Detail)
	}
	res = mint(t, nil, []string{"control-plane.example.net\n\x1b[0m"}, 2)
	if res.StatusCode != 400 || !strings.Contains(res.Detail, "control character") {
		t.Fatalf("a DNS SAN with a newline and ESC: %d %s %q, want refused naming the control character", res.StatusCode, res.ErrorID, res.Detail)
	}
	if after := rejectedIn(d.scrape(), "tls", "no_identity"); after != before+2 {
		t.Errorf("no_identity went from %v to %v, want two more", before, after)
	}
	// A URI SAN naming the host is an identity of its own: a fresh bucket.
	if res := mint(t, []string{"dns://control-plane.example.net"}, []string{"control-plane.example.net"}, 3); !res.OK() {
		t.Fatalf("the URI certificate's mint: %d %s %s, want admitted on its own bucket", res.StatusCode, res.ErrorID, res.Detail)
	}
	// A respelling of the real name is the real identity: its bucket is spent.
	if res := mint(t, nil, []string{"CONTROL-PLANE.Example.NET."}, 4); res.ErrorID != wire.RegistrarBusy {
		t.Fatalf("the respelled real name's mint: %d %s %s, want RegistrarBusy on the real identity's spent bucket", res.StatusCode, res.ErrorID, res.Detail)
	}

	ids := map[string]int{}
	for _, r := range readAudit(t, d.auditDir) {
		ids[r.CallerIdentity]++
	}
	for _, want := range []string{"registrar-client:dns:control-plane.example.net", "registrar-client:uri:dns://control-plane.example.net"} {
		if ids[want] == 0 {
			t.Errorf("no audit record of %q; the records' identities: %v", want, ids)
		}
	}
	for id := range ids {
		if id == "registrar-client:control-plane.example.net" || strings.Contains(id, "attacker") || strings.ContainsAny(id, "\n\x1b") {
			t.Errorf("an audit record of identity %q", id)
		}
	}
}

// The attack of issue 27, item 5: client certificates held the limiter's
// one shared map full of drained entries, drained the overflow bucket,
// and the unix control plane's next mint was answered RegistrarBusy. The
// unix socket's callers have a pool of their own now: 300 drained mTLS
// identities (more than the map's 256 entries) leave it admitted.
func TestEndToEndDrainedCertificateIdentitiesLeaveTheUnixCallerAdmitted(t *testing.T) {
	p := newE2EPKI(t)
	// One token an hour: one admitted mint drains an identity.
	d, addr := startTLSDaemon(t, p, oneMintAnHour)
	const identities = 300
	req := reviewMint("h1", 1)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		busy int
		next = make(chan int)
	)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				cert := p.Client(t, "spiffe://registrar.test/attacker-"+strconv.Itoa(i))
				c := wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
				for range 2 { // the second is limited: the entry is drained
					res, err := c.Mint(context.Background(), req)
					if err != nil {
						t.Errorf("identity %d: %v", i, err)
						return
					}
					if res.ErrorID == wire.RegistrarBusy {
						mu.Lock()
						busy++
						mu.Unlock()
					}
				}
				c.CloseIdleConnections()
			}
		})
	}
	for i := range identities {
		next <- i
	}
	close(next)
	wg.Wait()
	// Every identity's second mint was limited, and the identities beyond
	// the map's cap were limited on the drained overflow bucket at once.
	if busy < identities {
		t.Fatalf("%d RegistrarBusy answers to the attackers, want at least %d: the map was not drained", busy, identities)
	}
	unixCaller := wire.NewUnixClient(d.socket, wire.WithoutKeepAlive(), wire.WithTimeout(e2eIODeadline))
	res, err := unixCaller.Mint(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ErrorID == wire.RegistrarBusy || !res.OK() {
		t.Fatalf("the unix caller's mint after %d drained certificate identities: %d %s %s, want admitted", identities, res.StatusCode, res.ErrorID, res.Detail)
	}
}

// Fleet-scale end-to-end tests: a thousand mTLS identities flooding every
// bucket, and a crash in the middle of a bring-up wave.

// auditLine is the part of an audit record the fleet tests read.
type auditLine struct {
	Phase          string `json:"phase"`
	RequestID      string `json:"request_id"`
	Verb           string `json:"verb"`
	CallerIdentity string `json:"caller_identity"`
	RegistrationID string `json:"registration_id"`
	LimitedBucket  string `json:"limited_bucket"`
	Count          uint64 `json:"count"`
	WindowStart    string `json:"window_start"`
	WindowEnd      string `json:"window_end"`
	Outcome        *struct {
		Class  string `json:"class"`
		Reason string `json:"reason"`
	} `json:"outcome"`
}

// readAudit parses every record of every file in the audit directory.
func readAudit(t *testing.T, dir string) []auditLine {
	t.Helper()
	out, torn := readAuditLines(t, dir, false)
	if torn != 0 {
		t.Fatalf("%d torn lines in %s", torn, dir)
	}
	return out
}

// readAuditLines is readAudit; with tolerateTorn, a line that is not JSON
// is counted and skipped rather than failing the test: after a SIGKILL
// mid-append the restart terminates the torn line it finds at the end of
// the active file, and audit scan reports it malformed (the store's
// torn-write rule).
func readAuditLines(t *testing.T, dir string, tolerateTorn bool) (out []auditLine, torn int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("audit files in %s: %v %v", dir, files, err)
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l auditLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				if tolerateTorn {
					torn++
					continue
				}
				t.Fatalf("%s: %v: %q", f, err, sc.Text())
			}
			out = append(out, l)
		}
		fh.Close()
	}
	return out, torn
}

// promCounter sums every sample of a counter in a /metrics exposition.
func promCounter(t *testing.T, exposition, name string) uint64 {
	t.Helper()
	var sum uint64
	found := false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		sum += uint64(v)
		found = true
	}
	if !found {
		t.Fatalf("%s not in the exposition", name)
	}
	return sum
}

func getMetrics(t *testing.T, u string) string {
	t.Helper()
	return getBody(t, http.DefaultClient, u)
}

// TestAThousandMTLSIdentitiesFloodingEveryBucketAreCountedExactly: 1,000
// client certificates, each flooding both buckets of both verbs past their
// bursts over mutual TLS on loopback, then SIGTERM. Every identity keeps at
// most one window per key (≤ 4 counted records each: 4,000 keys fit the
// window cap, so no window is flushed early), and the limited invocations
// agree exactly across the counted records, registrar_health, the
// Prometheus counters and what the clients saw.
func TestAThousandMTLSIdentitiesFloodingEveryBucketAreCountedExactly(t *testing.T) {
	buildBinary(t)
	const identities, perBucket, burst = 1000, 1, 2
	pki := newE2EPKI(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(t, pki.tlsLines(addr)+fmt.Sprintf(`maintenance_interval_ms = 50
rate_limit_admission_burst = %d
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_predecision_refusal_burst = %d
rate_limit_predecision_refusal_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, burst, burst)+clientsPolicy, "")
	if d.metricsURL == "" {
		t.Fatal("no metrics URL in the serving line")
	}

	certs := make([]tls.Certificate, identities)
	for i := range certs {
		certs[i] = pki.Client(t, fmt.Sprintf("spiffe://fleet.test/host-%04d", i))
	}
	var (
		busy, refused, admitted atomic.Uint64
		failures                atomic.Uint64
		next                    atomic.Int64
	)
	ctx := context.Background()
	// One client (one identity) per certificate. The requests go
	// round-robin over the identities, so between two events of one key
	// come thousands of other keys' events: a window cap smaller than the
	// fleet would flush each window after one event. Each call has a
	// connection of its own (a thousand idle keep-alive connections would
	// hold the server's 64 connection slots).
	clients := make([]*wire.Client, identities)
	roots := pki.Pool()
	for i := range clients {
		clients[i] = wire.NewTLSClient(addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{certs[i]}}, wire.WithoutKeepAlive())
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	call := func(i, kind int) (*wire.Response, error) {
		host := fmt.Sprintf("h%04d", i)
		svc := "review"
		if kind%2 == 1 {
			svc = "Not-A-Label!" // the pre-derivation arm
		}
		if kind < 2 {
			return clients[i].Mint(ctx, wire.MintRequest{ProtocolVersion: 1, ServiceName: svc, Host: host, Instance: 1, Component: "review",
				Spec: wire.Spec{Component: "review", ServiceName: svc}, WrapTTL: 60})
		}
		return clients[i].Deregister(ctx, wire.DeregisterRequest{ProtocolVersion: 1, ServiceName: svc, Host: host, Instance: 1, Component: "review"})
	}
	const perIdentity = 4 * (burst + perBucket)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				n := int(next.Add(1) - 1)
				if n >= identities*perIdentity {
					return
				}
				// n = (round × 4 + kind) × identities + i
				i, kind := n%identities, n/identities%4
				resp, err := call(i, kind)
				switch {
				case err != nil:
					failures.Add(1)
					t.Errorf("identity %d: %v", i, err)
				case resp.OK():
					admitted.Add(1)
				case resp.ErrorID == wire.RegistrarBusy:
					busy.Add(1)
				case resp.ErrorID == wire.ServiceLabelInvalid:
					refused.Add(1)
				default:
					failures.Add(1)
					t.Errorf("identity %d: unexpected answer %d %s %s", i, resp.StatusCode, resp.ErrorID, resp.Detail)
				}
			}
		})
	}
	wg.Wait()
	if failures.Load() > 0 {
		t.FailNow()
	}
	total := uint64(identities * perIdentity)
	if got := busy.Load() + refused.Load() + admitted.Load(); got != total {
		t.Fatalf("%d answers, want %d", got, total)
	}

	// registrar_health is refreshed on the tick (every 50 ms here): wait,
	// bounded, until a snapshot taken after the last answer is served (the
	// admission count matches, and three reads in a row agree).
	hc := wire.NewUnixClient(d.socket)
	var h *wire.Response
	deadline := time.Now().Add(30 * time.Second)
	for same := 0; same < 3; {
		prev := h
		var err error
		if h, err = hc.Health(ctx); err != nil {
			t.Fatal(err)
		}
		if prev != nil && h.Health.Limiter == prev.Health.Limiter && h.Health.Limiter.LimitedAdmission == busy.Load() {
			same++
		} else {
			same = 0
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(60 * time.Millisecond) // one tick of the daemon under test
	}
	metrics := getMetrics(t, d.metricsURL)
	d.stop()

	recs := readAudit(t, d.auditDir)
	var counted [2]uint64 // predecision_refusal, admission
	var recordedRefusals uint64
	recsOf := map[string]int{}
	keys := map[string]bool{}
	for _, r := range recs {
		switch r.Phase {
		case "limited":
			recsOf[r.CallerIdentity]++
			k := r.CallerIdentity + "|" + r.Verb + "|" + r.LimitedBucket
			if keys[k] {
				t.Fatalf("two counted records for %s in one window", k)
			}
			keys[k] = true
			switch r.LimitedBucket {
			case "predecision_refusal":
				counted[0] += r.Count
			case "admission":
				counted[1] += r.Count
			default:
				t.Fatalf("counted record with bucket %q", r.LimitedBucket)
			}
		case "outcome":
			if r.Outcome != nil && r.Outcome.Class == "refused" && r.Outcome.Reason == "invalid_service_name" {
				recordedRefusals++
			}
		}
	}
	if len(recsOf) != identities {
		t.Fatalf("counted records for %d identities, want %d", len(recsOf), identities)
	}
	for id, n := range recsOf {
		if n > 4 {
			t.Fatalf("%s has %d counted records in one window, want at most 4", id, n)
		}
	}
	limitedRefusals := refused.Load() - recordedRefusals // the clients' refusals whose records were suppressed
	for _, c := range []struct {
		name                                 string
		records, health, prom, clients, want uint64
	}{
		{"predecision_refusal", counted[0], h.Health.Limiter.LimitedPredecisionRefusal,
			promCounter(t, metrics, "registrar_limited_predecision_refusal_total"), limitedRefusals, 0},
		{"admission", counted[1], h.Health.Limiter.LimitedAdmission,
			promCounter(t, metrics, "registrar_limited_admission_total"), busy.Load(), 0},
	} {
		if c.records != c.health || c.health != c.prom || c.prom != c.clients || c.clients == 0 {
			t.Errorf("%s: counted records %d, registrar_health %d, Prometheus %d, clients %d: want all equal and non-zero",
				c.name, c.records, c.health, c.prom, c.clients)
		}
	}
	t.Logf("%d identities, %d answers: %d admitted, %d busy, %d refused (%d recorded); %d counted records",
		identities, total, admitted.Load(), busy.Load(), refused.Load(), recordedRefusals, len(keys))
	if code, rep := d.scan(); code != 0 || rep.Anomalies {
		t.Fatalf("audit scan: exit %d, %+v", code, rep)
	}
}

// TestKill9MidWaveLosesNoAnsweredMint kills the daemon with SIGKILL in the
// middle of a bring-up wave minted 64 at a time over the unix socket.
// Every mint the client saw answered is in the registry and has its intent
// and its first_mint outcome in the store; the scan's
// intent_without_outcome counts exactly the intents with no outcome, each
// one a mint that was still in flight (never answered), at most 64.
func TestKill9MidWaveLosesNoAnsweredMint(t *testing.T) {
	const concurrency, killAfter = 64, 400
	d := startDaemon(t, "rate_limit_admission_burst = 100000", "")
	client := wire.NewUnixClient(d.socket)
	type answered struct{ requestID, registrationID string }
	var (
		mu     sync.Mutex
		seen   []answered
		killed bool
		next   atomic.Int64
	)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				n := next.Add(1)
				host := fmt.Sprintf("wave-h%05d", n)
				resp, err := client.Mint(ctx, wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: host, Instance: 1,
					Component: "review", Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60})
				if err != nil {
					return // the daemon is gone
				}
				if !resp.OK() {
					t.Errorf("mint %s: %d %s %s", host, resp.StatusCode, resp.ErrorID, resp.Detail)
					return
				}
				mu.Lock()
				seen = append(seen, answered{resp.RequestID, resp.RegistrationID})
				if len(seen) >= killAfter && !killed {
					killed = true
					d.cmd.Process.Kill() // SIGKILL: no shutdown, no flush
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not die")
	}
	if !killed {
		t.Fatal("the wave ended before the kill")
	}

	// The registry: every answered mint is bound.
	b, err := embedded.Open(filepath.Join(d.dir, "lib"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, a := range seen {
		if _, ok, err := b.Binding(a.registrationID); err != nil || !ok {
			t.Fatalf("answered mint %s (%s) is not in the registry: %v", a.registrationID, a.requestID, err)
		}
	}
	// The store: both records of every answered mint.
	intents, outcomes := map[string]bool{}, map[string]string{}
	for _, r := range readAudit(t, d.auditDir) {
		switch r.Phase {
		case "intent":
			intents[r.RequestID] = true
		case "outcome":
			if r.Outcome != nil {
				outcomes[r.RequestID] = r.Outcome.Class
			}
		}
	}
	answeredIDs := map[string]bool{}
	for _, a := range seen {
		answeredIDs[a.requestID] = true
		if !intents[a.requestID] || outcomes[a.requestID] != "first_mint" {
			t.Fatalf("answered mint %s: intent %v, outcome %q; want both records", a.requestID, intents[a.requestID], outcomes[a.requestID])
		}
	}
	var inFlight []string
	for id := range intents {
		if _, ok := outcomes[id]; !ok {
			inFlight = append(inFlight, id)
		}
	}
	// The scan, as of after its settle grace.
	rep, err := audit.Scan(ctx, audit.ScanOptions{Dir: d.auditDir, Now: time.Now().Add(2 * audit.DefaultScanGrace)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MalformedRecords != 0 || rep.IntentWithoutOutcome != uint64(len(inFlight)) || len(inFlight) > concurrency {
		t.Fatalf("scan: %d malformed, %d intent_without_outcome; %d intents have no outcome (at most %d in flight)",
			rep.MalformedRecords, rep.IntentWithoutOutcome, len(inFlight), concurrency)
	}
	for _, u := range rep.Unpaired {
		if answeredIDs[u.RequestID] {
			t.Fatalf("answered mint %s reported as intent_without_outcome", u.RequestID)
		}
	}
	t.Logf("%d mints answered before SIGKILL, %d in flight", len(seen), len(inFlight))
}

// The evidence checkpoint against the real binary: kill -9 at random
// instants during a flood, restart on the same directories, and check per
// trial that the counted records account for the limited answers the
// clients saw, less at most the last tick's, and never more.

var (
	gapFromRE        = regexp.MustCompile(`gap_from=(\S+)`)
	recoveredCountRE = regexp.MustCompile(`recovered_count=(\d+)`)
)

// limitedSum is Σ count over the store's counted records.
func limitedSum(t *testing.T, dir string) uint64 {
	t.Helper()
	var sum uint64
	// Each SIGKILL may tear the line being appended; the restart
	// terminates it and it is no record (at most one per kill).
	recs, _ := readAuditLines(t, dir, true)
	for _, r := range recs {
		if r.Phase == "limited" {
			sum += r.Count
		}
	}
	return sum
}

func TestKill9DuringAFloodLosesAtMostTheLastTickOfLimitedInvocations(t *testing.T) {
	bin := buildBinary(t)
	const (
		trials     = 20
		identities = 64
		workers    = 16
		tickMS     = 50
		// oneTick is the issue's "answered within one tick before the
		// kill", with slack for the tick's own writes.
		oneTick = 500 * time.Millisecond
	)
	pki := newE2EPKI(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// A 1 s window and a 50 ms tick: kills between 250 ms and 2.5 s into a
	// flood land before, on and after window boundaries. Burst 1 with a
	// refill of an hour: every mint after a key's first is throttled.
	d := startDaemon(t, pki.tlsLines(addr)+fmt.Sprintf(`tls_max_conns = 512
maintenance_interval_ms = %d
rate_limit_admission_burst = 1
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 1`, tickMS)+clientsPolicy, "")
	roots := pki.Pool()
	clients := make([]*wire.Client, identities+1)
	for i := range identities {
		cert := pki.Client(t, fmt.Sprintf("spiffe://crash.test/host-%02d", i))
		clients[i] = wire.NewTLSClient(addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}})
	}
	clients[identities] = wire.NewUnixClient(d.socket)
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	seed := rng.Uint64()
	rng = rand.New(rand.NewPCG(seed, 24))
	t.Logf("seed %d", seed)

	type trial struct {
		n                        int
		killAfter                time.Duration
		seen, inFlight, beforeCk uint64
		beforeOneTick            uint64 // answered more than oneTick before the kill
		counted, recovered       uint64
		lastTick                 time.Duration // kill − the recovered checkpoint's instant
	}
	var (
		worst           trial
		worstAge        time.Duration
		recoveredTrials int
	)
	before := limitedSum(t, d.auditDir)
	for n := range trials {
		tr := trial{n: n, killAfter: 250*time.Millisecond + time.Duration(rng.Int64N(int64(2250*time.Millisecond)))}
		var (
			mu       sync.Mutex
			answers  []time.Time // when each throttled answer was received
			inFlight atomic.Int64
			stop     atomic.Bool
			next     atomic.Int64
			wg       sync.WaitGroup
		)
		ctx := context.Background()
		for range workers {
			wg.Go(func() {
				for !stop.Load() {
					c := clients[int(next.Add(1))%len(clients)]
					inFlight.Add(1)
					resp, err := c.Mint(ctx, wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: "crash-h", Instance: 1,
						Component: "review", Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60})
					at := time.Now()
					if err != nil {
						return // killed: this call stays counted in flight
					}
					inFlight.Add(-1)
					if resp.ErrorID == wire.RegistrarBusy {
						mu.Lock()
						answers = append(answers, at)
						mu.Unlock()
					}
				}
			})
		}
		floodStart := time.Now()
		kill := time.NewTimer(tr.killAfter)
		<-kill.C
		killAt := time.Now()
		d.cmd.Process.Kill() // SIGKILL: no shutdown flush
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			t.Fatal("the daemon did not die")
		}
		stop.Store(true)
		wg.Wait()
		tr.killAfter = killAt.Sub(floodStart)
		tr.inFlight = uint64(inFlight.Load())
		tr.seen = uint64(len(answers))

		// Restart on the same directories: recovery runs before serving.
		p, _ := startLogged(t, "daemon", exec.Command(bin, "serve", "--config", d.config), "registrar-otel serving")
		d.loggedProc = p
		logs := p.logs.String()
		m := gapFromRE.FindStringSubmatch(logs)
		if m == nil {
			t.Fatalf("trial %d: no unclean-stop ERROR line with gap_from after the restart:\n%s", n, logs)
		}
		ckAt, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("trial %d: gap_from %q: %v", n, m[1], err)
		}
		if rc := recoveredCountRE.FindStringSubmatch(logs); rc != nil {
			tr.recovered, _ = strconv.ParseUint(rc[1], 10, 64)
		}
		tr.lastTick = killAt.Sub(ckAt)
		for _, a := range answers {
			if a.Before(ckAt) {
				tr.beforeCk++
			}
			if a.Before(killAt.Add(-oneTick)) {
				tr.beforeOneTick++
			}
		}
		after := limitedSum(t, d.auditDir)
		tr.counted = after - before
		before = after
		// The Σ inequality: everything answered before the last durable
		// checkpoint is counted; nothing beyond what was answered (or lost
		// in flight to the kill) is.
		if tr.counted < tr.beforeCk || tr.counted > tr.seen+tr.inFlight {
			t.Errorf("trial %d (kill %v in, %v after the checkpoint): Σ counted %d, want %d ≤ Σ ≤ %d seen + %d in flight",
				n, tr.killAfter, tr.lastTick, tr.counted, tr.beforeCk, tr.seen, tr.inFlight)
		}
		// How old the checkpoint the restart used was: one tick (50 ms)
		// plus the tick's own writes on an idle machine; on a loaded,
		// shared one the tick goroutine can be starved for seconds, so the
		// age is reported, not bounded. The Σ inequality above holds
		// whatever it is.
		if tr.lastTick > worstAge {
			worstAge = tr.lastTick
		}
		if tr.recovered > 0 {
			recoveredTrials++
		}
		if loss := int64(tr.seen) - int64(tr.counted); worst.seen == 0 || loss > int64(worst.seen)-int64(worst.counted) {
			worst = tr
		}
	}
	t.Logf("worst of %d trials (#%d): kill %v into the flood, %v after the last checkpoint; %d throttled answers seen (%d before the checkpoint, %d more than %v before the kill, %d calls in flight at the kill); Σ counted %d (%d recovered from the checkpoint), lost %d",
		trials, worst.n, worst.killAfter.Round(time.Millisecond), worst.lastTick.Round(time.Millisecond), worst.seen, worst.beforeCk, worst.beforeOneTick, oneTick, worst.inFlight,
		worst.counted, worst.recovered, int64(worst.seen)-int64(worst.counted))

	t.Logf("the oldest checkpoint a restart used was %v older than its kill; %d of %d restarts recovered windows from it", worstAge.Round(time.Millisecond), recoveredTrials, trials)
	// Every flood outlasts several ticks: a daemon that never checkpointed
	// during one recovers nothing in any trial. (A kill before the flood's
	// first throttled answer reached a checkpoint recovers nothing too,
	// so not every trial must.)
	if recoveredTrials == 0 {
		t.Errorf("only %d of %d restarts recovered a window from the checkpoint", recoveredTrials, trials)
	}

	// The last restart is visible to an operator: the metric and health.
	d.metricsURL = ""
	if m := metricsRE.FindStringSubmatch(d.logs.String()); m != nil {
		d.metricsURL = m[1]
	}
	if got := promCounter(t, getMetrics(t, d.metricsURL), "registrar_unclean_restarts_total"); got != 1 {
		t.Errorf("registrar_unclean_restarts_total %d after an unclean restart, want 1", got)
	}
	d.stop()
	if _, rep := d.scan(); rep.MalformedRecords != 0 || rep.Records.Limited == 0 {
		t.Fatalf("audit scan after the trials: %+v", rep)
	}
}

// Issue 41, item 6: the real binary bounds a request's header block at
// the documented 16 KiB: 16,384 bytes are served, a 17 KiB block is
// answered 431 (a plain HTTP error, no protocol body), as docs/en/wire.md
// says.
func TestEndToEndTheHeaderBlockIsBoundedAsDocumented(t *testing.T) {
	d := startDaemon(t, "", "")
	status := func(n int) int {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(e2eIODeadline))
		head := "GET /v1/health HTTP/1.1\r\nHost: registrar\r\nX-Pad: "
		go io.WriteString(c, head+strings.Repeat("a", n-len(head)-4)+"\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a %d-byte header block: %v", n, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := status(wire.MaxHeaderBytes); got != http.StatusOK {
		t.Errorf("a header block of exactly 16 KiB: %d, want 200", got)
	}
	if got := status(17 << 10); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 17 KiB header block: %d, want 431", got)
	}
}
