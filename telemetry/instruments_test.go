package telemetry_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func fakeLimiterStats() limiter.Stats {
	var s limiter.Stats
	s.Entries = 17
	s.LocalEntries = 5
	s.Reclaimed = 5
	s.OverflowCharges[vocab.Mint][vocab.Admission] = 3
	s.OverflowCharges[vocab.Deregister][vocab.PredecisionRefusal] = 1
	return s
}

func fakeCoalesceStats() coalesce.Stats {
	var s coalesce.Stats
	s.OpenWindows = 4
	s.Records[vocab.PredecisionRefusal] = 9
	s.Records[vocab.Admission] = 2
	s.EarlyFlushes = 1
	s.WriteFailures = 6
	return s
}

func collectAll(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if _, dup := out[m.Name]; dup {
				t.Errorf("instrument %s collected twice", m.Name)
			}
			out[m.Name] = m
		}
	}
	return out
}

// registerAll registers every instrument of this package and otelsink on a
// fresh MeterProvider with a ManualReader.
func registerAll(t *testing.T) (*sdkmetric.ManualReader, *otelsink.Sink, audit.Observer) {
	t.Helper()
	reader, mp := newReader(t)
	if err := telemetry.RegisterLimiter(mp, fakeLimiterStats); err != nil {
		t.Fatalf("RegisterLimiter: %v", err)
	}
	if err := telemetry.RegisterCoalesce(mp, fakeCoalesceStats); err != nil {
		t.Fatalf("RegisterCoalesce: %v", err)
	}
	obs := newObserver(t, mp, telemetry.NewAuditObserver)
	sink, err := otelsink.New(nil, mp)
	if err != nil {
		t.Fatalf("otelsink.New: %v", err)
	}
	if err := sink.DeclarePolicy("agents", true); err != nil { // the shadow counter's series
		t.Fatalf("DeclarePolicy: %v", err)
	}
	return reader, sink, obs
}

func TestEveryInstrumentExistsWithUnitAndDescription(t *testing.T) {
	reader, _, obs := registerAll(t)
	obs.Appended(audit.PhaseIntent, time.Millisecond, nil) // the histogram exists once recorded

	type kind int
	const (
		gauge kind = iota
		counter
		histogram
	)
	want := []struct {
		name, unit string
		kind       kind
	}{
		{telemetry.LimiterEntries, "{entry}", gauge},
		{telemetry.LimiterOverflowCharges, "{charge}", counter},
		{telemetry.LimiterReclaimedEntries, "{entry}", counter},
		{telemetry.CoalesceOpenWindows, "{window}", gauge},
		{telemetry.CoalesceRecords, "{record}", counter},
		{telemetry.CoalesceEarlyFlushes, "{window}", counter},
		{telemetry.CoalesceRecordWriteFailures, "{record}", counter},
		{telemetry.AuditAppends, "{record}", counter},
		{telemetry.AuditAppendFailures, "{record}", counter},
		{telemetry.AuditAppendDuration, "s", histogram},
		{otelsink.PredecisionRefusalCounter, "{invocation}", counter},
		{otelsink.AdmissionCounter, "{invocation}", counter},
		{otelsink.ShadowCounter, "{invocation}", counter},
	}
	got := collectAll(t, reader)
	if len(got) != len(want) {
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("collected %d instruments %v, want %d", len(got), names, len(want))
	}
	for _, w := range want {
		m, ok := got[w.name]
		if !ok {
			t.Errorf("instrument %s not collected", w.name)
			continue
		}
		if m.Description == "" {
			t.Errorf("%s: empty description", w.name)
		}
		if m.Unit != w.unit {
			t.Errorf("%s: unit %q, want %q", w.name, m.Unit, w.unit)
		}
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			if w.kind != gauge {
				t.Errorf("%s: exported as a gauge", w.name)
			}
		case metricdata.Sum[int64]:
			if w.kind != counter || !d.IsMonotonic {
				t.Errorf("%s: exported as a sum (monotonic %v), want kind %d", w.name, d.IsMonotonic, w.kind)
			}
		case metricdata.Histogram[float64]:
			if w.kind != histogram {
				t.Errorf("%s: exported as a histogram", w.name)
			}
		default:
			t.Errorf("%s: data %T", w.name, m.Data)
		}
	}
}

// points returns the int64 data points of m keyed by their attributes,
// spelled "k=v,k=v" in key order.
func points(t *testing.T, m metricdata.Metrics) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	add := func(set attribute.Set, v int64) {
		key := ""
		for i, kv := range set.ToSlice() {
			if i > 0 {
				key += ","
			}
			key += string(kv.Key) + "=" + kv.Value.String()
		}
		out[key] = v
	}
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes, dp.Value)
		}
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes, dp.Value)
		}
	default:
		t.Fatalf("%s: data %T, want int64 gauge or sum", m.Name, m.Data)
	}
	return out
}

func TestObservedValuesComeFromTheStats(t *testing.T) {
	reader, _, _ := registerAll(t)
	got := collectAll(t, reader)
	want := map[string]map[string]int64{
		telemetry.LimiterEntries:          {"pool=remote": 12, "pool=local": 5},
		telemetry.LimiterReclaimedEntries: {"": 5},
		telemetry.LimiterOverflowCharges: {
			"bucket=admission,verb=mint":                 3,
			"bucket=predecision_refusal,verb=mint":       0,
			"bucket=admission,verb=deregister":           0,
			"bucket=predecision_refusal,verb=deregister": 1,
		},
		telemetry.CoalesceOpenWindows:         {"": 4},
		telemetry.CoalesceRecords:             {"bucket=predecision_refusal": 9, "bucket=admission": 2},
		telemetry.CoalesceEarlyFlushes:        {"": 1},
		telemetry.CoalesceRecordWriteFailures: {"": 6},
	}
	for name, wantPoints := range want {
		gotPoints := points(t, got[name])
		if len(gotPoints) != len(wantPoints) {
			t.Errorf("%s: points %v, want %v", name, gotPoints, wantPoints)
		}
		for k, v := range wantPoints {
			if g, ok := gotPoints[k]; !ok || g != v {
				t.Errorf("%s{%s} = %d (present %v), want %d", name, k, g, ok, v)
			}
		}
	}
}

func TestStatsAreReadOncePerCollection(t *testing.T) {
	reader, mp := newReader(t)
	var lim, co int
	if err := telemetry.RegisterLimiter(mp, func() limiter.Stats { lim++; return limiter.Stats{} }); err != nil {
		t.Fatal(err)
	}
	if err := telemetry.RegisterCoalesce(mp, func() coalesce.Stats { co++; return coalesce.Stats{} }); err != nil {
		t.Fatal(err)
	}
	collectAll(t, reader)
	collectAll(t, reader)
	if lim != 2 || co != 2 {
		t.Errorf("two collections read limiter stats %d times and coalesce stats %d times, want 2 and 2", lim, co)
	}
}

func TestRegisterRejectsNilStats(t *testing.T) {
	if err := telemetry.RegisterLimiter(nil, nil); err == nil {
		t.Errorf("RegisterLimiter(nil, nil) succeeded, want an error")
	}
	if err := telemetry.RegisterCoalesce(nil, nil); err == nil {
		t.Errorf("RegisterCoalesce(nil, nil) succeeded, want an error")
	}
	if err := telemetry.RegisterLimiter(nil, fakeLimiterStats); err != nil {
		t.Errorf("RegisterLimiter with a nil provider: %v, want nil (no-op)", err)
	}
}

func TestAuditObserverCountsByPhaseAndOutcome(t *testing.T) {
	reader, _, obs := registerAll(t)
	obs.Appended(audit.PhaseIntent, 200*time.Microsecond, nil)
	obs.Appended(audit.PhaseIntent, 300*time.Microsecond, nil)
	obs.Appended(audit.PhaseOutcome, 2*time.Millisecond, errors.New("disk full"))
	obs.Appended(audit.PhaseLimited, 7*time.Second, nil)
	obs.Appended(audit.PhaseAdmin, time.Millisecond, nil)
	obs.Appended(0, time.Microsecond, errors.New("nil record"))

	got := collectAll(t, reader)
	wantAppends := map[string]int64{"phase=intent": 2, "phase=outcome": 0, "phase=limited": 1, "phase=admin": 1}
	wantFailures := map[string]int64{"phase=intent": 0, "phase=outcome": 1, "phase=limited": 0, "phase=admin": 0, "phase=unknown": 1}
	for name, want := range map[string]map[string]int64{telemetry.AuditAppends: wantAppends, telemetry.AuditAppendFailures: wantFailures} {
		gotPoints := points(t, got[name])
		if len(gotPoints) != len(want) {
			t.Errorf("%s: points %v, want %v", name, gotPoints, want)
		}
		for k, v := range want {
			if gotPoints[k] != v {
				t.Errorf("%s{%s} = %d, want %d", name, k, gotPoints[k], v)
			}
		}
	}

	h, ok := got[telemetry.AuditAppendDuration].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("%s: %T with %d points, want one float64 histogram point", telemetry.AuditAppendDuration, got[telemetry.AuditAppendDuration].Data, len(h.DataPoints))
	}
	dp := h.DataPoints[0]
	if dp.Count != 6 {
		t.Errorf("duration count %d, want 6 (every append, failed or not)", dp.Count)
	}
	if dp.Attributes.Len() != 0 {
		t.Errorf("duration attributes %v, want none", dp.Attributes.ToSlice())
	}
	if len(dp.Bounds) == 0 || dp.Bounds[0] != 0.00005 || dp.Bounds[len(dp.Bounds)-1] != 5 {
		t.Errorf("duration bounds %v, want 50µs .. 5s", dp.Bounds)
	}
	if over := dp.BucketCounts[len(dp.BucketCounts)-1]; over != 1 {
		t.Errorf("+Inf bucket holds %d, want 1 (the 7 s append)", over)
	}
}

func TestAuditObserverDoesNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count in -short mode skipped")
	}
	_, _, obs := registerAll(t)
	fail := errors.New("x")
	if n := testing.AllocsPerRun(1000, func() {
		obs.Appended(audit.PhaseOutcome, time.Millisecond, nil)
		obs.Appended(audit.PhaseIntent, time.Millisecond, fail)
	}); n != 0 {
		t.Errorf("Appended allocates %v times per call, want 0", n)
	}
}
