package telemetry_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/internal/testing/metrictest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reader, mp
}

// newHistReader is newReader whose reader is also given a Histograms, as
// Telemetry's readers are, for the observers whose histograms it produces.
func newHistReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider, *telemetry.Histograms) {
	t.Helper()
	hs := telemetry.NewHistograms()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(hs))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reader, mp, hs
}

// newObserver is the observer build makes on mp; t fails if build does.
func newObserver[O any](t *testing.T, mp metric.MeterProvider, build func(metric.MeterProvider) (O, error)) O {
	t.Helper()
	o, err := build(mp)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The verb observer counts invocations by verb and result (the unsampled
// ones at collection, exactly), times them, and counts unrecordable and
// partial invocations by verb, in the registrar's scope; the counters'
// series exist at zero from the start.
func TestVerbObserverCountsByVerbAndResult(t *testing.T) {
	reader, mp, hs := newHistReader(t)
	o := verbObserver(t, mp, hs)
	got := metrictest.Collect(t, reader)
	for _, p := range []metrictest.Point{
		metrictest.At(registrar.ScopeName, telemetry.RegistrarBackendPartial, "verb", "mint"),
		metrictest.At(registrar.ScopeName, telemetry.RegistrarBackendPartial, "verb", "deregister"),
		metrictest.At(registrar.ScopeName, telemetry.RegistrarOutcomeUnrecordable, "verb", "deregister"),
		metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocations, "verb", "mint", "result", "throttled"),
		metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocations, "verb", "deregister", "result", "identity_removed"),
	} {
		if v, ok := got[p]; !ok || v != 0 {
			t.Errorf("before any call, %s{%s} = %d (present %v), want 0", p.Name, p.Attrs, v, ok)
		}
	}
	if _, ok := got[metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocations, "verb", "mint", "result", "identity_removed")]; ok {
		t.Errorf("a mint identity_removed series exists: a mint never removes")
	}
	ctx := context.Background()
	for range 3 {
		o.Finished(ctx, vocab.Mint, registrar.ResultThrottled, time.Millisecond)
	}
	o.Finished(ctx, vocab.Deregister, registrar.ResultIdentityRemoved, time.Millisecond)
	// A result past the last is no series: not the next verb's first.
	o.Finished(ctx, vocab.Mint, registrar.Result(registrar.NumResults), time.Millisecond)
	// A verb past the last is no series either, and nothing to fail on.
	o.Finished(ctx, vocab.Verb(vocab.NumVerbs), registrar.ResultThrottled, time.Millisecond)
	o.Unrecordable(ctx, vocab.Verb(vocab.NumVerbs))
	o.Partial(ctx, vocab.Verb(vocab.NumVerbs))
	o.Unrecordable(ctx, vocab.Deregister)
	o.Partial(ctx, vocab.Mint)
	o.Partial(ctx, vocab.Mint)
	got = metrictest.Collect(t, reader)
	for _, p := range []metrictest.Point{
		metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocations, "verb", "deregister", "result", registrar.Result(0).String()),
		metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocationDuration, "verb", "deregister", "result", registrar.Result(0).String()),
	} {
		if v, ok := got[p]; ok {
			t.Errorf("%s{%s} = %d: a mint past the last result was counted as a deregister's", p.Name, p.Attrs, v)
		}
	}
	for _, tc := range []struct {
		p    metrictest.Point
		want int64
	}{
		{metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocations, "verb", "mint", "result", "throttled"), 3},
		{metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocationDuration, "verb", "mint", "result", "throttled"), 3},
		{metrictest.At(registrar.ScopeName, telemetry.RegistrarInvocations, "verb", "deregister", "result", "identity_removed"), 1},
		{metrictest.At(registrar.ScopeName, telemetry.RegistrarOutcomeUnrecordable, "verb", "deregister"), 1},
		{metrictest.At(registrar.ScopeName, telemetry.RegistrarOutcomeUnrecordable, "verb", "mint"), 0},
		{metrictest.At(registrar.ScopeName, telemetry.RegistrarBackendPartial, "verb", "mint"), 2},
		{metrictest.At(registrar.ScopeName, telemetry.RegistrarBackendPartial, "verb", "deregister"), 0},
	} {
		if v, ok := got[tc.p]; !ok || v != tc.want {
			t.Errorf("%s{%s} = %d (present %v), want %d", tc.p.Name, tc.p.Attrs, v, ok, tc.want)
		}
	}
}

// A nil provider gives observers that record nothing and do not fail.
func TestObserversOnANilProviderAreNoOps(t *testing.T) {
	v, err := telemetry.NewVerbObserver(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v.Finished(context.Background(), vocab.Mint, registrar.ResultFirstMint, time.Millisecond)
	b, err := telemetry.NewOpenBaoObserver(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Failed(context.Background(), openbao.OpBindingRead, openbao.KindTimeout)
}
