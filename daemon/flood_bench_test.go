package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/daemon"
	"github.com/registrar-otel/registrar-otel/internal/testing/cputime"
	"github.com/registrar-otel/registrar-otel/internal/testing/floodtest"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

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
	dir, err := os.MkdirTemp("", "fld-") // short: socket paths are limited
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	cfg := config.Default()
	r := &cfg.Registrar
	r.SocketPath = filepath.Join(dir, "r.sock")
	r.StateDir = filepath.Join(dir, "lib")
	r.AuditRecordDir = filepath.Join(dir, "audit")
	r.RateLimitAdmissionRefillIntervalMS = 3_600_000
	r.RateLimitPredecisionRefusalRefillIntervalMS = 3_600_000
	// The flood is one uid over up to 64 connections: above the default
	// registrar.max_conns_per_identity (16), which would close the rest.
	r.MaxConnsPerIdentity = 128
	cfg.Telemetry.MetricsListen = ""
	return cfg
}

func startDaemon(b *testing.B, cfg config.Config) *daemon.Daemon {
	b.Helper()
	d, err := daemon.New(cfg, nil)
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
