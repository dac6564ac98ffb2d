package daemon

// The fairness acceptance run (issue 39, make fairness): an innocent
// identity's serial mints alone and during a flood by another identity,
// on the daemon with fair dispatch and on the same daemon without it, and
// a control plane's wave alone with and without it. Each daemon and each
// flooder is a process of its own (this test binary re-run, fairnessChild),
// as on a host: the flood's load client never shares the innocent client's
// scheduler. The figures are ratios against a peer measured in the same
// run, passes interleaved, and the medians over the rounds are reported.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/floodtest"
	"github.com/registrar-otel/registrar-otel/internal/testing/pkitest"
	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/wire"
)

// The fairness run's children (fairnessChild) are started before any test.
func TestMain(m *testing.M) {
	fairnessChild()
	os.Exit(m.Run())
}

// The environment of a child process of the fairness run.
const (
	envFairChild  = "REGISTRAR_FAIRNESS_CHILD"  // "daemon" or "flood"
	envFairConfig = "REGISTRAR_FAIRNESS_CONFIG" // daemon: the configuration file
	envFairUnfair = "REGISTRAR_FAIRNESS_UNFAIR" // daemon: "1" serves without fair dispatch
	envFairTarget = "REGISTRAR_FAIRNESS_TARGET" // flood: unix:<path> or tls:<host:port>
	envFairCert   = "REGISTRAR_FAIRNESS_CERT"   // flood over TLS: certificate, key and CA files, comma-separated
	envFairConns  = "REGISTRAR_FAIRNESS_CONNS"  // flood: connections
	envFairKind   = "REGISTRAR_FAIRNESS_KIND"   // flood: "throttled" or "limited-refusal"
)

// fairnessChild runs this process as a child of the fairness run, and
// exits, when the environment says it is one; otherwise it returns.
func fairnessChild() {
	var err error
	switch os.Getenv(envFairChild) {
	case "":
		return
	case "daemon":
		err = fairnessDaemon()
	case "flood":
		err = fairnessFlood()
	default:
		err = fmt.Errorf("unknown child %q", os.Getenv(envFairChild))
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fairnessDaemon serves the configuration file until stdin closes.
func fairnessDaemon() error {
	cfg, err := config.Load(os.Getenv(envFairConfig), nil, nil)
	if err != nil {
		return err
	}
	d, err := newDaemon(cfg, nil, Options{}, seams{unfair: os.Getenv(envFairUnfair) == "1"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Println("ready") // the listeners are bound: callers queue until Run serves
	return d.Run(ctx)
}

// floodRequest is the request of a flood of kind and the status every
// answer must have once its bucket is drained.
func floodRequest(kind string) ([]byte, int, error) {
	var (
		body   wire.MintRequest
		status int
	)
	switch kind {
	case "throttled":
		body, status = mintReq("review"), http.StatusTooManyRequests
	case "limited-refusal":
		body, status = mintReq("Bad_Name"), http.StatusUnprocessableEntity
	default:
		return nil, 0, fmt.Errorf("unknown flood %q", kind)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	return floodtest.Request(wire.PathMint, b), status, nil
}

// fairnessFlood floods its target until stdin closes, then prints how
// many answers it got and in how long.
func fairnessFlood() error {
	req, status, err := floodRequest(os.Getenv(envFairKind))
	if err != nil {
		return err
	}
	conns, err := strconv.Atoi(os.Getenv(envFairConns))
	if err != nil {
		return err
	}
	var cl *floodtest.Client
	switch target := os.Getenv(envFairTarget); {
	case strings.HasPrefix(target, "unix:"):
		cl, err = floodtest.Dial(strings.TrimPrefix(target, "unix:"), conns)
	case strings.HasPrefix(target, "tls:"):
		var cfg *tls.Config
		if cfg, err = clientTLS(strings.Split(os.Getenv(envFairCert), ",")); err == nil {
			cl, err = floodtest.DialTLS(strings.TrimPrefix(target, "tls:"), cfg, conns)
		}
	default:
		err = fmt.Errorf("unknown target %q", target)
	}
	if err != nil {
		return err
	}
	defer cl.Close()
	drained := false
	for range 1024 {
		got, _, _, err := cl.Body(req)
		if err != nil {
			return err
		}
		if drained = got == status; drained {
			break
		}
	}
	if !drained {
		return fmt.Errorf("the flooder's bucket did not drain")
	}
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	fmt.Println("ready")
	start := time.Now()
	n, err := cl.Flood(stop, req, status)
	fmt.Println("answered", n, time.Since(start).Nanoseconds())
	return err
}

// clientTLS is a client configuration from a certificate, key and CA file.
func clientTLS(files []string) (*tls.Config, error) {
	if len(files) != 3 {
		return nil, fmt.Errorf("want certificate, key and CA files, got %q", files)
	}
	cert, err := tls.LoadX509KeyPair(files[0], files[1])
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(files[2])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no CA certificate in %s", files[2])
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}}, nil
}

// child is a child process of the fairness run.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startChild runs this test binary as a child with env and waits for its
// "ready".
func startChild(b *testing.B, env ...string) *child {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	if os.Getenv("FAIRNESS_NICE") != "" && slices.Contains(env, envFairChild+"=flood") {
		cmd = exec.Command("nice", "-n", os.Getenv("FAIRNESS_NICE"), os.Args[0], "-test.run=^$", "-test.bench=^$")
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	b.Cleanup(func() { c.stop() })
	select {
	case line := <-c.lines:
		if line != "ready" {
			c.stop()
			b.Fatalf("child %v: %s", env, line)
		}
	case <-time.After(30 * time.Second):
		c.stop()
		b.Fatalf("child %v: not ready within 30 s", env)
	}
	return c
}

// stop closes the child's stdin, waits for it and returns what it printed
// after ready.
func (c *child) stop() []string {
	if c.stdin == nil {
		return nil
	}
	c.stdin.Close()
	c.stdin = nil
	var out []string
	for line := range c.lines {
		out = append(out, line)
	}
	_ = c.cmd.Wait()
	return out
}

// The identities of the run: the innocent and the flooder over TLS are
// certificate identities of their own; the flooder over the unix socket is
// this process's uid (root: an operator, which takes the [registrar]
// table's sizes).
const (
	innocentURI = "spiffe://registrar.test/innocent"
	flooderURI  = "spiffe://registrar.test/flood"
)

// fairnessSetup is the files of a run: the PKI, and a configuration for
// each daemon.
type fairnessSetup struct {
	dir                           string
	caFile, serverCert, serverKey string
	innocentCert, innocentKey     string
	flooderCert, flooderKey       string
}

func newFairnessSetup(b *testing.B) fairnessSetup {
	b.Helper()
	dir, err := os.MkdirTemp(os.Getenv("FAIRNESS_DIR"), "fair-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ca := pkitest.New(b)
	var s fairnessSetup
	s.dir = dir
	s.caFile, s.serverCert, s.serverKey = ca.ServerFiles(b)
	_, s.innocentCert, s.innocentKey = ca.WriteFiles(b, dir, "innocent", ca.Client(b, innocentURI))
	_, s.flooderCert, s.flooderKey = ca.WriteFiles(b, dir, "flooder", ca.Client(b, flooderURI))
	return s
}

// freePort returns a loopback port nothing listens on.
func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fairDaemon is a daemon child of the run.
type fairDaemon struct {
	name   string
	socket string
	addr   string // the TLS listener, host:port
	proc   *child
}

// startFairDaemon runs a daemon in its own directory under the setup's:
// the default configuration with a TLS listener; the [registrar] sizes
// (root's: the unix flooder's, or the wave's control plane) of admission
// burst rootBurst and a refusal burst of 1, refilled once an hour; the
// flooders' policy with those sizes; and the innocent's policy with a
// burst no run exhausts. extra is more [registrar] keys, and so is
// FAIRNESS_CONFIG_EXTRA (to measure other fair-dispatch settings: say,
// "shared_in_flight = 4").
func startFairDaemon(b *testing.B, s fairnessSetup, name string, unfair bool, rootBurst uint32, extra string) *fairDaemon {
	b.Helper()
	dir := filepath.Join(s.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	d := &fairDaemon{name: name, socket: filepath.Join(dir, "s.sock"), addr: "127.0.0.1:" + strconv.Itoa(freePort(b))}
	toml := fmt.Sprintf(`[registrar]
socket_path = %q
state_dir = %q
audit_record_dir = %q
tls_listen = %q
tls_cert_file = %q
tls_key_file = %q
tls_client_ca_file = %q
rate_limit_admission_burst = %d
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_predecision_refusal_burst = 1
rate_limit_predecision_refusal_refill_interval_ms = 3600000
%s
[registrar.components.review]
multiplicity = "many-per-host"
[registrar.callers.innocent]
identities = ["registrar-client:uri:%s"]
rate_limit_admission_burst = 4000000000
[registrar.callers.flooders]
identities = ["registrar-client:uri:%s"]
rate_limit_admission_burst = 1
[telemetry]
metrics_listen = ""
`, d.socket, filepath.Join(dir, "lib"), filepath.Join(dir, "audit"), d.addr, s.serverCert, s.serverKey, s.caFile,
		rootBurst, extra+"\n"+os.Getenv("FAIRNESS_CONFIG_EXTRA"), innocentURI, flooderURI)
	cfgFile := filepath.Join(dir, "registrar.toml")
	if err := os.WriteFile(cfgFile, []byte(toml), 0o600); err != nil {
		b.Fatal(err)
	}
	unfairEnv := "0"
	if unfair {
		unfairEnv = "1"
	}
	d.proc = startChild(b, envFairChild+"=daemon", envFairConfig+"="+cfgFile, envFairUnfair+"="+unfairEnv)
	return d
}

// flood is a flood the run measures the innocent against.
type flood struct {
	kind string // throttled or limited-refusal
	tls  bool   // over TLS as its own certificate identity, else over the unix socket as root
}

func (f flood) String() string {
	l := "unix"
	if f.tls {
		l = "tls"
	}
	return f.kind + "-" + l
}

// startFlood starts a flooder child at conns connections against d and
// returns once its bucket is drained and the flood runs.
func startFlood(b *testing.B, s fairnessSetup, d *fairDaemon, f flood, conns int) *child {
	b.Helper()
	env := []string{envFairChild + "=flood", envFairKind + "=" + f.kind, envFairConns + "=" + strconv.Itoa(conns)}
	if f.tls {
		env = append(env, envFairTarget+"=tls:"+d.addr, envFairCert+"="+strings.Join([]string{s.flooderCert, s.flooderKey, s.caFile}, ","))
	} else {
		env = append(env, envFairTarget+"=unix:"+d.socket)
	}
	return startChild(b, env...)
}

// stopFlood stops a flooder and returns its answers per second.
func stopFlood(b *testing.B, c *child) float64 {
	b.Helper()
	for _, line := range c.stop() {
		var n, ns int64
		if _, err := fmt.Sscanf(line, "answered %d %d", &n, &ns); err == nil && ns > 0 {
			return float64(n) / (float64(ns) / 1e9)
		}
		if strings.HasPrefix(line, "error:") {
			b.Fatalf("flooder: %s", line)
		}
	}
	b.Fatal("the flooder reported nothing")
	return 0
}

// innocentClient is the innocent identity's client of d over TLS.
func innocentClient(b *testing.B, s fairnessSetup, d *fairDaemon) *wire.Client {
	b.Helper()
	cfg, err := clientTLS([]string{s.innocentCert, s.innocentKey, s.caFile})
	if err != nil {
		b.Fatal(err)
	}
	c := wire.NewTLSClient(d.addr, cfg)
	b.Cleanup(c.CloseIdleConnections)
	return c
}

// mintSerially makes n first mints one after the other, of instances 1…n
// of host, and returns each one's latency and how many were admitted.
func mintSerially(b *testing.B, c *wire.Client, host string, n int) ([]time.Duration, int) {
	b.Helper()
	ctx := context.Background()
	lat := make([]time.Duration, 0, n)
	admitted := 0
	for i := range n {
		req := mintReq("review")
		req.Host, req.Instance = host, uint32(i+1)
		t0 := time.Now()
		res, err := c.Mint(ctx, req)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatalf("innocent mint: %v", err)
		}
		if res.OK() {
			admitted++
		}
	}
	return lat, admitted
}

// fairLog writes a line of the run's report to stderr as it comes (a
// benchmark's log is cut short and held to its end).
func fairLog(b *testing.B, format string, args ...any) {
	b.Helper()
	fmt.Fprintf(os.Stderr, "%s: "+format+"\n", append([]any{b.Name()}, args...)...)
}

// quantile is the q-quantile of d (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func within(d []time.Duration, bound time.Duration) float64 {
	n := 0
	for _, x := range d {
		if x <= bound {
			n++
		}
	}
	return float64(n) / float64(len(d))
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fairnessRounds is the number of interleaved rounds and the innocent's
// mints per pass: FAIRNESS_ROUNDS and FAIRNESS_MINTS, else 5 and 300; 1
// and 20 under -short (make bench-smoke: it must only not rot).
func fairnessRounds() (rounds, mints int) {
	rounds, mints = 5, 300
	if testing.Short() {
		rounds, mints = 1, 20
	}
	if v, err := strconv.Atoi(os.Getenv("FAIRNESS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := strconv.Atoi(os.Getenv("FAIRNESS_MINTS")); err == nil && v > 0 && v <= 999 {
		mints = v
	}
	return rounds, mints
}

// BenchmarkFairness is the fairness acceptance run (make fairness). It
// ignores b.N: run it with -benchtime=1x.
//
//   - innocent: an mTLS identity's serial mints (first mints: intent
//     record, registry commit, outcome record, each fsynced) alone, then
//     during a flood at 64 connections by another identity (throttled and
//     limited-refusal, over the unix socket as root and over TLS as a
//     certificate identity of its own), each flood pass right after an
//     alone pass on the same daemon; the daemon with fair dispatch
//     (server=fair) and the same daemon without it (server=unfair),
//     interleaved. Per flood and server, the medians over the rounds of:
//     p50 and p99 during the flood over the same round's alone pass
//     (p50-ratio, p99-ratio), the share of the flood pass's mints answered
//     within 2× the alone p99 (within-2x), the innocent's mints admitted
//     over those sent (admitted), and the flood's answers per second.
//   - wave: a control plane's bring-up wave alone, 200 hosts × 8 modules
//     at concurrency 64 over the unix socket, on a fresh daemon with fair
//     dispatch and without, in the order fair, unfair, unfair, fair, …: the
//     median over the rounds of fair mints/s over unfair mints/s.
//
// The goal (issue 39): with fair dispatch, p99-ratio ≤ 2, within-2x ≥
// 0.99, admitted 1, and the wave ratio ≥ 0.95.
func BenchmarkFairness(b *testing.B) {
	rounds, mints := fairnessRounds()
	b.Run("innocent", func(b *testing.B) {
		s := newFairnessSetup(b)
		servers := []struct {
			name string
			d    *fairDaemon
			c    *wire.Client
		}{{name: "fair"}, {name: "unfair"}}
		for i := range servers {
			servers[i].d = startFairDaemon(b, s, servers[i].name, servers[i].name == "unfair", 1, "")
			servers[i].c = innocentClient(b, s, servers[i].d)
			mintSerially(b, servers[i].c, "warm", 50) // connections, files and caches warm
		}
		floods := []flood{{"limited-refusal", false}, {"throttled", false}, {"limited-refusal", true}, {"throttled", true}}
		type result struct{ p50, p99, within, admitted, rate []float64 }
		results := map[string]*result{}
		pass := 0
		for r := range rounds {
			for _, f := range floods {
				order := []int{0, 1}
				if (r+pass)%2 == 1 {
					order = []int{1, 0}
				}
				pass++
				for _, i := range order {
					sv := servers[i]
					host := fmt.Sprintf("p%04d", pass*2+i)
					alone, _ := mintSerially(b, sv.c, host+"a", mints)
					fl := startFlood(b, s, sv.d, f, 64)
					during, admitted := mintSerially(b, sv.c, host+"f", mints)
					rate := stopFlood(b, fl)
					key := f.String() + "/server=" + sv.name
					res := results[key]
					if res == nil {
						res = &result{}
						results[key] = res
					}
					a99 := quantile(alone, 0.99)
					res.p50 = append(res.p50, float64(quantile(during, 0.5))/float64(quantile(alone, 0.5)))
					res.p99 = append(res.p99, float64(quantile(during, 0.99))/float64(a99))
					res.within = append(res.within, within(during, 2*a99))
					res.admitted = append(res.admitted, float64(admitted)/float64(mints))
					res.rate = append(res.rate, rate)
					fairLog(b, "round %d %s: alone p50 %v p99 %v; during p50 %v p99 %v, %.3f within 2× alone p99, %d/%d admitted; flood %.0f answers/s",
						r+1, key, quantile(alone, 0.5), a99, quantile(during, 0.5), quantile(during, 0.99), within(during, 2*a99), admitted, mints, rate)
				}
			}
		}
		keys := make([]string, 0, len(results))
		for k := range results {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			res := results[k]
			fairLog(b, "%s over %d rounds (medians): p50 ×%.2f, p99 ×%.2f, within 2× alone p99 %.3f (worst %.3f), admitted %.3f (worst %.3f), flood %.0f answers/s",
				k, rounds, median(res.p50), median(res.p99), median(res.within), slices.Min(res.within), median(res.admitted), slices.Min(res.admitted), median(res.rate))
			name := strings.ReplaceAll(k, "/", "-")
			b.ReportMetric(median(res.p99), name+"-p99-ratio")
			b.ReportMetric(median(res.within), name+"-within-2x")
			b.ReportMetric(slices.Min(res.admitted), name+"-admitted-min")
		}
	})
	b.Run("wave", func(b *testing.B) {
		s := newFairnessSetup(b)
		hosts := 200
		if testing.Short() {
			hosts = 8
		}
		var ratios []float64
		byServer := map[bool][]float64{}
		for r := range rounds {
			order := []bool{false, true} // fair (unfair false) first
			if r%2 == 1 {
				order = []bool{true, false}
			}
			var rate [2]float64
			for _, unfair := range order {
				d := startFairDaemon(b, s, fmt.Sprintf("wave-%d-%v", r, unfair), unfair, 4_000_000_000, "")
				c := wire.NewUnixClient(d.socket)
				rep, err := loadgen.Wave(context.Background(), c, loadgen.WaveOptions{Hosts: hosts, ModulesPerHost: 8, Concurrency: 64})
				c.CloseIdleConnections()
				d.proc.stop()
				if err != nil {
					b.Fatal(err)
				}
				if rep.Admitted != uint64(hosts*8) {
					b.Fatalf("wave: %d of %d admitted (throttled %d, refused %d, failed %d: %v)", rep.Admitted, hosts*8, rep.Throttled, rep.Refused, rep.Failed, rep.FirstError)
				}
				i := 0
				if unfair {
					i = 1
				}
				rate[i] = float64(rep.Admitted) / rep.Elapsed.Seconds()
				byServer[unfair] = append(byServer[unfair], rate[i])
			}
			ratios = append(ratios, rate[0]/rate[1])
			fairLog(b, "round %d wave: fair %.0f mints/s, unfair %.0f mints/s, fair/unfair %.3f", r+1, rate[0], rate[1], rate[0]/rate[1])
		}
		fairLog(b, "wave over %d rounds (medians): fair %.0f mints/s, unfair %.0f mints/s, fair/unfair %.3f (worst %.3f)",
			rounds, median(byServer[false]), median(byServer[true]), median(ratios), slices.Min(ratios))
		b.ReportMetric(median(ratios), "wave-fair/unfair")
	})
}
