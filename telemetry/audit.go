package telemetry

import (
	"context"
	"errors"

	"github.com/registrar-otel/registrar-otel/audit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// OTel instrument names of the audit store's capacity and file identity.
const (
	// registrar_audit_store_free_bytes
	AuditStoreFreeBytes = "registrar.audit.store.free_bytes"
	// registrar_audit_store_bytes
	AuditStoreBytes = "registrar.audit.store.bytes"
	// registrar_audit_store_budget_bytes
	AuditStoreBudgetBytes = "registrar.audit.store.budget_bytes"
	// registrar_audit_store_state{state}
	AuditStoreState = "registrar.audit.store.state"
	// registrar_audit_file_reopened_total{cause}
	AuditFileReopened = "registrar.audit.file.reopened"
	// registrar_audit_store_held_files
	AuditStoreHeldFiles = "registrar.audit.store.held_files"
	// registrar_audit_retention_deleted_total
	AuditRetentionDeleted = "registrar.audit.retention.deleted"
	// registrar_audit_retention_failures_total
	AuditRetentionFailures = "registrar.audit.retention.failures"
)

const (
	attrState = "state"
	attrCause = "cause"
)

// RegisterAuditStore registers the audit store's capacity and reopen
// instruments on mp (nil means a no-op provider), observed by one callback:
//
//   - registrar.audit.store.free_bytes, .bytes, .budget_bytes (gauges,
//     unit By, exported without a unit suffix): the last capacity probe's
//     free space, store size and rotation budget;
//   - registrar.audit.store.state{state} (gauge): one series per state (ok,
//     low, critical, retention_held, unwritable; unit {state}), 1 for the
//     current one and 0 for the others;
//   - registrar.audit.file.reopened{cause} (counter, {reopen}): reopens of
//     the active file by cause (directory_removed, directory_replaced,
//     deleted, renamed, replaced, sighup), every cause exported from zero;
//   - registrar.audit.store.held_files (gauge, {file}): generations
//     retention keeps past audit_max_retained_files because they are
//     younger than audit_min_retention_seconds (the state is then
//     retention_held);
//   - registrar.audit.retention.deleted (counter, {file}): generations
//     retention deleted, each after its rotated record, and
//     registrar.audit.retention.failures (counter, {round}): retention
//     rounds that failed and kept a generation past the budget, since
//     start.
//
// capacity returns the last probe result (audit.CapacityProbe.Last: the
// callback never probes) and stats the store's counters
// (audit.Store.Stats); both must be safe to call from the collecting
// goroutine.
func RegisterAuditStore(mp metric.MeterProvider, capacity func() audit.Capacity, stats func() audit.StoreStats) error {
	if capacity == nil || stats == nil {
		return errors.New("telemetry: RegisterAuditStore: nil capacity or stats func")
	}
	r := newRegistration(meterOf(mp), "RegisterAuditStore")
	free := r.gauge(AuditStoreFreeBytes, "By",
		"Bytes available on the audit store's file system (statfs f_bavail × f_bsize), as of the last capacity probe on the daemon tick.")
	bytes := r.gauge(AuditStoreBytes, "By",
		"Bytes of the audit store's own files (the active file and the rotated generations), as of the last capacity probe.")
	budget := r.gauge(AuditStoreBudgetBytes, "By",
		"The most the audit store occupies once rotation bounds it: (audit_max_retained_files + 1) × audit_max_file_bytes.")
	state := r.gauge(AuditStoreState, "{state}",
		"Audit store capacity state: one series per state (ok, low, critical, retention_held, unwritable), 1 for the current state and 0 for the others. "+
			"low: free space does not cover budget - store bytes + reserve; critical: less than audit_max_file_bytes free; "+
			"retention_held: generations younger than audit_min_retention_seconds are kept past audit_max_retained_files and mints are refused RegistrarBusy; "+
			"unwritable: the last append or reopen failed.")
	reopened := r.counter(AuditFileReopened, "{reopen}",
		"Reopens of the audit store's active file, by cause: the configured path no longer named the open file "+
			"(directory_removed, directory_replaced, deleted, renamed, replaced) or the operator sent SIGHUP (sighup).")
	held := r.gauge(AuditStoreHeldFiles, "{file}",
		"Generations the audit store keeps past audit_max_retained_files because they are younger than audit_min_retention_seconds. "+
			"While it is above 0 the capacity state is retention_held and mints are refused RegistrarBusy.")
	deleted := r.counter(AuditRetentionDeleted, "{file}",
		"Generations audit retention deleted, each after the rotated record of what it held was written and synced.")
	retainFailed := r.counter(AuditRetentionFailures, "{round}",
		"Audit retention rounds that failed (the rotated record or the deletion): the generation is kept past the budget and retried at the next rotation.")
	var byState [audit.NumCapacityStates][]metric.ObserveOption
	for i := range audit.NumCapacityStates {
		byState[i] = attrs(attribute.String(attrState, audit.CapacityState(i).String()))
	}
	var byCause [audit.NumReopenCauses][]metric.ObserveOption
	for i := range audit.NumReopenCauses {
		byCause[i] = attrs(attribute.String(attrCause, audit.ReopenCause(i).String()))
	}
	return r.observe(func(_ context.Context, o metric.Observer) error {
		c := capacity()
		o.ObserveInt64(free, toInt64(c.FreeBytes))
		o.ObserveInt64(bytes, toInt64(c.StoreBytes))
		o.ObserveInt64(budget, toInt64(c.BudgetBytes))
		o.ObserveInt64(held, toInt64(c.HeldFiles))
		for i := range audit.NumCapacityStates {
			o.ObserveInt64(state, oneIf(int(c.State) == i), byState[i]...)
		}
		st := stats()
		for i := range audit.NumReopenCauses {
			o.ObserveInt64(reopened, toInt64(st.Reopens[i]), byCause[i]...)
		}
		o.ObserveInt64(deleted, toInt64(st.RotatedRecords))
		o.ObserveInt64(retainFailed, toInt64(st.RetentionFailures))
		return nil
	})
}
