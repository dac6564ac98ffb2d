package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// ScopeName is the instrumentation scope of the instruments this package
// registers.
const ScopeName = "github.com/registrar-otel/registrar-otel/telemetry"

// OTel instrument names. The Prometheus exporter turns each into the
// series named in its comment (dots become underscores, a counter gains
// _total, a unit in braces adds no suffix, the unit s adds _seconds).
const (
	// registrar_limiter_entries
	LimiterEntries = "registrar.limiter.entries"
	// registrar_limiter_overflow_charges_total{verb,bucket}
	LimiterOverflowCharges = "registrar.limiter.overflow_charges"
	// registrar_limiter_reclaimed_entries_total
	LimiterReclaimedEntries = "registrar.limiter.reclaimed_entries"

	// registrar_coalesce_open_windows
	CoalesceOpenWindows = "registrar.coalesce.open_windows"
	// registrar_coalesce_records_total{bucket}
	CoalesceRecords = "registrar.coalesce.records"
	// registrar_coalesce_early_flushes_total
	CoalesceEarlyFlushes = "registrar.coalesce.early_flushes"
	// registrar_coalesce_record_write_failures_total
	CoalesceRecordWriteFailures = "registrar.coalesce.record_write_failures"

	// registrar_audit_appends_total{phase}
	AuditAppends = "registrar.audit.appends"
	// registrar_audit_append_failures_total{phase}
	AuditAppendFailures = "registrar.audit.append_failures"
	// registrar_audit_append_duration_seconds (histogram)
	AuditAppendDuration = "registrar.audit.append.duration"
)

// auditAppendBuckets are the audit append duration histogram's upper
// bounds, in seconds. An append is a write and an fsync: tens of µs on a
// fast SSD with a write cache, milliseconds on a spinning disk or a
// network volume, seconds when the storage is in trouble.
var auditAppendBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5,
}

// Attribute keys of the series this package exports. None ever carries an
// identity or a request id.
const (
	attrVerb   = "verb"
	attrBucket = "bucket"
	attrPhase  = "phase"
	attrPool   = "pool"
)

func meterOf(mp metric.MeterProvider) metric.Meter { return scopedMeter(mp, ScopeName) }

// scopedMeter is mp's meter of scope (a no-op one for a nil mp). The
// instruments of a package that keeps its own spans are registered here in
// that package's scope, so that an OTLP consumer sees a package's spans
// and metrics under one scope.
func scopedMeter(mp metric.MeterProvider, scope string) metric.Meter {
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	return mp.Meter(scope)
}

// toInt64 converts a uint64 count for an int64 instrument, saturating
// instead of wrapping to a negative value.
func toInt64(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// limiterPools are the values of the pool label of registrar_limiter_entries
// and registrar_limiter_capacity, each with its pool's cap: the remote pool
// (the certificate identities, limiter.MaxEntries) and the local pool (the
// unix socket's callers, limiter.MaxLocalEntries). Each pool has its own
// overflow buckets, so each is compared with its own cap.
var limiterPools = [2]struct {
	name string
	cap  int64
}{{"remote", limiter.MaxEntries}, {"local", limiter.MaxLocalEntries}}

// poolEntries is s's entry count of each pool, in limiterPools' order.
func poolEntries(s limiter.Stats) [len(limiterPools)]int64 {
	return [...]int64{int64(s.Entries - s.LocalEntries), int64(s.LocalEntries)}
}

// byPool is the observe option of each pool's series, in limiterPools'
// order.
func byPool() (o [len(limiterPools)][]metric.ObserveOption) {
	for p, pool := range limiterPools {
		o[p] = attrs(attribute.String(attrPool, pool.name))
	}
	return o
}

// RegisterLimiter registers the limiter's map instruments on mp (nil means
// a no-op provider), observed by one callback that calls stats once per
// collection:
//
//   - registrar.limiter.entries{pool} (gauge, {entry}): entries in each
//     pool of the map, "remote" (capped at limiter.MaxEntries, 256) and
//     "local" (limiter.MaxLocalEntries, 256);
//   - registrar.limiter.overflow_charges{verb,bucket} (counter, {charge}):
//     charges that fell on the shared overflow bucket of (verb, bucket),
//     both pools';
//   - registrar.limiter.reclaimed_entries (counter, {entry}): full entries
//     reclaimed to make room.
//
// stats must be safe to call from the collecting goroutine
// (limiter.Limiter.Stats is). The registration lasts as long as mp.
func RegisterLimiter(mp metric.MeterProvider, stats func() limiter.Stats) error {
	if stats == nil {
		return errors.New("telemetry: RegisterLimiter: nil stats func")
	}
	r := newRegistration(meterOf(mp), "RegisterLimiter")
	entries := r.gauge(LimiterEntries, "{entry}", fmt.Sprintf(
		"Entries in each pool of the limiter's per-(identity, verb, bucket) map; the caps are %d (remote) and %d (local). "+
			"At its cap, charges of a pool's new keys fall on that pool's shared overflow buckets.", limiter.MaxEntries, limiter.MaxLocalEntries))
	overflow := r.counter(LimiterOverflowCharges, "{charge}",
		"Charges that fell on the shared overflow bucket of (verb, bucket) because the limiter map was full "+
			"of entries still refilling. Any increase is a sign of an identity unstable across connections.")
	reclaimed := r.counter(LimiterReclaimedEntries, "{entry}",
		"Limiter map entries removed, always at full burst, since start.")
	pools := byPool()
	var byKey [vocab.NumVerbs][vocab.NumBuckets][]metric.ObserveOption
	for v := range vocab.NumVerbs {
		for b := range vocab.NumBuckets {
			byKey[v][b] = attrs(
				attribute.String(attrVerb, vocab.Verb(v).String()),
				attribute.String(attrBucket, vocab.Bucket(b).String()))
		}
	}
	return r.observe(func(_ context.Context, o metric.Observer) error {
		s := stats()
		for p, n := range poolEntries(s) {
			o.ObserveInt64(entries, n, pools[p]...)
		}
		o.ObserveInt64(reclaimed, toInt64(s.Reclaimed))
		for v := range vocab.NumVerbs {
			for b := range vocab.NumBuckets {
				o.ObserveInt64(overflow, toInt64(s.OverflowCharges[v][b]), byKey[v][b]...)
			}
		}
		return nil
	})
}

// RegisterCoalesce registers the coalescer's instruments on mp (nil means a
// no-op provider), observed by one callback that calls stats once per
// collection:
//
//   - registrar.coalesce.open_windows (gauge, {window}): open coalescing
//     windows; the cap is coalesce.MaxOpenWindows (4096);
//   - registrar.coalesce.records{bucket} (counter, {record}): counted
//     "limited" records written;
//   - registrar.coalesce.early_flushes (counter, {window}): windows closed
//     early because the window map was at its cap;
//   - registrar.coalesce.record_write_failures (counter, {record}): counted
//     records that could not be written.
func RegisterCoalesce(mp metric.MeterProvider, stats func() coalesce.Stats) error {
	if stats == nil {
		return errors.New("telemetry: RegisterCoalesce: nil stats func")
	}
	r := newRegistration(meterOf(mp), "RegisterCoalesce")
	open := r.gauge(CoalesceOpenWindows, "{window}", fmt.Sprintf(
		"Open coalescing windows, one per (identity, verb, bucket) limited recently; the cap is %d, "+
			"at which the oldest window is written early.", coalesce.MaxOpenWindows))
	records := r.counter(CoalesceRecords, "{record}",
		"Counted limited records written to the audit store, one per closed coalescing window, by limited bucket.")
	early := r.counter(CoalesceEarlyFlushes, "{window}",
		"Coalescing windows written before their deadline because the open-window map was at its cap.")
	failures := r.counter(CoalesceRecordWriteFailures, "{record}",
		"Counted limited records that could not be written to the audit store: evidence of a flood was lost.")
	var byBucket [vocab.NumBuckets][]metric.ObserveOption
	for b := range vocab.NumBuckets {
		byBucket[b] = attrs(attribute.String(attrBucket, vocab.Bucket(b).String()))
	}
	return r.observe(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(open, int64(s.OpenWindows))
		for b := range vocab.NumBuckets {
			o.ObserveInt64(records, toInt64(s.Records[b]), byBucket[b]...)
		}
		o.ObserveInt64(early, toInt64(s.EarlyFlushes))
		o.ObserveInt64(failures, toInt64(s.WriteFailures))
		return nil
	})
}

// numPhaseSlots indexes per-phase options: 0 for an unknown phase, then
// the audit phases at their own values.
const numPhaseSlots = audit.NumPhases + 1

// auditObserver is the audit.Observer NewAuditObserver returns.
type auditObserver struct {
	appends  metric.Int64Counter
	failures metric.Int64Counter
	duration metric.Float64Histogram
	byPhase  [numPhaseSlots][]metric.AddOption
}

// NewAuditObserver returns an audit.Observer recording on mp (nil means a
// no-op provider):
//
//   - registrar.audit.appends{phase} (counter, {record}): successful appends;
//   - registrar.audit.append_failures{phase} (counter, {record}): failed
//     appends;
//   - registrar.audit.append.duration (histogram, s, auditAppendBuckets):
//     every append's duration, successful or not.
//
// phase is "intent", "outcome", "limited", "admin", or "unknown" for a nil
// record. The appends and failures series of the four phases exist at zero from
// the start, so an alert on the first failure fires. The observer is safe
// for concurrent use and does not allocate.
func NewAuditObserver(mp metric.MeterProvider) (audit.Observer, error) {
	r := newRegistration(meterOf(mp), "NewAuditObserver")
	o := &auditObserver{
		appends: r.syncCounter(AuditAppends, "{record}",
			"Audit records appended (written and synced) to the audit store, by phase (intent, outcome, limited, admin)."),
		failures: r.syncCounter(AuditAppendFailures, "{record}",
			"Audit record appends that failed, by phase. A failed intent append refuses the mint; "+
				"a failed outcome append leaves a registry change unrecorded."),
		duration: r.histogram(AuditAppendDuration, "s",
			"Duration of one audit append, write and fsync included, successful or not.", auditAppendBuckets),
	}
	if err := r.err(); err != nil {
		return nil, err
	}
	for i := range numPhaseSlots {
		name := "unknown"
		if p := audit.Phase(i); p.Valid() {
			name = p.String()
		}
		o.byPhase[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(attrPhase, name)))}
		if i != 0 {
			o.appends.Add(context.Background(), 0, o.byPhase[i]...)
			o.failures.Add(context.Background(), 0, o.byPhase[i]...)
		}
	}
	return o, nil
}

// Appended implements audit.Observer.
func (o *auditObserver) Appended(phase audit.Phase, d time.Duration, err error) {
	ctx := context.Background()
	slot := 0
	if phase.Valid() {
		slot = int(phase)
	}
	if err != nil {
		o.failures.Add(ctx, 1, o.byPhase[slot]...)
	} else {
		o.appends.Add(ctx, 1, o.byPhase[slot]...)
	}
	o.duration.Record(ctx, d.Seconds())
}
