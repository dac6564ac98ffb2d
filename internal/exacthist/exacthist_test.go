package exacthist_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/exacthist"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
)

var (
	bounds = []float64{0.0001, 0.001, 0.01, 1}
	unix   = attribute.NewSet(attribute.String("listener", "unix"))
	tls    = attribute.NewSet(attribute.String("listener", "tls"))
	start  = time.Unix(1_700_000_000, 0)
)

func newHist(t testing.TB) *exacthist.Histogram {
	t.Helper()
	h, err := exacthist.New("test.wait", "s", "a wait", bounds, []attribute.Set{unix, tls}, start)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// points returns h's data points at now, by listener.
func points(t *testing.T, h *exacthist.Histogram, now time.Time) (metricdata.Metrics, map[string]metricdata.HistogramDataPoint[float64]) {
	t.Helper()
	m := h.Metrics(now)
	hist, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("data is %T, want a float64 histogram", m.Data)
	}
	if hist.Temporality != metricdata.CumulativeTemporality {
		t.Errorf("temporality %v, want cumulative", hist.Temporality)
	}
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, dp := range hist.DataPoints {
		v, _ := dp.Attributes.Value("listener")
		out[v.AsString()] = dp
	}
	return m, out
}

// Each value goes to the bucket the SDK's explicit-bucket histogram puts
// it in (a bound belongs to the bucket it ends), the sum is exact in
// nanoseconds, the count is the buckets' sum, and a series without an
// observation has no data point.
func TestObservationsLandInTheSDKsBuckets(t *testing.T) {
	h := newHist(t)
	waits := []time.Duration{0, -time.Second, 1, 100 * time.Microsecond, 100*time.Microsecond + 1,
		time.Millisecond, 10 * time.Millisecond, time.Second, time.Second + 1, time.Hour}
	for _, d := range waits {
		h.Observe(0, d)
	}
	h.Observe(2, time.Second)  // no such series: ignored
	h.Observe(-1, time.Second) // nor this one
	now := start.Add(time.Minute)
	m, got := points(t, h, now)
	if m.Name != "test.wait" || m.Unit != "s" || m.Description != "a wait" {
		t.Errorf("name %q unit %q description %q", m.Name, m.Unit, m.Description)
	}
	if _, ok := got["tls"]; ok || len(got) != 1 {
		t.Fatalf("data points %v: want one, unix's (tls has no observation)", got)
	}
	dp := got["unix"]
	// The SDK's histogram given the same values, in seconds, under the same
	// bounds: the reference for the buckets and the sum.
	want := sdkPoint(t, waits)
	if !slices.Equal(dp.BucketCounts, want.BucketCounts) {
		t.Errorf("buckets %v, the SDK's %v", dp.BucketCounts, want.BucketCounts)
	}
	if dp.Count != uint64(len(waits)) || dp.Count != want.Count {
		t.Errorf("count %d, want %d (the SDK's %d)", dp.Count, len(waits), want.Count)
	}
	var sum time.Duration
	for _, d := range waits {
		sum += max(d, 0)
	}
	if dp.Sum != sum.Seconds() || math.Abs(dp.Sum-want.Sum) > 1e-9 {
		t.Errorf("sum %v, want %v (the SDK's %v)", dp.Sum, sum.Seconds(), want.Sum)
	}
	if !slices.Equal(dp.Bounds, bounds) || !dp.StartTime.Equal(start) || !dp.Time.Equal(now) {
		t.Errorf("bounds %v start %v time %v", dp.Bounds, dp.StartTime, dp.Time)
	}
	if !dp.Attributes.Equals(&unix) {
		t.Errorf("attributes %v", dp.Attributes.ToSlice())
	}
}

// sdkPoint records ds on the SDK's own histogram with the same bounds.
func sdkPoint(t *testing.T, ds []time.Duration) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer mp.Shutdown(context.Background())
	hist, err := mp.Meter("t").Float64Histogram("h", metric.WithExplicitBucketBoundaries(bounds...))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		hist.Record(context.Background(), max(d, 0).Seconds())
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0]
}

// ObserveExemplar counts as Observe does and keeps, for each bucket, the
// last observation made in a sampled span, with its trace and span ids
// and time, as the SDK's histogram reservoir does under the trace-based
// filter; an observation outside a sampled span is only counted.
func TestEachBucketKeepsItsLastSampledObservation(t *testing.T) {
	h := newHist(t)
	sc := func(b byte, sampled bool) trace.SpanContext {
		c := trace.SpanContextConfig{TraceID: trace.TraceID{b}, SpanID: trace.SpanID{b}}
		if sampled {
			c.TraceFlags = trace.FlagsSampled
		}
		return trace.NewSpanContext(c)
	}
	t1, t2 := start.Add(time.Second), start.Add(2*time.Second)
	h.ObserveExemplar(0, 2*time.Millisecond, sc(1, true), t1)  // bucket le=0.01
	h.ObserveExemplar(0, 3*time.Millisecond, sc(2, true), t2)  // the same bucket: replaces it
	h.ObserveExemplar(0, 5*time.Millisecond, sc(3, false), t2) // not sampled: counted, not kept
	h.ObserveExemplar(0, 0, sc(4, true), t1)                   // bucket le=0.0001
	h.ObserveExemplar(1, time.Hour, sc(5, false), t1)          // tls: no exemplar at all
	h.ObserveExemplar(2, time.Hour, sc(6, true), t1)           // no such series: the first index past them
	h.ObserveExemplar(7, time.Hour, sc(6, true), t1)           // nor this one
	_, got := points(t, h, start)
	unixDP, tlsDP := got["unix"], got["tls"]
	if unixDP.Count != 4 || tlsDP.Count != 1 {
		t.Errorf("counts unix %d tls %d, want 4 and 1", unixDP.Count, tlsDP.Count)
	}
	if want := (10 * time.Millisecond).Seconds(); math.Abs(unixDP.Sum-want) > 1e-12 {
		t.Errorf("unix sum %v, want %v", unixDP.Sum, want)
	}
	if len(tlsDP.Exemplars) != 0 {
		t.Errorf("tls exemplars %v, want none", tlsDP.Exemplars)
	}
	ex := unixDP.Exemplars
	if len(ex) != 2 {
		t.Fatalf("unix exemplars %+v, want two (buckets le=0.0001 and le=0.01)", ex)
	}
	for i, want := range []struct {
		value float64
		id    byte
		at    time.Time
	}{{0, 4, t1}, {0.003, 2, t2}} {
		e := ex[i]
		if e.Value != want.value || !e.Time.Equal(want.at) || len(e.TraceID) != 16 || e.TraceID[0] != want.id || len(e.SpanID) != 8 || e.SpanID[0] != want.id {
			t.Errorf("exemplar %d: %+v, want value %v trace and span %d at %v", i, e, want.value, want.id, want.at)
		}
	}
}

// Observations from many goroutines at once are all counted, and a
// collection returns copies: the next observations do not change it.
func TestConcurrentObservationsAreAllCounted(t *testing.T) {
	h := newHist(t)
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				h.Observe(g%2, time.Duration(i%3)*time.Millisecond)
			}
		})
	}
	wg.Wait()
	_, got := points(t, h, start)
	for _, l := range []string{"unix", "tls"} {
		dp := got[l]
		if dp.Count != goroutines/2*each {
			t.Errorf("%s: count %d, want %d", l, dp.Count, goroutines/2*each)
		}
		var n uint64
		for _, c := range dp.BucketCounts {
			n += c
		}
		if n != dp.Count {
			t.Errorf("%s: buckets sum to %d, count %d", l, n, dp.Count)
		}
	}
	before := slices.Clone(got["unix"].BucketCounts)
	h.Observe(0, 0)
	if !slices.Equal(got["unix"].BucketCounts, before) {
		t.Errorf("a collected point changed after the next observation")
	}
}

// New refuses what is not a histogram's configuration, by name.
func TestNewRefusesBadBoundsAndNoSeries(t *testing.T) {
	for _, c := range []struct {
		name   string
		bounds []float64
		sets   []attribute.Set
	}{
		{"", bounds, []attribute.Set{unix}},
		{"h", bounds, nil},
		{"h", []float64{0.1, 0.1}, []attribute.Set{unix}},
		{"h", []float64{0.2, 0.1}, []attribute.Set{unix}},
		{"h", []float64{math.NaN()}, []attribute.Set{unix}},
		{"h", []float64{math.Inf(1)}, []attribute.Set{unix}},
		{"h", []float64{-1}, []attribute.Set{unix}},
		{"h", []float64{1e10}, []attribute.Set{unix}},
		// The first bound whose nanoseconds overflow a time.Duration.
		{"h", []float64{float64(math.MaxInt64) / 1e9}, []attribute.Set{unix}},
	} {
		if _, err := exacthist.New(c.name, "s", "", c.bounds, c.sets, start); err == nil {
			t.Errorf("New(%q, %v, %d sets): no error", c.name, c.bounds, len(c.sets))
		}
	}
	for _, ok := range [][]float64{
		nil,    // one bucket
		{0, 1}, // a bound of zero: the SDK's buckets allow it
		{math.Nextafter(float64(math.MaxInt64)/1e9, 0)}, // the largest bound a duration reaches
	} {
		if _, err := exacthist.New("h", "s", "", ok, []attribute.Set{unix}, start); err != nil {
			t.Errorf("bounds %v: %v", ok, err)
		}
	}
}

// BenchmarkObserve is the cost of an observation of a zero wait from as
// many goroutines as processors, against the SDK histogram's Record of
// the same value under the same attribute set (sdk): the peer it replaces,
// measured in the same run.
func BenchmarkObserve(b *testing.B) {
	b.Run("impl=exacthist", func(b *testing.B) {
		h := newHist(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Observe(0, 0)
			}
		})
	})
	b.Run("impl=sdk", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer mp.Shutdown(context.Background())
		hist, err := mp.Meter("b").Float64Histogram("h", metric.WithExplicitBucketBoundaries(bounds...))
		if err != nil {
			b.Fatal(err)
		}
		opts := []metric.RecordOption{metric.WithAttributeSet(unix)}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				hist.Record(context.Background(), 0, opts...)
			}
		})
	})
}
