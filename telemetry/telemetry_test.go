package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// testConfig is the telemetry table a test starts from: no listener, no
// OTLP, every root span sampled.
func testConfig() config.Telemetry {
	return config.Telemetry{ServiceName: "registrar-otel-test", TraceSamplePerMillion: 1_000_000}
}

// newTelemetry builds a Telemetry and shuts it down when the test ends.
func newTelemetry(t *testing.T, cfg config.Telemetry, o telemetry.Options) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(context.Background(), cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tel.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return tel
}

// scrape GETs path from h with the given Accept header ("" for none) and
// returns the body, failing unless the answer is 200.
func scrape(t *testing.T, h http.Handler, path, accept string) (body, contentType string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: status %d, want 200; body:\n%s", path, rec.Code, rec.Body)
	}
	return rec.Body.String(), rec.Header().Get("Content-Type")
}

func TestNewRejectsBadConfigNamingEveryKey(t *testing.T) {
	tests := []struct {
		name    string
		cfg     config.Telemetry
		wantKey []string
	}{
		{"empty service name", config.Telemetry{ServiceName: " ", TraceSamplePerMillion: 1_000_000}, []string{"telemetry.service_name"}},
		{"rate above a million", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_001}, []string{"telemetry.trace_sample_per_million"}},
		{"endpoint without scheme", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: "collector:4318"}, []string{"telemetry.otlp_endpoint"}},
		{"endpoint with grpc scheme", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: "grpc://collector:4317"}, []string{"telemetry.otlp_endpoint"}},
		{"endpoint with a query", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: "http://collector:4318/?x=1"}, []string{"telemetry.otlp_endpoint"}},
		{"endpoint with credentials", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: "https://user:hunter2@collector:4318"}, []string{"telemetry.otlp_endpoint"}},
		{"all at once", config.Telemetry{ServiceName: "", TraceSamplePerMillion: 2_000_000, OTLPEndpoint: "ftp://x"},
			[]string{"telemetry.service_name", "telemetry.trace_sample_per_million", "telemetry.otlp_endpoint"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tel, err := telemetry.New(context.Background(), tc.cfg, telemetry.Options{})
			if err == nil {
				_ = tel.Shutdown(context.Background())
				t.Fatalf("New(%+v) succeeded, want an error", tc.cfg)
			}
			var ke *config.KeyError
			if !errors.As(err, &ke) {
				t.Errorf("error %v is not a *config.KeyError", err)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "user") || strings.Contains(err.Error(), "x=1") {
				t.Errorf("error %q echoes the endpoint's user-info or query", err)
			}
			for _, key := range tc.wantKey {
				if !strings.Contains(err.Error(), key) {
					t.Errorf("error %q does not name %s", err, key)
				}
			}
		})
	}
}

func TestShutdownOfNilTelemetryIsSafe(t *testing.T) {
	var tel *telemetry.Telemetry
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown on nil: %v, want nil", err)
	}
}

func TestShutdownTwiceReturnsTheFirstResult(t *testing.T) {
	tel, err := telemetry.New(context.Background(), testConfig(), telemetry.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatalf("first Shutdown: %v", err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v, want nil", err)
	}
}

func TestHealthz(t *testing.T) {
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	body, _ := scrape(t, tel.Handler(), "/healthz", "")
	if body != "ok" {
		t.Errorf("GET /healthz body %q, want %q", body, "ok")
	}
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/metrics", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: status %d, want 405", rec.Code)
	}
}

func TestListenOnPortZeroServesUntilShutdown(t *testing.T) {
	tel, err := telemetry.New(context.Background(), testConfig(), telemetry.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := tel.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	addr := l.Addr().(*net.TCPAddr)
	if addr.Port == 0 {
		t.Fatalf("bound address %v has port 0", addr)
	}
	served := make(chan error, 1)
	go func() { served <- tel.Serve(l) }()

	resp, err := http.Get("http://" + addr.String() + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Errorf("GET /healthz: %d %q, want 200 \"ok\"", resp.StatusCode, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve returned %v after Shutdown, want nil", err)
	}
	if _, err := http.Get("http://" + addr.String() + "/healthz"); err == nil {
		t.Errorf("metrics listener still answers after Shutdown")
	}
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	if err := tel.Serve(l2); !errors.Is(err, telemetry.ErrClosed) {
		t.Errorf("Serve after Shutdown = %v, want ErrClosed", err)
	}
}

func TestListenErrorNamesTheKey(t *testing.T) {
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	defer l.Close()
	_, err = tel.Listen(l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "telemetry.metrics_listen") {
		t.Errorf("Listen on a busy address: %v, want an error naming telemetry.metrics_listen", err)
	}
}

func TestSamplerIsParentBasedRatio(t *testing.T) {
	cfg := testConfig()
	cfg.TraceSamplePerMillion = 0
	tel := newTelemetry(t, cfg, telemetry.Options{})
	tracer := tel.TracerProvider().Tracer("test")

	_, root := tracer.Start(context.Background(), "registrar.mint")
	root.End()
	if root.SpanContext().IsSampled() {
		t.Errorf("ratio 0, no parent: span sampled, want not sampled")
	}

	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	_, child := tracer.Start(ctx, "registrar.mint")
	child.End()
	if !child.SpanContext().IsSampled() {
		t.Errorf("ratio 0, sampled remote parent: span not sampled, want sampled")
	}
	if child.SpanContext().TraceID() != parent.TraceID() {
		t.Errorf("child trace id %s, want the parent's %s", child.SpanContext().TraceID(), parent.TraceID())
	}

	unsampled := parent.WithTraceFlags(0)
	ctx = trace.ContextWithRemoteSpanContext(context.Background(), unsampled)
	cfg.TraceSamplePerMillion = 1_000_000
	tel1 := newTelemetry(t, cfg, telemetry.Options{})
	_, span := tel1.TracerProvider().Tracer("test").Start(ctx, "registrar.mint")
	span.End()
	if span.SpanContext().IsSampled() {
		t.Errorf("ratio 1, unsampled remote parent: span sampled, want not sampled")
	}
}

// TestTheSamplerVariablesKeepTheirOTelMeaning: OTEL_TRACES_SAMPLER_ARG is
// the argument of the daemon's parentbased_traceidratio sampler, in place
// of telemetry.trace_sample_per_million; OTEL_TRACES_SAMPLER replaces the
// sampler as the SDK specifies; a value the SDK would not read is an
// error naming the variable.
func TestTheSamplerVariablesKeepTheirOTelMeaning(t *testing.T) {
	rootSampled := func(t *testing.T, perMillion uint32, env map[string]string) bool {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v) // the SDK reads OTEL_TRACES_SAMPLER from the process
		}
		cfg := testConfig()
		cfg.TraceSamplePerMillion = perMillion
		tel := newTelemetry(t, cfg, telemetry.Options{})
		_, root := tel.TracerProvider().Tracer("test").Start(context.Background(), "registrar.mint")
		root.End()
		return root.SpanContext().IsSampled()
	}
	for _, tc := range []struct {
		name       string
		perMillion uint32
		env        map[string]string
		want       bool
	}{
		{"the key alone: none in a million", 0, nil, false},
		{"the key alone: a million in a million", 1_000_000, nil, true},
		{"ARG 1 over the key's 0", 0, map[string]string{"OTEL_TRACES_SAMPLER_ARG": "1"}, true},
		{"ARG 0 over the key's million", 1_000_000, map[string]string{"OTEL_TRACES_SAMPLER_ARG": "0"}, false},
		{"SAMPLER always_off over the key", 1_000_000, map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, false},
		{"SAMPLER traceidratio with ARG 1", 0, map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rootSampled(t, tc.perMillion, tc.env); got != tc.want {
				t.Errorf("root span sampled %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ env, value, want string }{
		{"OTEL_TRACES_SAMPLER_ARG", "0.5x", `OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (the SDK's traceidratio argument), got "0.5x"`},
		{"OTEL_TRACES_SAMPLER_ARG", "2", `OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1`},
		{"OTEL_TRACES_SAMPLER", "sometimes", `OTEL_TRACES_SAMPLER must be one of always_on`},
	} {
		env := map[string]string{tc.env: tc.value}
		_, err := telemetry.New(context.Background(), testConfig(), telemetry.Options{Getenv: func(k string) string { return env[k] }})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: New error %v, want one containing %q", tc.env, tc.value, err, tc.want)
		}
	}
}

func TestExtraReadersAndSpanProcessorsAreAttached(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	var sp countingProcessor
	tel := newTelemetry(t, testConfig(), telemetry.Options{
		ExtraReaders:        []sdkmetric.Reader{reader},
		ExtraSpanProcessors: []sdktrace.SpanProcessor{&sp},
	})
	if err := telemetry.RegisterLimiter(tel.MeterProvider(), fakeLimiterStats); err != nil {
		t.Fatalf("RegisterLimiter: %v", err)
	}
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "s")
	span.End()
	if sp.ended != 1 {
		t.Errorf("extra span processor saw %d ended spans, want 1", sp.ended)
	}
	got := collectAll(t, reader)
	if _, ok := got[telemetry.LimiterEntries]; !ok {
		t.Errorf("extra reader did not collect %s", telemetry.LimiterEntries)
	}
}

type countingProcessor struct {
	sdktrace.SpanProcessor
	ended int
}

func (c *countingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *countingProcessor) OnEnd(sdktrace.ReadOnlySpan)                     { c.ended++ }
func (c *countingProcessor) Shutdown(context.Context) error                  { return nil }
func (c *countingProcessor) ForceFlush(context.Context) error                { return nil }

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const goldenNames = "testdata/metrics_names.golden"

// fakeBackend creates every binding and removes every binding it is asked
// to: the exposition test needs the verbs' results, not a registry.
type fakeBackend struct{}

func (fakeBackend) Mint(_ context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	return registrar.MintCreated, registrar.Material{RoleID: "role", WrappedSecretID: "wrapped", ExpiresAt: op.Now.Add(op.WrapTTL)}, nil
}

func (fakeBackend) Deregister(context.Context, registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	return registrar.DeregisterRemoved, nil
}

// identity is the caller identity fed through the whole chain; it must not
// appear anywhere in the exposition.
const identity = "spiffe://tenant-7.example/ns/bringup/sa/secret-caller"

// exercised is a Telemetry with every instrument registered and driven the
// way the daemon drives them: real verbs over a real limiter, sink chain
// and audit store, with fake limiter and coalescer stats.
type exercised struct {
	tel        *telemetry.Telemetry
	requestIDs []string
}

func exercise(t *testing.T) exercised {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tel := newTelemetry(t, testConfig(), telemetry.Options{
		ServiceVersion:      "v0.0.0-test",
		ExtraSpanProcessors: []sdktrace.SpanProcessor{rec},
	})
	mp := tel.MeterProvider()
	if err := telemetry.RegisterLimiter(mp, fakeLimiterStats); err != nil {
		t.Fatalf("RegisterLimiter: %v", err)
	}
	if err := telemetry.RegisterCoalesce(mp, fakeCoalesceStats); err != nil {
		t.Fatalf("RegisterCoalesce: %v", err)
	}
	if err := telemetry.RegisterAuditStore(mp, fakeAuditCapacity, fakeStoreStats); err != nil {
		t.Fatalf("RegisterAuditStore: %v", err)
	}
	if err := telemetry.RegisterCapacity(mp, fakeCoalesceStats); err != nil {
		t.Fatalf("RegisterCapacity: %v", err)
	}
	if err := telemetry.RegisterRestart(mp, func() telemetry.RestartStats {
		return telemetry.RestartStats{UncleanRestarts: 1, LastUncleanRestartUnix: 1.7e9}
	}); err != nil {
		t.Fatalf("RegisterRestart: %v", err)
	}
	if err := telemetry.RegisterWire(mp, func() server.Stats { return server.Stats{} }); err != nil {
		t.Fatalf("RegisterWire: %v", err)
	}
	// The wait histogram appears on its first request served.
	// It is a producer's (WireObserver), read by the Prometheus exporter
	// New built: the exposition below shows New attached it.
	tel.WireObserver().Waited(server.ListenerUnix, 0)
	bao := newObserver(t, mp, telemetry.NewOpenBaoObserver)
	bao.Request(context.Background(), openbao.OpBindingRead, 2*time.Millisecond)
	if err := telemetry.RegisterOpenBaoToken(mp, func() openbao.TokenStats {
		return openbao.TokenStats{Known: true, Renewable: true, Expiry: time.Unix(1_800_000_000, 0)}
	}); err != nil {
		t.Fatalf("RegisterOpenBaoToken: %v", err)
	}
	if err := telemetry.RegisterReload(mp, nil); err != nil {
		t.Fatalf("RegisterReload: %v", err)
	}
	if err := telemetry.RegisterDirectories(mp, func() telemetry.DirectoryStats { return telemetry.DirectoryStats{} }); err != nil {
		t.Fatalf("RegisterDirectories: %v", err)
	}
	if err := telemetry.RegisterStock(mp, func() telemetry.StockStats {
		return telemetry.StockStats{Components: []telemetry.ComponentStock{{Component: "review", Live: 3, BusiestHost: 2, Ceiling: 8}}}
	}); err != nil {
		t.Fatalf("RegisterStock: %v", err)
	}
	obs := newObserver(t, mp, telemetry.NewAuditObserver)
	store, err := audit.Open(audit.Options{Dir: filepath.Join(t.TempDir(), "audit"), Observer: obs})
	if err != nil {
		t.Fatalf("audit.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	sink, err := otelsink.New(counting.New(), mp)
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	// A caller policy with a shadow, as the daemon declares each
	// configured one: the shadow counter's series exist from the start.
	if err := sink.DeclarePolicy("agents", true); err != nil {
		t.Fatalf("DeclarePolicy: %v", err)
	}
	// One token per bucket, refilled hourly: the second charge of a key is
	// limited.
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}, sink)
	if err != nil {
		t.Fatalf("limiter.New: %v", err)
	}
	verbs, err := registrar.New(
		registrar.Config{Components: map[string]vocab.Multiplicity{"web": vocab.OnePerDeployment}, MaxWrapTTLSeconds: 60},
		registrar.Deps{Limiter: lim, Audit: store, Backend: fakeBackend{}, TracerProvider: tel.TracerProvider(), Observer: verbObserver(t, mp, tel.Histograms())},
	)
	if err != nil {
		t.Fatalf("registrar.New: %v", err)
	}

	ctx := context.Background()
	valid := registrar.MintRequest{
		CallerIdentity: identity, ServiceName: "web", Host: "host-1", Component: "web",
		Spec: registrar.Spec{Component: "web", ServiceName: "web"}, WrapTTLSeconds: 30,
	}
	invalid := valid
	invalid.ServiceName = "Not A DNS Label"
	for _, req := range []registrar.MintRequest{valid, valid, invalid, invalid} {
		_, _ = verbs.Mint(ctx, req) // first_mint, throttled, refused, refused (limited)
	}
	_, _ = verbs.Deregister(ctx, registrar.DeregisterRequest{CallerIdentity: identity, ServiceName: "web", Host: "host-1", Component: "web"})
	obs.Appended(audit.PhaseOutcome, 3*time.Millisecond, errors.New("audit: disk full"))

	var ids []string
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == registrar.AttrRequestID {
				ids = append(ids, kv.Value.AsString())
			}
		}
	}
	if len(ids) != 5 {
		t.Fatalf("recorded %d request ids, want 5 (one per invocation)", len(ids))
	}
	return exercised{tel: tel, requestIDs: ids}
}

// sampleNames returns the sorted, distinct sample names of a classic text
// exposition (histograms contribute _bucket, _sum and _count).
func sampleNames(t *testing.T, families map[string]*dto.MetricFamily) []string {
	t.Helper()
	seen := map[string]bool{}
	for name, mf := range families {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			seen[name+"_bucket"], seen[name+"_sum"], seen[name+"_count"] = true, true, true
		default:
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func parseText(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	return families
}

func TestMetricsExpositionNamesMatchTheGolden(t *testing.T) {
	ex := exercise(t)
	body, ctype := scrape(t, ex.tel.Handler(), "/metrics", "")
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("Content-Type %q without an Accept header, want text/plain", ctype)
	}
	// The standard go_* and process_* collectors are client_golang's: their
	// names follow its version, not this project, so the golden leaves them
	// out and TestRuntimeCollectorsAndBuildInfoAreExposed checks them.
	var own []string
	for _, n := range sampleNames(t, parseText(t, body)) {
		if !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
			own = append(own, n)
		}
	}
	got := strings.Join(own, "\n") + "\n"
	if *update {
		if err := os.WriteFile(goldenNames, []byte(got), 0o644); err != nil {
			t.Fatalf("writing %s: %v", goldenNames, err)
		}
	}
	want, err := os.ReadFile(goldenNames)
	if err != nil {
		t.Fatalf("reading %s (run go test -update to create it): %v", goldenNames, err)
	}
	if got != string(want) {
		t.Errorf("/metrics names differ from %s (go test ./telemetry -run %s -update to accept):\n%s",
			goldenNames, t.Name(), lineDiff(string(want), got))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

func TestMetricsExpositionCarriesNoIdentityOrRequestID(t *testing.T) {
	ex := exercise(t)
	body, _ := scrape(t, ex.tel.Handler(), "/metrics", "")
	secrets := append([]string{identity, "tenant-7", "secret-caller"}, ex.requestIDs...)
	for name, mf := range parseText(t, body) {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				for _, s := range secrets {
					if strings.Contains(lp.GetName(), s) || strings.Contains(lp.GetValue(), s) {
						t.Errorf("%s has label %s=%q carrying %q", name, lp.GetName(), lp.GetValue(), s)
					}
				}
			}
		}
	}
	// Nor anywhere else in the text (HELP lines), nor in the OpenMetrics
	// exposition's exemplars.
	om, _ := scrape(t, ex.tel.Handler(), "/metrics", "application/openmetrics-text; version=1.0.0")
	for _, s := range secrets {
		if strings.Contains(body, s) {
			t.Errorf("exposition contains %q", s)
		}
		if strings.Contains(om, s) {
			t.Errorf("OpenMetrics exposition contains %q", s)
		}
	}
	// The scope labels are switched off.
	if strings.Contains(body, "otel_scope_") {
		t.Errorf("exposition carries otel_scope_* labels, want none")
	}
}

func TestMetricsExpositionPassesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed: install Debian's prometheus package (apt-get install prometheus) to run this check: " + err.Error())
	}
	ex := exercise(t)
	body, _ := scrape(t, ex.tel.Handler(), "/metrics", "")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\nexposition:\n%s", err, out.String(), body)
	}
}

// exemplarLine matches an OpenMetrics counter sample with an exemplar.
var exemplarLine = regexp.MustCompile(`^(registrar_limited_[a-z_]+_total)\{policy="default",verb="(mint|deregister)"\} [0-9.e+]+ # \{([^}]*)\} `)

func TestOpenMetricsScrapeCarriesTheSpansTraceIDAsExemplar(t *testing.T) {
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	sink, err := otelsink.New(nil, tel.MeterProvider())
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	ctx, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "registrar.mint")
	if !span.SpanContext().IsSampled() {
		t.Fatalf("span not sampled at ratio 1")
	}
	sink.Limited(ctx, limiter.Event{Identity: identity, Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 4})
	span.End()
	traceID := span.SpanContext().TraceID().String()

	body, ctype := scrape(t, tel.Handler(), "/metrics", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	if !strings.HasPrefix(ctype, "application/openmetrics-text") {
		t.Fatalf("Content-Type %q, want application/openmetrics-text", ctype)
	}
	if !strings.HasSuffix(strings.TrimSpace(body), "# EOF") {
		t.Errorf("OpenMetrics body does not end with # EOF")
	}
	found := false
	for _, line := range strings.Split(body, "\n") {
		m := exemplarLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[1] != "registrar_limited_admission_total" || m[2] != "mint" {
			t.Errorf("unexpected exemplar on %s{verb=%q}: %s", m[1], m[2], line)
			continue
		}
		if !strings.Contains(m[3], `trace_id="`+traceID+`"`) {
			t.Errorf("exemplar %q does not carry trace_id=%q", m[3], traceID)
		}
		found = true
	}
	if !found {
		t.Errorf("no exemplar on registrar_limited_admission_total{policy=\"default\",verb=\"mint\"}; body:\n%s", body)
	}

	// The classic text format has no exemplars.
	classic, _ := scrape(t, tel.Handler(), "/metrics", "")
	if strings.Contains(classic, "trace_id") {
		t.Errorf("classic text exposition carries an exemplar")
	}
}

// The invocation duration histogram, produced outside the SDK
// (Histograms), carries a sampled invocation's trace id as an exemplar in
// the OpenMetrics scrape, in the bucket of its duration, as the SDK's
// histogram did; an unsampled invocation is counted and leaves none.
func TestOpenMetricsScrapeCarriesTheDurationExemplar(t *testing.T) {
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	obs := verbObserver(t, tel.MeterProvider(), tel.Histograms())
	ctx, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "registrar.mint")
	if !span.SpanContext().IsSampled() {
		t.Fatalf("span not sampled at ratio 1")
	}
	obs.Finished(ctx, vocab.Mint, registrar.ResultThrottled, 3*time.Millisecond)
	span.End()
	obs.Finished(context.Background(), vocab.Mint, registrar.ResultThrottled, 30*time.Millisecond)
	traceID := span.SpanContext().TraceID().String()

	body, _ := scrape(t, tel.Handler(), "/metrics", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	var exemplars []string
	count := ""
	for _, line := range strings.Split(body, "\n") {
		if !strings.Contains(line, `result="throttled"`) || !strings.Contains(line, `verb="mint"`) {
			continue
		}
		if strings.HasPrefix(line, "registrar_invocation_duration_seconds_count{") {
			count = line[strings.LastIndex(line, " ")+1:]
		}
		if strings.HasPrefix(line, "registrar_invocation_duration_seconds_bucket{") && strings.Contains(line, " # {") {
			exemplars = append(exemplars, line)
		}
	}
	if count != "2" {
		t.Errorf("registrar_invocation_duration_seconds_count{verb=mint,result=throttled} = %q, want 2; body:\n%s", count, body)
	}
	if len(exemplars) != 1 || !strings.Contains(exemplars[0], `le="0.005"`) || !strings.Contains(exemplars[0], `trace_id="`+traceID+`"`) || !strings.Contains(exemplars[0], "} 0.003") {
		t.Errorf("duration exemplars %q, want one of 0.003 s in le=\"0.005\" with trace_id=%q", exemplars, traceID)
	}
}

// A Histograms produces one histogram of a name: a second verb observer
// on it is refused, naming the histogram, instead of a reader reporting
// two series sets under one name.
func TestASecondVerbObserverOnOneHistogramsIsRefused(t *testing.T) {
	_, mp, hs := newHistReader(t)
	verbObserver(t, mp, hs)
	if _, err := telemetry.NewVerbObserver(mp, hs); err == nil || !strings.Contains(err.Error(), telemetry.RegistrarInvocationDuration) {
		t.Errorf("second NewVerbObserver on one Histograms: %v, want an error naming %s", err, telemetry.RegistrarInvocationDuration)
	}
	if _, err := telemetry.NewWireObserver(hs); err != nil {
		t.Errorf("a wire observer beside it: %v", err)
	}
	if _, err := telemetry.NewWireObserver(hs); err == nil || !strings.Contains(err.Error(), telemetry.WireRequestWait) {
		t.Errorf("second NewWireObserver on one Histograms: %v, want an error naming %s", err, telemetry.WireRequestWait)
	}
}

// verbObserver is telemetry.NewVerbObserver(mp, hs), failing t on error.
func verbObserver(t *testing.T, mp metric.MeterProvider, hs *telemetry.Histograms) registrar.Observer {
	t.Helper()
	o, err := telemetry.NewVerbObserver(mp, hs)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestEveryPolicySeriesIsExposedWithoutOverflow: the MeterProvider allows
// every series the limited sink can make (otelsink.MaxPolicies policies,
// each with a shadow), so no policy is folded into the SDK's overflow
// series, which its default limit of 2,000 per instrument would do past
// 500 shadowed policies.
func TestEveryPolicySeriesIsExposedWithoutOverflow(t *testing.T) {
	if testing.Short() {
		t.Skip("declares otelsink.MaxPolicies policies")
	}
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	sink, err := otelsink.New(nil, tel.MeterProvider())
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	for i := range otelsink.MaxPolicies - 2 { // default and (other) are the last two
		if err := sink.DeclarePolicy(fmt.Sprintf("policy-%04d", i), true); err != nil {
			t.Fatalf("DeclarePolicy: %v", err)
		}
	}
	// The last two, shadowed too, so the shadow counter has every series
	// it can have, exactly otelsink.MaxSeriesPerCounter: a limit one short
	// of that folds a series into the overflow. The name past the bound
	// goes to (other).
	for _, name := range []string{otelsink.DefaultPolicy, "past-the-bound"} {
		if err := sink.DeclarePolicy(name, true); err != nil {
			t.Fatalf("DeclarePolicy(%s): %v", name, err)
		}
	}
	body, _ := scrape(t, tel.Handler(), "/metrics", "")
	if strings.Contains(body, "overflow") {
		t.Fatalf("the exposition folds series into the SDK's overflow series:\n%s", firstLinesWith(body, "overflow", 3))
	}
	if n := strings.Count(body, "\nregistrar_shadow_limited_total{"); n != otelsink.MaxSeriesPerCounter {
		t.Errorf("%d shadow series, want otelsink.MaxSeriesPerCounter, %d", n, otelsink.MaxSeriesPerCounter)
	}
	if !strings.Contains(body, `policy="(other)"`) {
		t.Errorf("no shadow series of %s:\n%s", otelsink.OtherPolicy, firstLinesWith(body, "registrar_shadow_limited_total{", 3))
	}
}

func firstLinesWith(body, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, sub) && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// get answers GET path on h: the status and the body.
func get(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// /readyz is 503 "starting" until SetProbes; then each probe answers 200
// while its func (none counting as nil) answers nil, else 503 with the
// error's text.
func TestProbesAnswerWhatSetProbesSays(t *testing.T) {
	tel := newTelemetry(t, testConfig(), telemetry.Options{})
	h := tel.Handler()
	if code, body := get(h, "/readyz"); code != http.StatusServiceUnavailable || body != "starting\n" {
		t.Errorf("GET /readyz before SetProbes: %d %q, want 503 %q", code, body, "starting\n")
	}
	if code, body := get(h, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("GET /healthz before SetProbes: %d %q, want 200 %q", code, body, "ok")
	}
	tel.SetProbes(telemetry.Probes{Ready: func() error { return errors.New("stalled") }})
	if code, body := get(h, "/readyz"); code != http.StatusServiceUnavailable || body != "stalled\n" {
		t.Errorf("GET /readyz with Ready failing: %d %q, want 503 %q", code, body, "stalled\n")
	}
	if code, body := get(h, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("GET /healthz with no Live: %d %q, want 200 %q", code, body, "ok")
	}
	tel.SetProbes(telemetry.Probes{Live: func() error { return errors.New("wedged") }, Ready: func() error { return nil }})
	if code, body := get(h, "/healthz"); code != http.StatusServiceUnavailable || body != "wedged\n" {
		t.Errorf("GET /healthz with Live failing: %d %q, want 503 %q", code, body, "wedged\n")
	}
	if code, body := get(h, "/readyz"); code != http.StatusOK || body != "ready" {
		t.Errorf("GET /readyz with Ready nil: %d %q, want 200 %q", code, body, "ready")
	}
}

// A malformed OTEL_RESOURCE_ATTRIBUTES costs its bad entries only: New
// warns and goes on, the good entries on target_info.
func TestAMalformedResourceAttributeIsDroppedWithAWarning(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,broken")
	var logs bytes.Buffer
	tel := newTelemetry(t, testConfig(), telemetry.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "resource partly built") {
		t.Errorf("no warning of the partly built resource; log:\n%s", logs.String())
	}
	body, _ := scrape(t, tel.Handler(), "/metrics", "")
	if !strings.Contains(body, `deployment_environment="prod"`) {
		t.Errorf("target_info lacks the good entry deployment_environment=\"prod\":\n%s", firstLinesWith(body, "target_info", 2))
	}
}
