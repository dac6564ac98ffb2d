package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/wire"
)

// testConfig places every path under a temporary directory, turns the
// metrics listener off, and makes the tick too slow to fire during a test,
// so each test drives the maintenance pass itself.
func testConfig(t *testing.T) config.Config {
	t.Helper()
	dir, err := os.MkdirTemp("", "dmn-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := config.Default()
	r := &cfg.Registrar
	r.SocketPath = filepath.Join(dir, "run", "r.sock")
	r.StateDir = filepath.Join(dir, "lib")
	r.AuditRecordDir = filepath.Join(dir, "audit")
	r.MaintenanceIntervalMS = 3_600_000
	r.RateLimitPredecisionRefusalBurst = 2
	r.RateLimitAdmissionBurst = 3
	r.RateLimitAdmissionRefillIntervalMS = 3_600_000
	r.RateLimitPredecisionRefusalRefillIntervalMS = 3_600_000
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
	if got := r.metric(t, `registrar_limited_predecision_refusal_total{verb="mint"}`); got != 3 {
		t.Errorf("OTel sink: registrar_limited_predecision_refusal_total %v, want 3", got)
	}
	r.stop(t)
	if got := scanDir(t, cfg.Registrar.AuditRecordDir).Limited[limiter.PredecisionRefusal].Count; got != 3 {
		t.Errorf("coalescer: counted records sum to %d, want 3", got)
	}
}
