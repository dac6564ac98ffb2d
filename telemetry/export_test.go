package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/otlptest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// emit records one limited admission inside a sampled span and flushes, so
// a configured exporter of either signal has something to send.
func emit(t *testing.T, tel *telemetry.Telemetry) error {
	t.Helper()
	sink, err := otelsink.New(nil, tel.MeterProvider())
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	ctx, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "registrar.mint")
	sink.Limited(ctx, limiter.Event{Verb: vocab.Mint, Bucket: vocab.Admission, RetryAfterSeconds: 2})
	span.End()
	return tel.ForceFlush(context.Background())
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// The acceptance point: with only a traces endpoint configured, no metric
// export is attempted (and the other way round).
func TestPerSignalEndpoints(t *testing.T) {
	tests := []struct {
		name                      string
		cfg                       func(url string) config.Telemetry
		env                       func(url string) map[string]string
		wantTraces, wantMetrics   bool
		wantTracePath, wantMetric string
	}{
		{"traces endpoint only", func(u string) config.Telemetry {
			c := testConfig()
			c.OTLPTracesEndpoint = u + "/v1/traces"
			return c
		}, nil, true, false, "/v1/traces", ""},
		{"metrics endpoint only, used as is", func(u string) config.Telemetry {
			c := testConfig()
			c.OTLPMetricsEndpoint = u + "/v1/metrics"
			return c
		}, nil, false, true, "", "/v1/metrics"},
		{"otlp_endpoint with metrics none", func(u string) config.Telemetry {
			c := testConfig()
			c.OTLPEndpoint = u
			c.OTLPMetricsEndpoint = config.SignalOff
			return c
		}, nil, true, false, "/v1/traces", ""},
		{"otlp_endpoint with traces none", func(u string) config.Telemetry {
			c := testConfig()
			c.OTLPEndpoint = u
			c.OTLPTracesEndpoint = config.SignalOff
			return c
		}, nil, false, true, "", "/v1/metrics"},
		{"configuration beats the environment", func(u string) config.Telemetry {
			c := testConfig()
			c.OTLPTracesEndpoint = u + "/v1/traces"
			return c
		}, func(u string) map[string]string {
			return map[string]string{telemetry.EnvOTLPTracesEndpoint: "http://127.0.0.1:1/elsewhere"}
		}, true, false, "/v1/traces", ""},
		{"environment base endpoint", func(string) config.Telemetry { return testConfig() },
			func(u string) map[string]string { return map[string]string{telemetry.EnvOTLPEndpoint: u} },
			true, true, "/v1/traces", "/v1/metrics"},
		{"environment per-signal endpoint and OTEL_METRICS_EXPORTER=none", func(string) config.Telemetry { return testConfig() },
			func(u string) map[string]string {
				// The base points at a closed port: only the per-signal
				// variable can have sent the spans.
				return map[string]string{telemetry.EnvOTLPTracesEndpoint: u + "/v1/traces", telemetry.EnvOTLPEndpoint: "http://127.0.0.1:1",
					telemetry.EnvMetricsExporter: "none"}
			}, true, false, "/v1/traces", ""},
		{"nothing configured, nothing in the environment", func(string) config.Telemetry { return testConfig() },
			nil, false, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t)
			var e map[string]string
			if tt.env != nil {
				e = tt.env(rcv.URL)
			}
			logs := newSyncWriter()
			tel := newTelemetry(t, tt.cfg(rcv.URL), telemetry.Options{Getenv: env(e), Logger: slog.New(slog.NewTextHandler(logs, nil))})
			// New says where it exports when either signal goes over OTLP,
			// and says nothing of OTLP when neither does.
			if got, want := strings.Contains(logs.String(), "OTLP/HTTP export enabled"), tt.wantTraces || tt.wantMetrics; got != want {
				t.Errorf("New logged that OTLP export is enabled: %v, want %v; log:\n%s", got, want, logs.String())
			}
			if err := emit(t, tel); err != nil {
				t.Fatalf("ForceFlush: %v", err)
			}
			_, paths := rcv.Requests()
			traces, metrics := 0, 0
			for _, p := range paths {
				switch {
				case tt.wantTracePath != "" && p == tt.wantTracePath:
					traces++
				case tt.wantMetric != "" && p == tt.wantMetric:
					metrics++
				default:
					t.Errorf("request to %s, want none there", p)
				}
			}
			if (traces > 0) != tt.wantTraces || (metrics > 0) != tt.wantMetrics {
				t.Errorf("trace exports %d, metric exports %d (paths %v); want traces %v, metrics %v",
					traces, metrics, paths, tt.wantTraces, tt.wantMetrics)
			}
		})
	}
}

func TestTracesOnlyOptionBuildsNoMetricExporter(t *testing.T) {
	rcv := newReceiver(t)
	cfg := testConfig()
	cfg.OTLPEndpoint = rcv.URL
	tel := newTelemetry(t, cfg, telemetry.Options{TracesOnly: true, Getenv: env(nil)})
	if err := emit(t, tel); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}
	_, paths := rcv.Requests()
	if len(paths) == 0 {
		t.Fatal("no trace export")
	}
	for _, p := range paths {
		if p != "/v1/traces" {
			t.Errorf("request to %s; a traces-only Telemetry sends only /v1/traces", p)
		}
	}
}

func TestEndpointErrorsNameTheKeyOrVariableAndHideCredentials(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Telemetry
		env  map[string]string
		want []string
	}{
		{"bad traces key", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPTracesEndpoint: "collector:4318"},
			nil, []string{"telemetry.otlp_traces_endpoint must be an http:// or https:// URL"}},
		{"bad metrics key", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPMetricsEndpoint: "off"},
			nil, []string{"telemetry.otlp_metrics_endpoint must be an http:// or https:// URL"}},
		{"credentials in the environment", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000},
			map[string]string{telemetry.EnvOTLPEndpoint: "https://user:hunter2@collector:4318"},
			[]string{"OTEL_EXPORTER_OTLP_ENDPOINT must not carry credentials", "OTEL_EXPORTER_OTLP_HEADERS"}},
		{"grpc protocol", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000},
			map[string]string{telemetry.EnvOTLPEndpoint: "http://collector:4317", telemetry.EnvOTLPProtocol: "grpc"},
			[]string{`OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf"`}},
		{"grpc protocol with traces alone", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPTracesEndpoint: "http://127.0.0.1:4318"},
			map[string]string{telemetry.EnvOTLPProtocol: "grpc"},
			[]string{`OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf"`}},
		{"grpc protocol with metrics alone", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPMetricsEndpoint: "http://127.0.0.1:4318"},
			map[string]string{telemetry.EnvOTLPProtocol: "grpc"},
			[]string{`OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf"`}},
		{"bad base reported once", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: "ftp://x"},
			nil, []string{"telemetry.otlp_endpoint must be an http:// or https:// URL"}},
		// Issue 27, item 8: credentials in the headers over plain http to
		// another host were accepted (the OpenBao rule refuses the same).
		{"plain http to another host with headers", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: "http://collector.example.com:4318"},
			map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=hunter2"},
			[]string{"telemetry.otlp_endpoint must be an https:// URL unless its host is a loopback address while OTEL_EXPORTER_OTLP_HEADERS is set"}},
		{"plain http from the variable with signal headers", config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000},
			map[string]string{telemetry.EnvOTLPEndpoint: "http://collector.example.com:4318", "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "k=hunter2"},
			[]string{"OTEL_EXPORTER_OTLP_ENDPOINT must be an https:// URL unless its host is a loopback address while OTEL_EXPORTER_OTLP_METRICS_HEADERS is set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := telemetry.New(context.Background(), tt.cfg, telemetry.Options{Getenv: env(tt.env)})
			if err == nil {
				t.Fatal("New accepted the configuration")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("error %q echoes the password", msg)
			}
			if n := strings.Count(msg, "telemetry.otlp_endpoint"); n > 1 {
				t.Errorf("error %q names telemetry.otlp_endpoint %d times, want once", msg, n)
			}
		})
	}
}

// syncWriter is a log destination the SDK's goroutines may write to.
type syncWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newSyncWriter() *syncWriter { return &syncWriter{wrote: make(chan struct{}, 1)} }

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Headers come from the standard variable, reach the collector, and are
// never logged (not even when the export then fails).
func TestOTLPHeadersFromTheEnvironmentReachTheCollectorAndAreNotLogged(t *testing.T) {
	const secret = "Bearer s3cr3t-t0ken"
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization="+strings.ReplaceAll(secret, " ", "%20"))
	rcv := newReceiver(t)
	logs := newSyncWriter()
	cfg := testConfig()
	cfg.OTLPEndpoint = rcv.URL
	tel := newTelemetry(t, cfg, telemetry.Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err := emit(t, tel); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}
	hs := rcv.Headers()
	if len(hs) == 0 {
		t.Fatal("no request reached the collector")
	}
	for i, h := range hs {
		if got := h.Get("Authorization"); got != secret {
			t.Errorf("request %d: Authorization %q, want %q", i, got, secret)
		}
	}

	// A failing collector: the errors are logged, the token is not.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	cfg.OTLPEndpoint = closed
	tel2, err := telemetry.New(context.Background(), cfg, telemetry.Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := emit(t, tel2); err == nil {
		t.Fatal("ForceFlush to a closed port succeeded")
	}
	if err := tel2.Shutdown(context.Background()); err == nil {
		t.Fatal("Shutdown flushing to a closed port succeeded")
	}
	out := logs.String()
	if !strings.Contains(out, closed) {
		t.Errorf("the log does not name the endpoint %s:\n%s", closed, out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("the log carries the header value:\n%s", out)
	}
}

// OTel SDK errors raised on its own goroutines (the periodic metric
// export, the span batcher) go through slog: a JSON log stays JSON.
func TestSDKErrorsAreLoggedThroughSlogAsJSON(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	// The standard variables: export every 20 ms, give up after 100 ms.
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "20")
	t.Setenv("OTEL_METRIC_EXPORT_TIMEOUT", "100")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "100")
	logs := newSyncWriter()
	cfg := testConfig()
	cfg.OTLPEndpoint = closed
	tel, err := telemetry.New(context.Background(), cfg, telemetry.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	// The periodic reader's failure is reported only through the global
	// error handler: wait for it (on the SDK's goroutine, not a timer here).
	for !strings.Contains(logs.String(), "OpenTelemetry SDK error") {
		select {
		case <-logs.wrote:
		case <-time.After(time.Minute):
			t.Fatalf("no SDK error logged within a minute of exporting to a closed port; log:\n%s", logs.String())
		}
	}
	for i, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line %d is not JSON: %q", i, line)
		}
	}
	if !strings.Contains(logs.String(), "/v1/metrics") {
		t.Errorf("the SDK error does not name the metrics endpoint:\n%s", logs.String())
	}
}

// The load driver exports where the daemon of the same configuration
// would, spans only, and flushes on Close; an --otlp-endpoint override wins.
func TestDriverFollowsTheConfigurationAndFlushesOnClose(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cfg      func(url string) config.Telemetry
		override func(url string) string
	}{
		{"otlp_endpoint", func(u string) config.Telemetry { return config.Telemetry{OTLPEndpoint: u} }, nil},
		{"otlp_traces_endpoint", func(u string) config.Telemetry {
			return config.Telemetry{OTLPEndpoint: "http://127.0.0.1:1", OTLPTracesEndpoint: u + "/v1/traces"}
		}, nil},
		{"flag over the file", func(string) config.Telemetry {
			return config.Telemetry{OTLPTracesEndpoint: "http://127.0.0.1:1/v1/traces"}
		}, func(u string) string { return u }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t)
			override := ""
			if tt.override != nil {
				override = tt.override(rcv.URL)
			}
			d, err := telemetry.NewDriver(context.Background(), tt.cfg(rcv.URL), override, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, span := d.TracerProvider().Tracer("test").Start(context.Background(), "bringup.wave")
			span.End()
			if err := d.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			spans := rcv.Spans()
			if len(spans) != 1 || spans[0].GetName() != "bringup.wave" || spans[0].Service != telemetry.DriverServiceName {
				t.Fatalf("received %d spans %v, want the one bringup.wave of %s", len(spans), spans, telemetry.DriverServiceName)
			}
			if _, paths := rcv.Requests(); len(paths) != 1 || paths[0] != "/v1/traces" {
				t.Errorf("requests %v, want one /v1/traces (a driver exports no metrics)", paths)
			}
		})
	}
}

// The headers rule leaves https and loopback endpoints alone.
func TestHeadersAreAcceptedOverHTTPSOrLoopback(t *testing.T) {
	for _, endpoint := range []string{"https://collector.example.com:4318", "http://127.0.0.1:4318", "http://localhost:4318", "http://[::1]:4318"} {
		tel, err := telemetry.New(context.Background(),
			config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: endpoint},
			telemetry.Options{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=x"})})
		if err != nil {
			t.Errorf("%s with headers: %v, want it accepted", endpoint, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tel.Shutdown(ctx)
		cancel()
	}
}

// newReceiver starts the shared test collector for t and checks at the
// end that it saw no protocol error.
func newReceiver(t *testing.T) *otlptest.Receiver {
	r := otlptest.Start()
	t.Cleanup(func() {
		r.Close()
		for _, err := range r.Errors() {
			t.Errorf("receiver: %v", err)
		}
	})
	return r
}

var attrString = otlptest.AttrString

// wantServiceName checks the service.name of one exported resource; what
// names the signal ("span", "metric") in the failure.
func wantServiceName(t *testing.T, what string, attrs []*commonpb.KeyValue, want string) {
	t.Helper()
	if name, _ := attrString(attrs, "service.name"); name != want {
		t.Errorf("%s resource service.name %q, want %q", what, name, want)
	}
}

func TestOTLPExportReachesTheCollector(t *testing.T) {
	rcv := newReceiver(t)
	cfg := testConfig()
	cfg.OTLPEndpoint = rcv.URL
	tel := newTelemetry(t, cfg, telemetry.Options{ServiceVersion: "v1.2.3"})
	// The wait histogram is a producer's: the OTLP reader New built is
	// given it, as the Prometheus exporter is.
	tel.WireObserver().Waited(server.ListenerTLS, 3*time.Millisecond)

	if err := emit(t, tel); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}

	traces, metrics := rcv.Traces(), rcv.Metrics()
	_, paths := rcv.Requests()
	if len(traces) == 0 {
		t.Fatalf("collector received no trace export (paths %v)", paths)
	}
	var spans int
	for _, req := range traces {
		for _, rs := range req.GetResourceSpans() {
			wantServiceName(t, "span", rs.GetResource().GetAttributes(), cfg.ServiceName)
			if v, _ := attrString(rs.GetResource().GetAttributes(), "service.version"); v != "v1.2.3" {
				t.Errorf("span resource service.version %q, want v1.2.3", v)
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans++
					if s.GetName() != "registrar.mint" {
						t.Errorf("span name %q, want registrar.mint", s.GetName())
					}
					if len(s.GetEvents()) != 1 || s.GetEvents()[0].GetName() != otelsink.EventName {
						t.Errorf("span events %v, want one %s", s.GetEvents(), otelsink.EventName)
					}
				}
			}
		}
	}
	if spans != 1 {
		t.Errorf("collector received %d spans, want 1", spans)
	}

	if len(metrics) == 0 {
		t.Fatalf("collector received no metric export (paths %v)", paths)
	}
	var found, waited bool
	for _, req := range metrics {
		for _, rm := range req.GetResourceMetrics() {
			wantServiceName(t, "metric", rm.GetResource().GetAttributes(), cfg.ServiceName)
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					if m.GetName() == telemetry.WireRequestWait {
						for _, dp := range m.GetHistogram().GetDataPoints() {
							if l, _ := attrString(dp.GetAttributes(), "listener"); l == "tls" && dp.GetCount() == 1 && dp.GetSum() == 0.003 {
								waited = true
							}
						}
					}
					if m.GetName() != otelsink.AdmissionCounter {
						continue
					}
					for _, dp := range m.GetSum().GetDataPoints() {
						if verb, _ := attrString(dp.GetAttributes(), "verb"); verb == "mint" && dp.GetAsInt() == 1 {
							found = true
						}
					}
				}
			}
		}
	}
	if !found {
		t.Errorf("collector received no %s{verb=mint}=1 data point", otelsink.AdmissionCounter)
	}
	if !waited {
		t.Errorf("collector received no %s{listener=tls} data point of one 3 ms wait", telemetry.WireRequestWait)
	}
}

func TestOTLPEndpointPathIsABase(t *testing.T) {
	rcv := newReceiver(t)
	cfg := testConfig()
	cfg.OTLPEndpoint = rcv.URL + "/"
	tel := newTelemetry(t, cfg, telemetry.Options{})
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "s")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	_, paths := rcv.Requests()
	if len(rcv.Traces()) != 1 || len(rcv.Metrics()) == 0 {
		t.Errorf("after Shutdown the collector got %d trace and %d metric exports (paths %v), want 1 and at least 1",
			len(rcv.Traces()), len(rcv.Metrics()), paths)
	}
}

func TestNoOTLPEndpointAttemptsNothing(t *testing.T) {
	rcv := newReceiver(t)
	// No endpoint in the configuration and none in the standard variables
	// (TestPerSignalEndpoints covers the variables): no exporter at all.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")

	tel, err := telemetry.New(context.Background(), testConfig(), telemetry.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := emit(t, tel); err != nil {
		t.Errorf("ForceFlush: %v", err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if n, paths := rcv.Requests(); n != 0 {
		t.Errorf("collector received %d requests %v with telemetry.otlp_endpoint unset, want 0", n, paths)
	}
}

// Without OTEL_METRIC_EXPORT_INTERVAL New pushes metrics every
// MetricExportInterval; with it, at the interval the variable says, which
// MetricExportInterval must not override. Set to 1 ms, the first periodic
// export (no ForceFlush) must arrive long before MetricExportInterval.
func TestOTELMetricExportIntervalSetsThePushInterval(t *testing.T) {
	exported := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/metrics" {
			select {
			case exported <- struct{}{}:
			default:
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "1")
	cfg := testConfig()
	cfg.OTLPMetricsEndpoint = srv.URL + "/v1/metrics"
	newTelemetry(t, cfg, telemetry.Options{})
	select {
	case <-exported:
	case <-time.After(telemetry.MetricExportInterval / 2):
		t.Fatalf("no periodic metric export within %v with OTEL_METRIC_EXPORT_INTERVAL=1 (ms)", telemetry.MetricExportInterval/2)
	}
}

// Both signals are sent gzipped unless a compression variable says
// otherwise: the shared one for both, a signal's own for that signal only.
func TestOTLPExportIsGzippedUnlessACompressionVariableSaysOtherwise(t *testing.T) {
	for _, tt := range []struct {
		name                          string
		env                           map[string]string
		wantTraceGzip, wantMetricGzip bool
	}{
		{"no variable", nil, true, true},
		{"OTEL_EXPORTER_OTLP_COMPRESSION=none", map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "none"}, false, false},
		{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=none", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"}, false, true},
		{"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION=none", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "none"}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v) // the exporters read the process's
			}
			rcv := newReceiver(t)
			cfg := testConfig()
			cfg.OTLPEndpoint = rcv.URL
			tel := newTelemetry(t, cfg, telemetry.Options{Getenv: env(tt.env)})
			if err := emit(t, tel); err != nil {
				t.Fatalf("ForceFlush: %v", err)
			}
			_, paths := rcv.Requests()
			headers := rcv.Headers()
			seen := map[string]bool{}
			for i, p := range paths {
				gz := headers[i].Get("Content-Encoding") == "gzip"
				want := map[string]bool{"/v1/traces": tt.wantTraceGzip, "/v1/metrics": tt.wantMetricGzip}[p]
				if gz != want {
					t.Errorf("request to %s gzipped: %v, want %v", p, gz, want)
				}
				seen[p] = true
			}
			if !seen["/v1/traces"] || !seen["/v1/metrics"] {
				t.Errorf("requests to %v, want both signals", paths)
			}
		})
	}
}
