package telemetry_test

import (
	"context"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/otlptest"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

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
	var found bool
	for _, req := range metrics {
		for _, rm := range req.GetResourceMetrics() {
			wantServiceName(t, "metric", rm.GetResource().GetAttributes(), cfg.ServiceName)
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
