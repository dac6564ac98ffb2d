// Package deferredcount is an OpenTelemetry counter for the flood path: the
// increments of calls whose span is not sampled are summed in atomics and
// handed to the SDK counter when a reader collects, instead of one SDK Add
// per call.
//
// The SDK's synchronous Add resolves its options and attribute set, looks
// the series up under a lock and consults the exemplar filter on every
// call: about a quarter of a microsecond, paid by every throttled answer
// of a flood. Under the trace-based exemplar filter the daemon configures
// (telemetry.New), an increment from a context without a sampled span
// carries no exemplar, so nothing is lost by summing such increments
// first: the SDK sees them as one Add of their sum just before it reads
// the counter.
//
// Exactness: every collection runs the meter's callbacks before it reads
// any aggregation (the SDK's pipeline does, under its lock), and Counter's
// callback adds everything pending, so each collection (a Prometheus
// scrape, an OTLP export, a test's ManualReader.Collect, the final
// collection at shutdown) reports exactly the increments made before it
// began, as the synchronous counter would. An increment racing a
// collection lands in it or in the next one, also as it would.
//
// Exemplars: an increment from a context with a sampled span goes straight
// to the SDK counter with that context, so it is offered to the exemplar
// reservoir as before.
package deferredcount

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Counter is one Int64Counter with a fixed set of series, each named by
// its index and given by its hoisted add options. It is safe for
// concurrent use. Build it with New.
type Counter struct {
	c       metric.Int64Counter
	opts    [][]metric.AddOption
	pending []cell
}

// cell keeps one series' pending sum on a cache line of its own: the two
// busiest series of a flood (its verb's throttled and limited counts) are
// incremented from every core.
type cell struct {
	n atomic.Int64
	_ [56]byte
}

// New returns a Counter over c with one series per element of series, and
// registers on m (the meter c was created from) the callback that adds the
// pending increments at each collection. The callback needs an observable
// instrument to hang on: New creates an Int64ObservableGauge named
// flushName that never observes a value, so it has no data point and is in
// no exposition. m must be the meter of c, so that its collections are
// c's.
func New(m metric.Meter, c metric.Int64Counter, flushName string, series [][]metric.AddOption) (*Counter, error) {
	if m == nil || c == nil {
		return nil, errors.New("deferredcount: New: nil meter or counter")
	}
	k := &Counter{c: c, opts: series, pending: make([]cell, len(series))}
	hook, err := m.Int64ObservableGauge(flushName,
		metric.WithDescription("Internal: hangs the collection-time flush of deferred counter increments; never observed."))
	if err != nil {
		return nil, fmt.Errorf("deferredcount: %s: %w", flushName, err)
	}
	if _, err := m.RegisterCallback(func(context.Context, metric.Observer) error {
		k.Flush()
		return nil
	}, hook); err != nil {
		return nil, fmt.Errorf("deferredcount: %s: %w", flushName, err)
	}
	return k, nil
}

// Add adds n to series i: at once, with ctx, if ctx carries a sampled
// span (so the SDK may keep it as an exemplar), else at the next
// collection. An index out of range is ignored: it has no series.
func (k *Counter) Add(ctx context.Context, i int, n int64) {
	if uint(i) >= uint(len(k.pending)) {
		return
	}
	if trace.SpanContextFromContext(ctx).IsSampled() {
		k.c.Add(ctx, n, k.opts[i]...)
		return
	}
	k.pending[i].n.Add(n)
}

// Flush adds every pending increment to the SDK counter now. Collections
// call it; a caller only needs it to read a counter through something
// other than a reader of the meter provider.
func (k *Counter) Flush() {
	for i := range k.pending {
		if n := k.pending[i].n.Swap(0); n != 0 {
			k.c.Add(context.Background(), n, k.opts[i]...)
		}
	}
}
