package coalesce_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/internal/fakes"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// BenchmarkProductionChain is one limited event through the production
// sink chain, coalesce → otelsink (real SDK meter provider) → counting,
// with a non-recording span: the steady state of a flood, counted into an
// open window.
func BenchmarkProductionChain(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	for _, tc := range []struct {
		name string
		keys int
	}{
		{"one-key", 1},
		{"64-keys", 64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o, err := otelsink.New(counting.New(), mp)
			if err != nil {
				b.Fatal(err)
			}
			s, err := coalesce.New(coalesce.Options{Next: o, Store: &fakes.AuditLog{}, Window: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			evs := make([]limiter.Event, tc.keys)
			for i := range evs {
				evs[i] = limiter.Event{Identity: "unix-peer:uid=" + strconv.Itoa(1000+i), Verb: limiter.Verb(i % 2), Bucket: limiter.Admission, RetryAfterSeconds: 1}
			}
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				s.Limited(ctx, evs[i])
				if i++; i == len(evs) {
					i = 0
				}
			}
		})
	}
}
