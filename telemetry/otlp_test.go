package telemetry_test

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is a minimal OTLP/HTTP collector: it decodes the protobuf
// export requests posted to /v1/traces and /v1/metrics and keeps them.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	traces   []*coltracepb.ExportTraceServiceRequest
	metrics  []*colmetricpb.ExportMetricsServiceRequest
	requests int
	paths    []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	r.paths = append(r.paths, req.URL.Path)
	r.mu.Unlock()
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.t.Errorf("receiver: %s %s with Content-Type %q, want POST application/x-protobuf", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.t.Errorf("receiver: gzip: %v", err)
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		r.t.Errorf("receiver: reading body: %v", err)
		return
	}
	var resp proto.Message
	switch req.URL.Path {
	case "/v1/traces":
		m := new(coltracepb.ExportTraceServiceRequest)
		if err := proto.Unmarshal(raw, m); err != nil {
			r.t.Errorf("receiver: decoding ExportTraceServiceRequest: %v", err)
		}
		r.mu.Lock()
		r.traces = append(r.traces, m)
		r.mu.Unlock()
		resp = new(coltracepb.ExportTraceServiceResponse)
	case "/v1/metrics":
		m := new(colmetricpb.ExportMetricsServiceRequest)
		if err := proto.Unmarshal(raw, m); err != nil {
			r.t.Errorf("receiver: decoding ExportMetricsServiceRequest: %v", err)
		}
		r.mu.Lock()
		r.metrics = append(r.metrics, m)
		r.mu.Unlock()
		resp = new(colmetricpb.ExportMetricsServiceResponse)
	default:
		r.t.Errorf("receiver: unexpected path %s", req.URL.Path)
		http.NotFound(w, req)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrString(attrs []*commonpb.KeyValue, key string) (string, bool) {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue(), true
		}
	}
	return "", false
}

func TestOTLPExportReachesTheCollector(t *testing.T) {
	rcv := newReceiver(t)
	cfg := testConfig()
	cfg.OTLPEndpoint = rcv.srv.URL
	tel := newTelemetry(t, cfg, telemetry.Options{ServiceVersion: "v1.2.3"})

	sink, err := otelsink.New(nil, tel.MeterProvider())
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	ctx, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "registrar.mint")
	sink.Limited(ctx, limiter.Event{Verb: limiter.Mint, Bucket: limiter.Admission, RetryAfterSeconds: 2})
	span.End()

	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.traces) == 0 {
		t.Fatalf("collector received no trace export (paths %v)", rcv.paths)
	}
	var spans int
	for _, req := range rcv.traces {
		for _, rs := range req.GetResourceSpans() {
			if name, _ := attrString(rs.GetResource().GetAttributes(), "service.name"); name != cfg.ServiceName {
				t.Errorf("span resource service.name %q, want %q", name, cfg.ServiceName)
			}
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

	if len(rcv.metrics) == 0 {
		t.Fatalf("collector received no metric export (paths %v)", rcv.paths)
	}
	var found bool
	for _, req := range rcv.metrics {
		for _, rm := range req.GetResourceMetrics() {
			if name, _ := attrString(rm.GetResource().GetAttributes(), "service.name"); name != cfg.ServiceName {
				t.Errorf("metric resource service.name %q, want %q", name, cfg.ServiceName)
			}
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
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
}

func TestOTLPEndpointPathIsABase(t *testing.T) {
	rcv := newReceiver(t)
	cfg := testConfig()
	cfg.OTLPEndpoint = rcv.srv.URL + "/"
	tel := newTelemetry(t, cfg, telemetry.Options{})
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "s")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.traces) != 1 || len(rcv.metrics) == 0 {
		t.Errorf("after Shutdown the collector got %d trace and %d metric exports (paths %v), want 1 and at least 1",
			len(rcv.traces), len(rcv.metrics), rcv.paths)
	}
}

func TestNoOTLPEndpointAttemptsNothing(t *testing.T) {
	rcv := newReceiver(t)
	// Even an environment pointing at a collector does not switch export on:
	// telemetry.otlp_endpoint is the only switch.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rcv.srv.URL+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", rcv.srv.URL+"/v1/metrics")

	tel, err := telemetry.New(context.Background(), testConfig(), telemetry.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sink, err := otelsink.New(nil, tel.MeterProvider())
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	ctx, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "registrar.mint")
	sink.Limited(ctx, limiter.Event{Verb: limiter.Mint, Bucket: limiter.Admission, RetryAfterSeconds: 2})
	span.End()
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush: %v", err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.requests != 0 {
		t.Errorf("collector received %d requests %v with telemetry.otlp_endpoint unset, want 0", rcv.requests, rcv.paths)
	}
}
