package telemetry

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registration makes the instruments of one Register* function or New*
// constructor and, for observable ones, registers their callback, so that
// each says only what it measures. Every instrument is attempted and the
// errors are reported together, wrapped as "telemetry: <fn>: …".
type registration struct {
	m    metric.Meter
	fn   string
	errs []error
	list []metric.Observable
}

func newRegistration(m metric.Meter, fn string) *registration {
	return &registration{m: m, fn: fn}
}

// keep records one made instrument and its error (nil is dropped by
// errors.Join).
func keep[T metric.Observable](r *registration, o T, err error) T {
	r.errs = append(r.errs, err)
	r.list = append(r.list, o)
	return o
}

// gauge makes an int64 observable gauge. An empty unit sets none: "1"
// would make the Prometheus exporter append _ratio to the name.
func (r *registration) gauge(name, unit, desc string) metric.Int64Observable {
	g, err := r.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return keep(r, metric.Int64Observable(g), err)
}

// floatGauge makes a float64 observable gauge.
func (r *registration) floatGauge(name, unit, desc string) metric.Float64Observable {
	g, err := r.m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return keep(r, metric.Float64Observable(g), err)
}

// counter makes an int64 observable counter.
func (r *registration) counter(name, unit, desc string) metric.Int64Observable {
	c, err := r.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return keep(r, metric.Int64Observable(c), err)
}

// syncCounter makes an int64 counter, added to by the caller.
func (r *registration) syncCounter(name, unit, desc string) metric.Int64Counter {
	c, err := r.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	r.errs = append(r.errs, err)
	return c
}

// histogram makes a float64 histogram with the given bucket bounds.
func (r *registration) histogram(name, unit, desc string, bounds []float64) metric.Float64Histogram {
	h, err := r.m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(bounds...))
	r.errs = append(r.errs, err)
	return h
}

// err reports the errors of making the instruments, if any.
func (r *registration) err() error {
	if err := errors.Join(r.errs...); err != nil {
		return fmt.Errorf("telemetry: %s: %w", r.fn, err)
	}
	return nil
}

// observe registers cb for every observable instrument made, or reports
// the errors of making them.
func (r *registration) observe(cb metric.Callback) error {
	if err := r.err(); err != nil {
		return err
	}
	if _, err := r.m.RegisterCallback(cb, r.list...); err != nil {
		return fmt.Errorf("telemetry: %s: %w", r.fn, err)
	}
	return nil
}

// attrs is the observe option of one attribute set, built once at
// registration so a collection allocates none.
func attrs(kv ...attribute.KeyValue) []metric.ObserveOption {
	return []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

// oneIf is 1 for true and 0 for false, for the gauges that say whether.
func oneIf(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
