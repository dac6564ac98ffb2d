package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
