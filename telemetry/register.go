package telemetry

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// observables makes the observable instruments of one Register* function
// and registers their callback, so that each Register* says only what it
// observes. Every instrument is attempted and the errors are reported
// together, wrapped as "telemetry: <fn>: …".
type observables struct {
	m    metric.Meter
	fn   string
	errs []error
	list []metric.Observable
}

func newObservables(m metric.Meter, fn string) *observables {
	return &observables{m: m, fn: fn}
}

// keep records one made instrument and its error (nil is dropped by
// errors.Join).
func keep[T metric.Observable](r *observables, o T, err error) T {
	r.errs = append(r.errs, err)
	r.list = append(r.list, o)
	return o
}

// gauge makes an int64 observable gauge. An empty unit sets none: "1"
// would make the Prometheus exporter append _ratio to the name.
func (r *observables) gauge(name, unit, desc string) metric.Int64Observable {
	g, err := r.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return keep(r, metric.Int64Observable(g), err)
}

// floatGauge makes a float64 observable gauge.
func (r *observables) floatGauge(name, unit, desc string) metric.Float64Observable {
	g, err := r.m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return keep(r, metric.Float64Observable(g), err)
}

// counter makes an int64 observable counter.
func (r *observables) counter(name, unit, desc string) metric.Int64Observable {
	c, err := r.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return keep(r, metric.Int64Observable(c), err)
}

// observe registers cb for every instrument made, or reports the errors of
// making them.
func (r *observables) observe(cb metric.Callback) error {
	if err := errors.Join(r.errs...); err != nil {
		return fmt.Errorf("telemetry: %s: %w", r.fn, err)
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
