package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/cputime"
	"github.com/registrar-otel/registrar-otel/internal/testing/floodtest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// testConfig places every path under a temporary directory, turns the
// metrics listener off, and makes the tick too slow to fire during a test,
// so each test drives the maintenance pass itself.
func testConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := configIn(t, "dmn-", filepath.Join("run", "r.sock"))
	r := &cfg.Registrar
	r.MaintenanceIntervalMS = 3_600_000
	r.RateLimitPredecisionRefusalBurst = 2
	r.RateLimitAdmissionBurst = 3
	r.RateLimitAdmissionRefillIntervalMS = 3_600_000
	r.RateLimitPredecisionRefusalRefillIntervalMS = 3_600_000
	return cfg
}

// configIn is the default configuration with every path under a new
// temporary directory (named with prefix, short: socket paths are
// limited), the socket at sock in it, and the metrics listener off.
func configIn(tb testing.TB, prefix, sock string) config.Config {
	tb.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	cfg := config.Default()
	r := &cfg.Registrar
	r.SocketPath = filepath.Join(dir, sock)
	r.StateDir = filepath.Join(dir, "lib")
	r.AuditRecordDir = filepath.Join(dir, "audit")
	cfg.Telemetry.MetricsListen = ""
	return cfg
}

// running is a daemon serving in the background.
type running struct {
	d      *Daemon
	client *wire.Client
	cancel context.CancelFunc
	done   chan error
}

// start runs a daemon of cfg with the process's seams, its log discarded.
func start(t *testing.T, cfg config.Config) *running {
	t.Helper()
	return launch(t, cfg, nil, seams{})
}

// launch runs a daemon of cfg with logger and the seams s in the
// background, until stop or the test's end.
func launch(t *testing.T, cfg config.Config, logger *slog.Logger, s seams) *running {
	t.Helper()
	d, err := newDaemon(cfg, logger, Options{}, s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, client: wire.NewUnixClient(cfg.Registrar.SocketPath), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.done <- nil // for the cleanup
}

func (r *running) tick() { runTasks(context.Background(), time.Now(), r.d.logger, r.d.tickTasks()) }

func mint(serviceName string) wire.MintRequest {
	return wire.MintRequest{ProtocolVersion: 1, ServiceName: serviceName, Host: "h1", Instance: 1, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: serviceName}, WrapTTL: 60}
}

func TestHealthIsServedFromTheTickRefreshedSnapshot(t *testing.T) {
	r := start(t, testConfig(t))
	ctx := context.Background()
	limiterOf := func(resp *wire.Response) health.LimiterMember {
		t.Helper()
		if len(resp.RawHealth) == 0 {
			t.Fatalf("response %d %s carries no registrar_health", resp.StatusCode, resp.ErrorID)
		}
		return resp.Health.Limiter
	}

	// Flood the refusal bucket: 2 recorded, 5 limited.
	var last *wire.Response
	for range 7 {
		resp, err := r.client.Mint(ctx, mint("BAD"))
		if err != nil || resp.ErrorID != wire.ServiceLabelInvalid {
			t.Fatalf("refused mint: %+v, %v", resp, err)
		}
		last = resp
	}
	// No tick yet: every response still shows the startup snapshot.
	if got := limiterOf(last); got != (health.LimiterMember{}) {
		t.Fatalf("before a tick the served limiter member is %+v, want zeros", got)
	}
	r.tick()
	resp, err := r.client.Mint(ctx, mint("review"))
	if err != nil || !resp.OK() {
		t.Fatalf("good mint: %+v, %v", resp, err)
	}
	if got := limiterOf(resp); got != (health.LimiterMember{LimitedPredecisionRefusal: 5}) {
		t.Fatalf("after the tick, on a success: %+v, want only predecision_refusal = 5", got)
	}
	// Now the admission bucket (3 tokens, one spent): 2 admitted, 4 throttled.
	for range 6 {
		if _, err := r.client.Mint(ctx, mint("review")); err != nil {
			t.Fatal(err)
		}
	}
	r.tick()
	resp, err = r.client.Mint(ctx, mint("BAD"))
	if err != nil {
		t.Fatal(err)
	}
	if got := limiterOf(resp); got != (health.LimiterMember{LimitedPredecisionRefusal: 5, LimitedAdmission: 4}) {
		t.Fatalf("on a refusal after the admission flood: %+v, want 5 and 4", got)
	}
	h, err := r.client.Health(ctx)
	if err != nil || !h.OK() || string(h.RawHealth) != string(r.d.health.Current().JSON) {
		t.Fatalf("GET /v1/health %s, want the holder's %s", h.RawHealth, r.d.health.Current().JSON)
	}
}

func TestShutdownFlushesOpenWindows(t *testing.T) {
	cfg := testConfig(t)
	r := start(t, cfg)
	ctx := context.Background()
	for range 10 {
		r.client.Mint(ctx, mint("BAD")) // 2 recorded, 8 limited
	}
	for range 5 {
		r.client.Mint(ctx, mint("review")) // 3 admitted, 2 throttled
	}
	r.stop(t)
	rep, err := audit.Scan(ctx, audit.ScanOptions{Dir: cfg.Registrar.AuditRecordDir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Anomalies() {
		t.Fatalf("anomalies after shutdown: %+v", rep)
	}
	if got := rep.Limited; got[0].Count != 8 || got[1].Count != 2 || got[0].Records != 1 || got[1].Records != 1 {
		t.Fatalf("counted records %+v, want one record per bucket counting 8 and 2", got)
	}
}

func TestNewFailsCleanlyAndNamesTheComponent(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	cfg := testConfig(t)
	// A second daemon on the same socket: the first holds it.
	start(t, cfg)
	cfg2 := cfg
	cfg2.Registrar.StateDir = filepath.Join(filepath.Dir(cfg.Registrar.StateDir), "lib2")
	cfg2.Registrar.AuditRecordDir = filepath.Join(filepath.Dir(cfg.Registrar.AuditRecordDir), "audit2")
	if _, err := New(cfg2, nil); err == nil {
		t.Fatal("a second daemon on a live socket started")
	} else if want := "daemon: unix listener"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
	// The second daemon's audit store and backend were closed again: a
	// third attempt on its directories with a free socket succeeds.
	cfg2.Registrar.SocketPath = filepath.Join(filepath.Dir(cfg.Registrar.SocketPath), "r2.sock")
	d, err := New(cfg2, nil)
	if err != nil {
		t.Fatalf("reopening after a failed New: %v", err)
	}
	d.close()
}

// The sink chain New builds is coalesce → otelsink → counting: every
// limited invocation is counted by all three (a counted record, the
// OpenTelemetry counter, the health member), so none of them can leave the
// chain without this test failing.
func TestEveryLimitedInvocationReachesTheCoalescerTheOTelSinkAndTheCountingSink(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	r := start(t, cfg)
	for range 5 {
		r.client.Mint(context.Background(), mint("BAD")) // 2 refused and recorded, 3 limited
	}
	r.tick()
	if got := r.d.health.Current().Container.Limiter.LimitedPredecisionRefusal; got != 3 {
		t.Errorf("counting sink (health member): %d limited refusals, want 3", got)
	}
	if got := r.metric(t, `registrar_limited_predecision_refusal_total{policy="default",verb="mint"}`); got != 3 {
		t.Errorf("OTel sink: registrar_limited_predecision_refusal_total %v, want 3", got)
	}
	r.stop(t)
	if got := scanDir(t, cfg.Registrar.AuditRecordDir).Limited[vocab.PredecisionRefusal].Count; got != 3 {
		t.Errorf("coalescer: counted records sum to %d, want 3", got)
	}
}

// TestIdleTimeoutReachesTheServer holds that registrar.idle_timeout_ms is
// the wire server's idle timeout (and not, say, the header timeout): with
// a short idle timeout and a long header timeout, a keep-alive connection
// that sends nothing after its first answer is closed by the server. The
// test waits for that close (an event, bounded by a deadline far above the
// idle timeout), never for a fixed time.
func TestIdleTimeoutReachesTheServer(t *testing.T) {
	cfg := testConfig(t)
	cfg.Registrar.IdleTimeoutMS = 50
	cfg.Registrar.ReadHeaderTimeoutMS = 600_000
	start(t, cfg)
	c, err := net.Dial("unix", cfg.Registrar.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: registrar\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Close {
		t.Fatalf("health: status %d, close %v; want 200 on a keep-alive connection", res.StatusCode, res.Close)
	}
	// Far above 50 ms, far below the 600 s header timeout.
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := br.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the idle keep-alive connection outlived idle_timeout_ms = 50 by 20 s: the setting did not reach the server")
	}
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("read after the answer: %d bytes, %v; want the server's close (EOF)", n, err)
	}
}

// BenchmarkFlood is the product's headline figure: the cost of answering a
// flood through the real daemon (default telemetry: untraced calls sampled
// at trace_sample_per_million 10000, the Prometheus meter provider, the production sink chain, the
// real audit store and backend), against the floor: a no-op net/http
// server on the same kind of unix socket answering the same bytes with the
// same headers. Both are driven by the same keep-alive load client
// (internal/testing/floodtest) at 1, 16 and 64 connections.
//
//   - throttled: a well-formed remint from one uid with its admission
//     bucket drained (429 RegistrarBusy);
//   - limited-refusal: a mint with an invalid service name from one uid
//     with its predecision_refusal bucket drained (422
//     ServiceLabelInvalid, no records).
//
// Each sub-benchmark's op is one request answered; ns/op is the inverse of
// the throughput over all connections, cpu-ns/op the process's CPU time per
// answer, and allocs/op counts the whole process (the client allocates
// nothing per request). Read it as a ratio
// floor/daemon of ns/op within one pass, passes interleaved (make bench).
func BenchmarkFlood(b *testing.B) {
	for _, kind := range []struct {
		name   string
		body   wire.MintRequest
		status int
	}{
		{"throttled", mintReq("review"), http.StatusTooManyRequests},
		{"limited-refusal", mintReq("Bad_Name"), http.StatusUnprocessableEntity},
	} {
		cfg := floodConfig(b)
		d := startDaemon(b, cfg)
		body, err := json.Marshal(kind.body)
		if err != nil {
			b.Fatal(err)
		}
		req := floodtest.Request(wire.PathMint, body)
		// Drain the bucket and capture the answer the floor will repeat.
		warm, err := floodtest.Dial(cfg.Registrar.SocketPath, 1)
		if err != nil {
			b.Fatal(err)
		}
		var (
			status int
			header http.Header
			answer []byte
		)
		for range 1024 {
			if status, header, answer, err = warm.Body(req); err != nil {
				b.Fatal(err)
			}
			if status == kind.status {
				break
			}
		}
		warm.Close()
		if status != kind.status {
			b.Fatalf("%s: the bucket did not drain: last status %d", kind.name, status)
		}
		floorPath := startFloor(b, floodtest.NewFloor(status, header, answer))
		// The same daemon with telemetry.trace_sample_per_million = 0 (no
		// untraced call recorded) and = 1000000 (every call recorded, the default
		// before 1 in 100: what a flood whose caller sends a sampled traceparent
		// costs), see the operations guide, "Tracing cost and
		// trace_sample_per_million".
		ucfg := floodConfig(b)
		ucfg.Telemetry.TraceSamplePerMillion = 0
		startDaemon(b, ucfg)
		drain(b, ucfg.Registrar.SocketPath, req, kind.status)
		rcfg := floodConfig(b)
		rcfg.Telemetry.TraceSamplePerMillion = 1_000_000
		startDaemon(b, rcfg)
		drain(b, rcfg.Registrar.SocketPath, req, kind.status)
		for _, c := range []int{1, 16, 64} {
			b.Run(kind.name+"/c="+strconv.Itoa(c)+"/server=paired", func(b *testing.B) {
				drivePaired(b, floorPath, cfg.Registrar.SocketPath, c, req, status)
			})
			b.Run(kind.name+"/c="+strconv.Itoa(c)+"/server=floor", func(b *testing.B) {
				drive(b, floorPath, c, req, status)
			})
			b.Run(kind.name+"/c="+strconv.Itoa(c)+"/server=daemon", func(b *testing.B) {
				drive(b, cfg.Registrar.SocketPath, c, req, status)
			})
			b.Run(kind.name+"/c="+strconv.Itoa(c)+"/server=daemon-ratio0", func(b *testing.B) {
				drive(b, ucfg.Registrar.SocketPath, c, req, status)
			})
			b.Run(kind.name+"/c="+strconv.Itoa(c)+"/server=daemon-ratio1", func(b *testing.B) {
				drive(b, rcfg.Registrar.SocketPath, c, req, status)
			})
		}
		_ = d
	}
}

// drain sends req until the answer is status.
func drain(b *testing.B, path string, req []byte, status int) {
	b.Helper()
	cl, err := floodtest.Dial(path, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for range 1024 {
		got, _, _, err := cl.Body(req)
		if err != nil {
			b.Fatal(err)
		}
		if got == status {
			return
		}
	}
	b.Fatalf("the bucket did not drain")
}

func drive(b *testing.B, path string, conns int, req []byte, status int) {
	cl, err := floodtest.Dial(path, conns)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Run(4*conns, req, status); err != nil { // connections warm
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Now()
	if err := cl.Run(b.N, req, status); err != nil {
		b.Fatal(err)
	}
	if cputime.Available() {
		// The whole process: server and load client (which costs the same
		// against either server). 1e9 / cpu-ns/op is answers per second per
		// core, client included.
		b.ReportMetric(float64(cputime.Now()-cpu)/float64(b.N), "cpu-ns/op")
	}
}

// pairedChunk is how many answers each server gives in one turn of a
// paired run: about 10 to 30 ms of flood, short enough that a machine
// busy elsewhere slows both servers of a turn alike.
const pairedChunk = 1024

// drivePaired is the same flood against the floor and the daemon (default
// telemetry), alternating between them every pairedChunk answers in the
// order floor, daemon, daemon, floor (so a steady drift in the machine's
// speed cancels), until each has given b.N answers. It reports each
// server's ns/op and cpu-ns/op over its own turns and, as the headline
// figure, daemon/floor: the daemon's throughput as a fraction of the
// floor's, and the same for CPU time per answer. The ns/op of the
// benchmark itself covers both servers and is not a figure to read.
func drivePaired(b *testing.B, floorPath, daemonPath string, conns int, req []byte, status int) {
	dial := func(path string) *floodtest.Client {
		cl, err := floodtest.Dial(path, conns)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		if err := cl.Run(4*conns, req, status); err != nil { // connections warm
			b.Fatal(err)
		}
		return cl
	}
	servers := [2]*floodtest.Client{dial(floorPath), dial(daemonPath)}
	var wall, cpu [2]time.Duration
	left := [2]int{b.N, b.N}
	b.ResetTimer()
	for turn := 0; left[0] > 0 || left[1] > 0; turn++ {
		// floor, daemon, daemon, floor, floor, daemon, ...
		i := ((turn + 1) / 2) % 2
		n := min(pairedChunk, left[i])
		if n == 0 {
			continue
		}
		c0, t0 := cputime.Now(), time.Now()
		if err := servers[i].Run(n, req, status); err != nil {
			b.Fatal(err)
		}
		wall[i] += time.Since(t0)
		cpu[i] += cputime.Now() - c0
		left[i] -= n
	}
	b.StopTimer()
	perOp := func(d time.Duration) float64 { return float64(d) / float64(b.N) }
	b.ReportMetric(perOp(wall[0]), "floor-ns/op")
	b.ReportMetric(perOp(wall[1]), "daemon-ns/op")
	b.ReportMetric(float64(wall[0])/float64(wall[1]), "daemon/floor")
	if cputime.Available() {
		b.ReportMetric(perOp(cpu[0]), "floor-cpu-ns/op")
		b.ReportMetric(perOp(cpu[1]), "daemon-cpu-ns/op")
		b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "daemon/floor-cpu")
	}
}

func mintReq(serviceName string) wire.MintRequest {
	return wire.MintRequest{ProtocolVersion: 1, ServiceName: serviceName, Host: "h1", Instance: 1, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: serviceName, Reload: "systemctl reload review"}, WrapTTL: 60}
}

// floodConfig is the embedded defaults with every path in a temporary
// directory, no metrics listener, max_conns_per_identity 128 (the c=64
// flood comes from one uid), and refill intervals of an hour, so that
// once drained a bucket stays drained for the run (at the default intervals
// a token every 0.5 or 1 s would let a few calls through to fsynced
// records, noise in a per-request figure). Telemetry is the default.
func floodConfig(b *testing.B) config.Config {
	b.Helper()
	cfg := configIn(b, "fld-", "r.sock")
	r := &cfg.Registrar
	r.RateLimitAdmissionRefillIntervalMS = 3_600_000
	r.RateLimitPredecisionRefusalRefillIntervalMS = 3_600_000
	// The flood is one uid over up to 64 connections: above the default
	// registrar.max_conns_per_identity (16), which would close the rest.
	r.MaxConnsPerIdentity = 128
	return cfg
}

func startDaemon(b *testing.B, cfg config.Config) *Daemon {
	b.Helper()
	d, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("daemon Run: %v", err)
		}
	})
	return d
}

// startFloor serves f on a fresh unix socket with the wire server's
// timeouts and returns the socket's path.
func startFloor(b *testing.B, f *floodtest.Floor) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "flr-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "f.sock")
	l, err := server.ListenUnix(path)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{
		Handler:           f,
		ReadHeaderTimeout: wire.DefaultReadHeaderTimeout,
		ReadTimeout:       wire.DefaultReadTimeout,
		WriteTimeout:      wire.DefaultWriteTimeout,
		IdleTimeout:       wire.DefaultIdleTimeout,
		MaxHeaderBytes:    wire.MaxHeaderBytes,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("floor Serve: %v", err)
		}
	})
	return path
}

// BenchmarkProductionChain is one limited event through the production
// sink chain, coalesce → otelsink (real SDK meter provider) → counting,
// with no span in the context, counted into an open window. It is not the
// default configuration (there every invocation's span records): see
// BenchmarkProductionChainDefaultConfig.
func BenchmarkProductionChain(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	for _, tc := range []struct {
		name string
		keys int
	}{
		{"one-key", 1},
		{"64-keys", 64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o, err := otelsink.New(counting.New(), mp)
			if err != nil {
				b.Fatal(err)
			}
			s, err := coalesce.New(coalesce.Options{Next: o, Store: &audittest.AuditLog{}, Window: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			evs := make([]limiter.Event, tc.keys)
			for i := range evs {
				evs[i] = limiter.Event{Identity: "unix-peer:uid=" + strconv.Itoa(1000+i), Verb: vocab.Verb(i % 2), Bucket: vocab.Admission, RetryAfterSeconds: 1}
			}
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				s.Limited(ctx, evs[i])
				if i++; i == len(evs) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkProductionChainDefaultConfig is one limited event through the
// production sink chain at the default configuration: the daemon's own
// providers from telemetry.New with the embedded defaults
// (trace_sample_per_million 10000, parent-based; the Prometheus exporter;
// exemplars from sampled spans), coalesce → otelsink → counting into an
// open window.
//
// Each event lands on a fresh span of its own, as a throttled invocation's
// does (one event per span): the spans are started and ended in batches
// with the timer stopped, so the figure is the event alone.
//
//   - span=default-untraced: the span of a caller that sends no trace
//     context (an anonymous flood), sampled at the default ratio: what a
//     limited event costs at the default configuration;
//   - span=recording: the span of a caller that sends a sampled
//     traceparent (a bring-up wave): recorded at any ratio;
//   - span=recording-sdk-AddEvent-only: the SDK's AddEvent alone on such a
//     span, the floor of the recording case;
//   - span=non-recording: the same chain with the span never sampled.
func BenchmarkProductionChainDefaultConfig(b *testing.B) {
	ctx := context.Background()
	tel, err := telemetry.New(ctx, config.Default().Telemetry, telemetry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	// The floor of the recording case: the SDK's AddEvent alone, with the
	// same attributes hoisted, no sink chain.
	sdkOnly := []trace.EventOption{trace.WithAttributes(otelsink.AttrLimitedBucket.String("admission"),
		otelsink.AttrVerb.String("mint"), otelsink.AttrRetryAfter.Int64(1))}
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"span=default-untraced", tel.TracerProvider()},
		{"span=recording", tel.TracerProvider()},
		{"span=recording-sdk-AddEvent-only", tel.TracerProvider()},
		{"span=non-recording", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))},
	} {
		// A bring-up wave's calls carry a sampled traceparent: their spans
		// are children of a remote sampled parent.
		parent := ctx
		if strings.HasPrefix(tc.name, "span=recording") {
			parent = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
				SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
				TraceFlags: trace.FlagsSampled,
				Remote:     true,
			}))
		}
		for _, bucket := range []vocab.Bucket{vocab.Admission, vocab.PredecisionRefusal} {
			b.Run(tc.name+"/bucket="+bucket.String(), func(b *testing.B) {
				o, err := otelsink.New(counting.New(), tel.MeterProvider())
				if err != nil {
					b.Fatal(err)
				}
				s, err := coalesce.New(coalesce.Options{Next: o, Store: &audittest.AuditLog{}, Window: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				ev := limiter.Event{Identity: "unix-peer:uid=1000", Verb: vocab.Mint, Bucket: bucket, RetryAfterSeconds: 1}
				tracer := tc.tp.Tracer("bench")
				const batch = 4096
				var (
					ctxs  [batch]context.Context
					spans [batch]trace.Span
				)
				refill := func() {
					for i := range spans {
						if spans[i] != nil {
							spans[i].End()
						}
						ctxs[i], spans[i] = tracer.Start(parent, "registrar.mint", trace.WithSpanKind(trace.SpanKindServer))
					}
				}
				refill()
				recorded := 0
				for _, sp := range spans {
					if sp.IsRecording() {
						recorded++
					}
				}
				switch {
				case strings.HasPrefix(tc.name, "span=recording") && recorded != batch,
					tc.name == "span=non-recording" && recorded != 0,
					tc.name == "span=default-untraced" && recorded > batch/10: // 1 in 100 expected
					b.Fatalf("%s: %d of %d spans recording", tc.name, recorded, batch)
				}
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration // within the timed sections only
				t0 := cputime.Now()
				for i := 0; i < b.N; i++ {
					j := i % batch
					if j == 0 && i > 0 {
						b.StopTimer()
						cpu += cputime.Now() - t0
						refill()
						t0 = cputime.Now()
						b.StartTimer()
					}
					if tc.name == "span=recording-sdk-AddEvent-only" {
						spans[j].AddEvent(otelsink.EventName, sdkOnly...)
					} else {
						s.Limited(ctxs[j], ev)
					}
				}
				b.StopTimer()
				cpu += cputime.Now() - t0
				if cputime.Available() {
					b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				}
				for _, sp := range spans {
					sp.End()
				}
			})
		}
	}
}

// storeRecords reads every record of the audit store in dir.
func storeRecords(t *testing.T, dir string) []*audit.Record {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []*audit.Record
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			r, err := audit.Unmarshal(bytes.TrimSuffix(line, []byte("\n")))
			if err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			out = append(out, r)
		}
	}
	return out
}

// limitedRecords reads the counted records of every file of the store.
func limitedRecords(t *testing.T, dir string) []*audit.Record {
	t.Helper()
	var out []*audit.Record
	for _, r := range storeRecords(t, dir) {
		if r.Phase == audit.PhaseLimited {
			out = append(out, r)
		}
	}
	return out
}

// TestTheHistogramsKeptOutsideTheSDKAreOnTheMetricsListener: the daemon's
// two histograms recorded on every request, the fair dispatch's wait and
// the verbs' duration, are counted outside the SDK (telemetry.Histograms)
// and reach /metrics only because the daemon builds its observers on its
// Telemetry's Histograms: one mint over the socket is one observation of
// each.
func TestTheHistogramsKeptOutsideTheSDKAreOnTheMetricsListener(t *testing.T) {
	cfg := testConfig(t)
	cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	r := start(t, cfg)
	resp, err := r.client.Mint(context.Background(), mint("review"))
	if err != nil || !resp.OK() {
		t.Fatalf("mint: %+v, %v", resp, err)
	}
	m := scrape(t, r.d)
	for _, want := range []string{
		`registrar_invocation_duration_seconds_count{result="first_mint",verb="mint"} 1`,
		`registrar_request_wait_seconds_count{listener="unix"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
