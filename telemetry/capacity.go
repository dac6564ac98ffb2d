package telemetry

import (
	"context"
	"fmt"

	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
	"go.opentelemetry.io/otel/metric"
)

// Capacity instruments: the caps the code fixes, exported so alert rules
// and dashboards compare against the running binary's value instead of a
// number copied into them, and the coalescer's hand-off.
const (
	// registrar_limiter_capacity
	LimiterCapacity = "registrar.limiter.capacity"
	// registrar_coalesce_window_capacity
	CoalesceWindowCapacity = "registrar.coalesce.window_capacity"
	// registrar_coalesce_handoff_pending
	CoalesceHandoffPending = "registrar.coalesce.handoff_pending"
	// registrar_coalesce_handoff_waits_total
	CoalesceHandoffWaits = "registrar.coalesce.handoff_waits"
)

// RegisterCapacity registers, on mp (nil means a no-op provider):
//
//   - registrar.limiter.capacity{pool} (gauge, {entry}): each pool's entry
//     cap, limiter.MaxEntries (remote) and limiter.MaxLocalEntries (local),
//     which RegistrarLimiterSaturated compares registrar_limiter_entries of
//     the same pool with;
//   - registrar.coalesce.window_capacity (gauge, {window}):
//     coalesce.MaxOpenWindows, the open-window cap past which the oldest
//     window is flushed early;
//   - registrar.coalesce.handoff_pending (gauge, {window}): early-flushed
//     windows waiting for the writer, at most coalesce.MaxPending;
//   - registrar.coalesce.handoff_waits (counter, {call}): limited calls that
//     found the hand-off full and waited for the writer.
//
// stats is called once per collection; nil observes zeros for the last two.
func RegisterCapacity(mp metric.MeterProvider, stats func() coalesce.Stats) error {
	r := newRegistration(meterOf(mp), "RegisterCapacity")
	lcap := r.gauge(LimiterCapacity, "{entry}", fmt.Sprintf(
		"Each limiter pool's entry cap (remote %d, local %d): one entry per (identity, verb, bucket). "+
			"registrar_limiter_entries of a pool at its cap means that pool's new keys are charged on its shared overflow buckets.",
		limiter.MaxEntries, limiter.MaxLocalEntries))
	wcap := r.gauge(CoalesceWindowCapacity, "{window}", fmt.Sprintf(
		"The coalescer's open-window cap (%d, 1,024 identities x 4 keys). "+
			"At the cap the oldest window is flushed early into its counted record.", coalesce.MaxOpenWindows))
	pending := r.gauge(CoalesceHandoffPending, "{window}", fmt.Sprintf(
		"Windows flushed early at the cap and waiting for the coalescer's writer (at most %d).", coalesce.MaxPending))
	waits := r.counter(CoalesceHandoffWaits, "{call}",
		"Limited calls that found the early-flush hand-off full and waited for the writer to take it. "+
			"Non-zero: identities are churning faster than the audit store writes batches.")
	pools := byPool()
	return r.observe(func(_ context.Context, o metric.Observer) error {
		for p, pool := range limiterPools {
			o.ObserveInt64(lcap, pool.cap, pools[p]...)
		}
		o.ObserveInt64(wcap, coalesce.MaxOpenWindows)
		var s coalesce.Stats
		if stats != nil {
			s = stats()
		}
		o.ObserveInt64(pending, int64(s.Pending))
		o.ObserveInt64(waits, toInt64(s.HandoffWaits))
		return nil
	})
}
