package telemetry_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// The daemon builds one Telemetry from the [telemetry] table, hands its
// providers to the components, and serves Handler on
// telemetry.metrics_listen. Here the handler is scraped in-process.
func Example() {
	ctx := context.Background()
	tel, err := telemetry.New(ctx, config.Telemetry{ServiceName: "registrar-otel", TraceSamplePerMillion: 1_000_000}, telemetry.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tel.Shutdown(ctx)

	sink, err := otelsink.New(counting.New(), tel.MeterProvider())
	if err != nil {
		fmt.Println(err)
		return
	}
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}, sink)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := telemetry.RegisterLimiter(tel.MeterProvider(), lim.Stats); err != nil {
		fmt.Println(err)
		return
	}
	lim.Charge(ctx, "spiffe://example/caller", vocab.Mint, vocab.Admission)
	lim.Charge(ctx, "spiffe://example/caller", vocab.Mint, vocab.Admission) // limited: an hour's refill

	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "registrar_limit") {
			fmt.Println(line)
		}
	}
	// Output:
	// registrar_limited_admission_total{policy="default",verb="deregister"} 0
	// registrar_limited_admission_total{policy="default",verb="mint"} 1
	// registrar_limited_predecision_refusal_total{policy="default",verb="deregister"} 0
	// registrar_limited_predecision_refusal_total{policy="default",verb="mint"} 0
	// registrar_limiter_entries{pool="local"} 0
	// registrar_limiter_entries{pool="remote"} 1
	// registrar_limiter_overflow_charges_total{bucket="admission",verb="deregister"} 0
	// registrar_limiter_overflow_charges_total{bucket="admission",verb="mint"} 0
	// registrar_limiter_overflow_charges_total{bucket="predecision_refusal",verb="deregister"} 0
	// registrar_limiter_overflow_charges_total{bucket="predecision_refusal",verb="mint"} 0
	// registrar_limiter_reclaimed_entries_total 0
}
