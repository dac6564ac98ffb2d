package registrar_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/metrictest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// traced is the verbs with the production sink chain's OTel link
// (otelsink → counting) and a span recorder.
func traced(t *testing.T, prBurst, admBurst uint32, backend registrar.Backend) (*registrar.Verbs, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	return instrumented(t, tp, mp, nil, limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: prBurst, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: admBurst, RefillInterval: 1500 * time.Millisecond},
	}, backend), rec
}

// instrumented is the verbs of one "review" component (many per host) on
// tp and mp, with the production sink chain's OTel link (otelsink →
// counting) and a limiter of lc whose clock stands still.
func instrumented(t testing.TB, tp trace.TracerProvider, mp metric.MeterProvider, hs *telemetry.Histograms, lc limiter.Config, backend registrar.Backend) *registrar.Verbs {
	t.Helper()
	sink, err := otelsink.New(counting.New(), mp)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := telemetry.NewVerbObserver(mp, hs)
	if err != nil {
		t.Fatal(err)
	}
	lc.Now = func() limiter.Instant { return 0 }
	lim, err := limiter.New(lc, sink)
	if err != nil {
		t.Fatal(err)
	}
	v, err := registrar.New(registrar.Config{Components: map[string]vocab.Multiplicity{"review": vocab.ManyPerHost}, MaxWrapTTLSeconds: 1800},
		registrar.Deps{Limiter: lim, Audit: &audittest.AuditLog{}, Backend: backend, TracerProvider: tp, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func lastSpan(t *testing.T, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := rec.Ended()
	if len(spans) == 0 {
		t.Fatal("no span ended")
	}
	return spans[len(spans)-1]
}

func events(s sdktrace.ReadOnlySpan) map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, e := range s.Events() {
		m[e.Name] = attrs(e.Attributes)
	}
	return m
}

func TestAdmittedMintSpanCarriesTheAuditEvents(t *testing.T) {
	v, rec := traced(t, 32, 512, registrartest.NewBackend(t))
	res, err := v.Mint(context.Background(), goodMint())
	if err != nil {
		t.Fatal(err)
	}
	s := lastSpan(t, rec)
	a := attrs(s.Attributes())
	if s.Name() != "registrar.mint" || s.SpanKind() != trace.SpanKindServer {
		t.Fatalf("span %s (%v), want the server span registrar.mint", s.Name(), s.SpanKind())
	}
	want := map[string]string{"registrar.verb": "mint", "registrar.request_id": res.RequestID, "registrar.result": "first_mint", "registrar.registration_id": "h1-review-007"}
	for k, w := range want {
		if a[k] != w {
			t.Errorf("attribute %s = %q, want %q", k, a[k], w)
		}
	}
	ev := events(s)
	if _, ok := ev["audit.intent_written"]; !ok {
		t.Error("no audit.intent_written event")
	}
	if _, ok := ev["audit.outcome_written"]; !ok {
		t.Error("no audit.outcome_written event")
	}
	if _, ok := ev["registrar.limited"]; ok {
		t.Error("an admitted mint carries registrar.limited")
	}
}

func TestThrottledMintSpanCarriesTheLimitedEventWithRetryAfter(t *testing.T) {
	v, rec := traced(t, 32, 1, registrartest.NewBackend(t))
	v.Mint(context.Background(), goodMint()) // spends the one token
	_, err := v.Mint(context.Background(), goodMint())
	if err == nil {
		t.Fatal("second mint admitted")
	}
	s := lastSpan(t, rec)
	if got := attrs(s.Attributes())["registrar.result"]; got != "throttled" {
		t.Fatalf("result %q, want throttled", got)
	}
	ev := events(s)
	lim, ok := ev["registrar.limited"]
	if !ok {
		t.Fatalf("events %v, want registrar.limited", ev)
	}
	// 1.5 s per token, rounded up: retry after 2 s.
	if lim["registrar.limited_bucket"] != "admission" || lim["registrar.verb"] != "mint" || lim["registrar.retry_after_s"] != "2" {
		t.Fatalf("registrar.limited %v, want admission/mint/retry_after_s=2", lim)
	}
	if _, ok := ev["audit.intent_written"]; ok {
		t.Fatal("a throttled mint wrote an intent")
	}
}

func TestLimitedRefusalSpanCarriesTheEventAndItsRealRefusal(t *testing.T) {
	v, rec := traced(t, 1, 512, registrartest.FailingBackend{T: t})
	bad := goodMint()
	bad.ServiceName = "Not-A-Label"
	v.Mint(context.Background(), bad) // recorded
	v.Mint(context.Background(), bad) // limited
	s := lastSpan(t, rec)
	a := attrs(s.Attributes())
	if a["registrar.result"] != "refused" || a["registrar.refusal_reason"] != "invalid_service_name" {
		t.Fatalf("attributes %v, want result refused with its real reason", a)
	}
	lim, ok := events(s)["registrar.limited"]
	if !ok || lim["registrar.limited_bucket"] != "predecision_refusal" {
		t.Fatalf("registrar.limited %v, want predecision_refusal", lim)
	}
	if _, ok := lim["registrar.retry_after_s"]; ok {
		t.Fatal("a pre-derivation limit carries a retry-after: it is not a throttle")
	}
}

func TestInvocationSpanIsAChildOfTheCallersContext(t *testing.T) {
	v, rec := traced(t, 32, 512, registrartest.NewBackend(t))
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	if _, err := v.Deregister(ctx, goodDeregister()); err != nil {
		t.Fatal(err)
	}
	s := lastSpan(t, rec)
	if s.Name() != "registrar.deregister" || s.Parent().SpanID() != sid || s.SpanContext().TraceID() != tid {
		t.Fatalf("span %s parent %v trace %v, want a child of %v", s.Name(), s.Parent().SpanID(), s.SpanContext().TraceID(), sid)
	}
}

// TestInvocationCountersAreExactSampledOrNot: registrar.invocations and
// registrar.limited.admission count every call, per verb and result, at
// every collection, whether the calls' spans are sampled (counted at once,
// with exemplars) or not (counted at the collection: see
// internal/deferredcount), and neither kind of call is counted twice.
func TestInvocationCountersAreExactSampledOrNot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{
		{"unsampled", sdktrace.NeverSample()},
		{"sampled", sdktrace.AlwaysSample()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The duration histogram is produced by hs, as Telemetry's
			// readers are given theirs.
			hs := telemetry.NewHistograms()
			reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hs))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			v := instrumented(t, tp, mp, hs, limiter.Config{
				PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
				Admission:          limiter.BucketConfig{Burst: 2, RefillInterval: time.Hour},
			}, registrartest.NewBackend(t))
			ctx := context.Background()
			for range 7 { // first_mint, idempotent_remint, then 5 throttled
				v.Mint(ctx, goodMint())
			}
			want := map[metrictest.Point]int64{
				metrictest.At(registrar.ScopeName, "registrar.invocations", "verb", "mint", "result", "first_mint"):                1,
				metrictest.At(registrar.ScopeName, "registrar.invocations", "verb", "mint", "result", "idempotent_remint"):         1,
				metrictest.At(registrar.ScopeName, "registrar.invocations", "verb", "mint", "result", "throttled"):                 5,
				metrictest.At(registrar.ScopeName, "registrar.invocation.duration", "verb", "mint", "result", "throttled"):         5,
				metrictest.At(otelsink.ScopeName, "registrar.limited.admission", "policy", "default", "verb", "mint"):              5,
				metrictest.At(otelsink.ScopeName, "registrar.limited.admission", "policy", "default", "verb", "deregister"):        0,
				metrictest.At(registrar.ScopeName, "registrar.invocations", "verb", "deregister", "result", "throttled"):           0,
				metrictest.At(otelsink.ScopeName, "registrar.limited.predecision_refusal", "policy", "default", "verb", "mint"):    0,
				metrictest.At(registrar.ScopeName, "registrar.invocation.duration", "verb", "mint", "result", "idempotent_remint"): 1,
			}
			check := func(when string) {
				t.Helper()
				got := metrictest.Collect(t, reader)
				for p, n := range want {
					if got[p] != n {
						t.Errorf("%s: %s{%s} = %d, want %d", when, p.Name, p.Attrs, got[p], n)
					}
				}
			}
			check("first collection")
			check("second collection, no call between")
			v.Mint(ctx, goodMint())
			want[metrictest.At(registrar.ScopeName, "registrar.invocations", "verb", "mint", "result", "throttled")]++
			want[metrictest.At(registrar.ScopeName, "registrar.invocation.duration", "verb", "mint", "result", "throttled")]++
			want[metrictest.At(otelsink.ScopeName, "registrar.limited.admission", "policy", "default", "verb", "mint")]++
			check("after one more throttled call")
		})
	}
}

func TestResultOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want registrar.Result
	}{
		{nil, registrar.ResultFirstMint},
		{&registrar.RefusedError{Reason: vocab.ReasonInvalidHost}, registrar.ResultRefused},
		{&registrar.ThrottledError{RetryAfterSeconds: 1}, registrar.ResultThrottled},
		{&registrar.UnavailableError{Reason: registrar.AuditUnwritable}, registrar.ResultUnavailable},
	} {
		if got := registrar.ResultOf(registrar.ResultFirstMint, tc.err); got != tc.want {
			t.Errorf("ResultOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
