package openbao_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrar-otel/registrar-otel/registrar"
)

func TestEveryRequestIsAClientSpanUnderTheInvocationSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, envOptions{tp: tp})
	h := newVerbs(t, e.b, 512, tp)

	// A bring-up wave's span is the parent of the invocation.
	ctx, wave := tp.Tracer("test").Start(context.Background(), "wave")
	if _, err := h.v.Mint(ctx, mintRequest("h1", 5)); err != nil {
		t.Fatal(err)
	}
	wave.End()

	var invocation sdktrace.ReadOnlySpan
	var names []string
	for _, s := range rec.Ended() {
		if s.Name() == "registrar.mint" {
			invocation = s
		}
	}
	if invocation == nil || invocation.Parent().SpanID() != wave.SpanContext().SpanID() {
		t.Fatalf("no registrar.mint span under the wave span")
	}
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() != invocation.SpanContext().SpanID() {
			continue
		}
		names = append(names, s.Name())
		if s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s has kind %v, want client", s.Name(), s.SpanKind())
		}
		if s.SpanContext().TraceID() != wave.SpanContext().TraceID() {
			t.Errorf("%s is in another trace", s.Name())
		}
	}
	want := []string{"openbao.binding_read", "openbao.binding_claim", "openbao.role_write",
		"openbao.role_id_read", "openbao.secret_id_wrap", "openbao.secret_id_list", "openbao.secret_id_list_unwrap", "openbao.binding_activate"}
	if !slices.Equal(names, want) {
		t.Errorf("client spans under the invocation = %v, want %v", names, want)
	}
	if got := len(e.px.requests()); got != len(want) {
		t.Errorf("the proxy saw %d requests for %d spans", got, len(want))
	}
}

func TestRequestLatencyAndErrorsAreMeasuredByOperation(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	e := newEnv(t, envOptions{mp: mp})
	ctx := context.Background()
	if _, _, err := e.b.Mint(ctx, mintOp("h1-review-020", "h1", "review")); err != nil {
		t.Fatal(err)
	}
	e.px.failNth(0, fail503)
	if _, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: "h1-review-020", Host: "h1"}); err == nil {
		t.Fatal("the injected 503 did not fail the deregister")
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	durations := map[string]uint64{}
	errorsByOpKind := map[[2]string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "registrar.backend.request.duration":
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					checkLabels(t, m.Name, dp.Attributes, "backend", "operation")
					op, _ := dp.Attributes.Value("operation")
					durations[op.AsString()] += dp.Count
				}
			case "registrar.backend.request.errors":
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					checkLabels(t, m.Name, dp.Attributes, "backend", "kind", "operation")
					op, _ := dp.Attributes.Value("operation")
					kind, _ := dp.Attributes.Value("kind")
					errorsByOpKind[[2]string{op.AsString(), kind.AsString()}] += dp.Value
				}
			}
		}
	}
	for _, op := range mintSequence {
		if durations[op] == 0 {
			t.Errorf("no duration recorded for %s: %v", op, durations)
		}
	}
	if durations["binding_read"] != 2 {
		t.Errorf("binding_read measured %d times, want 2 (the mint's and the failed deregister's)", durations["binding_read"])
	}
	var total int64
	for k, v := range errorsByOpKind {
		total += v
		if v != 0 && k != [2]string{"binding_read", "server_error"} {
			t.Errorf("errors{%s,%s} = %d, want 0", k[0], k[1], v)
		}
	}
	if total != 1 || errorsByOpKind[[2]string{"binding_read", "server_error"}] != 1 {
		t.Errorf("errors = %v, want exactly one, binding_read server_error", errorsByOpKind)
	}
}

func checkLabels(t *testing.T, metric string, set attribute.Set, want ...string) {
	t.Helper()
	var keys []string
	for _, kv := range set.ToSlice() {
		keys = append(keys, string(kv.Key))
	}
	if !slices.Equal(keys, want) {
		t.Errorf("%s has labels %v, want exactly %v (low cardinality: never an id)", metric, keys, want)
	}
}
