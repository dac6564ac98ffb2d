package registrar

import (
	"context"

	"github.com/registrar-otel/registrar-otel/limiter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// AttrBackendPartial marks an invocation span whose backend failed after
// changing, or possibly changing, the registry (a *PartialError).
const AttrBackendPartial = attribute.Key("registrar.backend_partial")

// partialInstruments counts the backend failures that were not clean: the
// registry may have been changed before the backend gave up. Prometheus:
// registrar_backend_partial_total{verb}.
type partialInstruments struct {
	counter metric.Int64Counter
	byVerb  [limiter.NumVerbs]metric.AddOption
}

func newPartialInstruments(mp metric.MeterProvider) (*partialInstruments, error) {
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	c, err := mp.Meter(ScopeName).Int64Counter("registrar.backend.partial",
		metric.WithUnit("{invocation}"),
		metric.WithDescription("Invocations whose backend failed after changing, or possibly changing, the registry (answered BackendUnavailable; a retry of the same request converges)."))
	if err != nil {
		return nil, err
	}
	p := &partialInstruments{counter: c}
	for v := range limiter.NumVerbs {
		p.byVerb[v] = metric.WithAttributeSet(attribute.NewSet(attribute.String("verb", limiter.Verb(v).String())))
		c.Add(context.Background(), 0, p.byVerb[v]) // the series exists from the first scrape
	}
	return p, nil
}

func (p *partialInstruments) note(ctx context.Context, verb limiter.Verb) {
	p.counter.Add(ctx, 1, p.byVerb[verb])
}
