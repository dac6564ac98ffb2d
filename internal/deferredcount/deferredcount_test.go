package deferredcount_test

import (
	"context"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/deferredcount"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
)

const (
	counterName = "test.calls"
	flushName   = "test.calls.deferred_flush"
)

// setup returns a Counter with two series (verb=mint, verb=deregister) on
// a real SDK meter provider with the daemon's exemplar filter, and a
// function that collects and returns each series' value, its exemplar
// count, and whether the flush hook appeared in the collected data.
func setup(t *testing.T) (*deferredcount.Counter, func() (vals [2]int64, exemplars [2]int, hookSeen bool)) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m := mp.Meter("test")
	c, err := m.Int64Counter(counterName)
	if err != nil {
		t.Fatal(err)
	}
	verbs := []string{"mint", "deregister"}
	series := make([][]metric.AddOption, len(verbs))
	for i, v := range verbs {
		series[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("verb", v)))}
	}
	k, err := deferredcount.New(m, c, flushName, series)
	if err != nil {
		t.Fatal(err)
	}
	collect := func() (vals [2]int64, exemplars [2]int, hookSeen bool) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, md := range sm.Metrics {
				switch md.Name {
				case flushName:
					hookSeen = true
				case counterName:
					for _, dp := range md.Data.(metricdata.Sum[int64]).DataPoints {
						v, _ := dp.Attributes.Value("verb")
						for i, name := range verbs {
							if v.AsString() == name {
								vals[i] = dp.Value
								exemplars[i] = len(dp.Exemplars)
							}
						}
					}
				}
			}
		}
		return vals, exemplars, hookSeen
	}
	return k, collect
}

func sampledContext() context.Context {
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	}))
}

func unsampledContext() context.Context {
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{9, 2, 3, 4, 5, 6, 7, 8},
	}))
}

// TestEveryCollectionCountsEveryEarlierIncrement: what was added before a
// collection is in it, exactly, per series, whatever the context, and a
// collection with nothing new reports the same totals.
func TestEveryCollectionCountsEveryEarlierIncrement(t *testing.T) {
	k, collect := setup(t)
	for range 1000 {
		k.Add(context.Background(), 0, 1)
	}
	k.Add(unsampledContext(), 0, 5)
	k.Add(sampledContext(), 1, 2)
	k.Add(context.Background(), 1, 3)
	vals, _, hookSeen := collect()
	if vals != [2]int64{1005, 5} {
		t.Fatalf("first collection: %v, want [1005 5]", vals)
	}
	if hookSeen {
		t.Errorf("the flush hook %s appears in the collected metrics", flushName)
	}
	if vals, _, _ = collect(); vals != [2]int64{1005, 5} {
		t.Fatalf("second collection, nothing added: %v, want [1005 5]", vals)
	}
	k.Add(context.Background(), 0, 7)
	if vals, _, _ = collect(); vals != [2]int64{1012, 5} {
		t.Fatalf("third collection: %v, want [1012 5]", vals)
	}
}

// TestSampledIncrementsKeepTheirExemplars: only an increment from a
// sampled span is offered to the reservoir, as with the SDK counter
// under the trace-based filter; the deferred ones carry none.
func TestSampledIncrementsKeepTheirExemplars(t *testing.T) {
	k, collect := setup(t)
	for range 10 {
		k.Add(unsampledContext(), 0, 1)
	}
	_, ex, _ := collect()
	if ex[0] != 0 {
		t.Fatalf("%d exemplars from unsampled increments, want 0", ex[0])
	}
	k.Add(sampledContext(), 0, 1)
	vals, ex, _ := collect()
	if vals[0] != 11 || ex[0] == 0 {
		t.Fatalf("after a sampled increment: value %d with %d exemplars, want 11 with at least one", vals[0], ex[0])
	}
}

// TestConcurrentIncrementsAreAllCounted: increments racing collections
// are each counted once, in some collection.
func TestConcurrentIncrementsAreAllCounted(t *testing.T) {
	k, collect := setup(t)
	const workers, each = 8, 5000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
				collect()
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for range each {
				k.Add(context.Background(), w%2, 1)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-collected
	if vals, _, _ := collect(); vals[0]+vals[1] != workers*each || vals[0] != vals[1] {
		t.Fatalf("%v after %d increments in two equal halves", vals, workers*each)
	}
}

// TestOutOfRangeSeriesIsIgnored: no panic, nothing counted.
func TestOutOfRangeSeriesIsIgnored(t *testing.T) {
	k, collect := setup(t)
	k.Add(context.Background(), -1, 1)
	k.Add(context.Background(), 2, 1)
	k.Add(sampledContext(), 2, 1)
	if vals, _, _ := collect(); vals != [2]int64{} {
		t.Fatalf("%v, want nothing counted", vals)
	}
}

func TestNewRefusesNil(t *testing.T) {
	if _, err := deferredcount.New(nil, nil, flushName, nil); err == nil {
		t.Fatal("New(nil, nil) succeeded")
	}
}

// BenchmarkAdd compares one increment of an unsampled call through the
// SDK counter and through Counter.
func BenchmarkAdd(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()), sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter))
	defer mp.Shutdown(context.Background())
	m := mp.Meter("bench")
	c, _ := m.Int64Counter(counterName)
	opts := [][]metric.AddOption{{metric.WithAttributeSet(attribute.NewSet(attribute.String("verb", "mint")))}}
	k, err := deferredcount.New(m, c, flushName, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := unsampledContext()
	b.Run("peer=sdk-counter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Add(ctx, 1, opts[0]...)
		}
	})
	b.Run("peer=deferred", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			k.Add(ctx, 0, 1)
		}
	})
}
