// Package otlptest is a minimal OTLP/HTTP collector for tests: it decodes
// the real protobuf export requests posted to /v1/traces and /v1/metrics
// (gzip or not) and keeps them for assertions. It is not a Collector; it
// exists so tests exercise the real exporters end to end on loopback.
package otlptest

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running OTLP/HTTP receiver on 127.0.0.1. It is safe for
// concurrent use.
type Receiver struct {
	// URL is the base URL to configure as an OTLP endpoint.
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	traces   []*coltracepb.ExportTraceServiceRequest
	metrics  []*colmetricpb.ExportMetricsServiceRequest
	requests int
	paths    []string
	headers  []http.Header
	errs     []error
}

// Start starts a receiver; Close stops it.
func Start() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	return r
}

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	r.paths = append(r.paths, req.URL.Path)
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.fail(fmt.Errorf("%s %s with Content-Type %q, want POST application/x-protobuf", req.Method, req.URL.Path, req.Header.Get("Content-Type")))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(fmt.Errorf("gzip: %w", err))
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		r.fail(fmt.Errorf("reading body: %w", err))
		return
	}
	var resp proto.Message
	switch req.URL.Path {
	case "/v1/traces":
		keep(r, raw, new(coltracepb.ExportTraceServiceRequest), "ExportTraceServiceRequest", &r.traces)
		resp = new(coltracepb.ExportTraceServiceResponse)
	case "/v1/metrics":
		keep(r, raw, new(colmetricpb.ExportMetricsServiceRequest), "ExportMetricsServiceRequest", &r.metrics)
		resp = new(colmetricpb.ExportMetricsServiceResponse)
	default:
		r.fail(fmt.Errorf("unexpected path %s", req.URL.Path))
		http.NotFound(w, req)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// keep decodes raw, an export request named name, into m and appends it to
// the requests r received of its signal; a request that does not decode is
// a protocol error, kept all the same.
func keep[M proto.Message](r *Receiver, raw []byte, m M, name string, to *[]M) {
	if err := proto.Unmarshal(raw, m); err != nil {
		r.fail(fmt.Errorf("decoding %s: %w", name, err))
	}
	r.mu.Lock()
	*to = append(*to, m)
	r.mu.Unlock()
}

// Errors returns every protocol error the receiver saw.
func (r *Receiver) Errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// Traces returns the trace export requests received so far.
func (r *Receiver) Traces() []*coltracepb.ExportTraceServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*coltracepb.ExportTraceServiceRequest(nil), r.traces...)
}

// Metrics returns the metric export requests received so far.
func (r *Receiver) Metrics() []*colmetricpb.ExportMetricsServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*colmetricpb.ExportMetricsServiceRequest(nil), r.metrics...)
}

// Requests returns how many requests arrived, and their paths.
func (r *Receiver) Requests() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]string(nil), r.paths...)
}

// Headers returns the request headers of every request, in arrival order.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Span is one received span with its resource's service.name.
type Span struct {
	Service string
	*tracepb.Span
}

// Spans flattens every received span.
func (r *Receiver) Spans() []Span {
	var out []Span
	for _, req := range r.Traces() {
		for _, rs := range req.GetResourceSpans() {
			svc, _ := AttrString(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, Span{Service: svc, Span: s})
				}
			}
		}
	}
	return out
}

// AttrString returns the string value of key among attrs.
func AttrString(attrs []*commonpb.KeyValue, key string) (string, bool) {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue(), true
		}
	}
	return "", false
}
