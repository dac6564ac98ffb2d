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
	// registrar_audit_seal_epoch
	AuditSealEpoch = "registrar.audit.seal.epoch"
	// registrar_audit_seal_last_seal_timestamp_seconds
	AuditSealLastSeal = "registrar.audit.seal.last_seal_timestamp_seconds"
	// registrar_audit_seal_key_file_failures_total
	AuditSealKeyFileFailures = "registrar.audit.seal.key_file_failures"
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
//     start;
//   - registrar.audit.seal.epoch (gauge, {epoch}), the sealing epoch the
//     store is in, registrar.audit.seal.last_seal_timestamp_seconds
//     (gauge, s), the Unix time of its last sealed record, and
//     registrar.audit.seal.key_file_failures (counter, {write}), evolved
//     keys that could not be written to the key file: observed only while
//     the store is chained (sealed, or sealed once and opened without its
//     key, whose last seal then stays where it was).
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
	sealEpoch := r.gauge(AuditSealEpoch, "{epoch}",
		"The sealing epoch of a sealed audit store: each epoch ends with a sealed record, at start, rotation and stop and at least every 15 minutes, and its key is then erased. "+
			"Absent when the store is not sealed.")
	lastSeal := r.floatGauge(AuditSealLastSeal, "s",
		"Unix time of the sealed audit store's last sealed record (written since start, or found in the store at start). "+
			"More than two epochs (30 minutes) ago: the store is no longer sealing (its key file is gone, or writes fail). Absent when the store is not sealed.")
	keyFailed := r.counter(AuditSealKeyFileFailures, "{write}",
		"Evolved sealing keys the audit store could not write to its key file (registrar.state_dir/audit-seal.key): while they fail the file holds an earlier epoch's key. "+
			"Absent when the store is not sealed.")
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
		if sl := st.Seal; sl.Chained {
			o.ObserveInt64(sealEpoch, toInt64(sl.Epoch))
			if !sl.LastSeal.IsZero() {
				o.ObserveFloat64(lastSeal, float64(sl.LastSeal.UnixNano())/1e9)
			}
			o.ObserveInt64(keyFailed, toInt64(sl.KeyFileFailures))
		}
		return nil
	})
}
