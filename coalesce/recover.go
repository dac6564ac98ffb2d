package coalesce

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Checkpoint states, as recovery found the files (the health member's
// "checkpoint" and the ERROR line's).
const (
	checkpointNone       = "none"       // no file: the previous run stopped cleanly (or this is the first)
	checkpointOK         = "ok"         // the newest checkpoint decoded
	checkpointStale      = "stale"      // the newest write was torn; the one before it was used
	checkpointUnreadable = "unreadable" // no file decoded: nothing could be recovered
)

// Recovery is what start-up found of the previous run's stop.
type Recovery struct {
	// Unclean: a checkpoint file was there, so the previous run did not
	// reach the end of its shutdown flush.
	Unclean bool
	// At is when this start detected it.
	At time.Time
	// Checkpoint is one of "none", "ok", "stale", "unreadable".
	Checkpoint string
	// Problem says what was wrong with a torn file ("" when none was).
	Problem string
	// GapFrom is the checkpoint's instant (zero when unreadable): limited
	// invocations between it and At may be uncounted.
	GapFrom time.Time
	// Records and Count are the recovered counted records written and the
	// invocations they count; Durable the checkpointed windows whose record
	// the store already held (not written again); Failed the recovered
	// records the store refused.
	Records, Count, Durable, Failed uint64
	// seq is the highest checkpoint sequence seen, so the new run's
	// checkpoints supersede every file read.
	seq uint64
}

// recoveryLookback is how long before a checkpoint's instant recovery looks
// in the store for the records of its windows: a window in a checkpoint was
// still open, or in the batch being written, when the snapshot was taken,
// so its record, if written, carries a ts after instant − window − the
// write's duration.
const recoveryLookback = time.Minute

// RecoverCheckpoint recovers the checkpoint in the state directory dir
// (open, and checked private by the caller) into counted records through
// store, auditDir being the store's directory (see recoverCheckpoint). Its
// errors do not name a component: the caller does.
func RecoverCheckpoint(ctx context.Context, dir *os.File, store Appender, auditDir string, window time.Duration, now time.Time) (Recovery, error) {
	return recoverCheckpoint(ctx, dirFS{dir: dir}, store, auditDir, window, now)
}

// recoverCheckpoint runs at start, after the audit store opened and before
// any listener exists. If a checkpoint file is there (an unclean stop), it
// writes each checkpointed window that has no record in the store yet as an
// ordinary counted record (window_end at the checkpoint's instant, clamped
// to the window) through the store's batch append. It never refuses to
// start: a torn or unreadable checkpoint is reported, not an error. The
// caller then clears the files (StartCheckpoint) and logs the result
// (LogRecovery).
//
// Never twice: a window's record is identified by (identity, verb, bucket,
// policy, shadow, window_start), since a key has at most one open window
// and its next one starts at least a window later. The store is the account of what is
// durable: a checkpointed window whose record the store already holds (the
// tick closed it, or the writer flushed it early, after the snapshot; or a
// previous recovery wrote it and crashed before clearing) is skipped.
func recoverCheckpoint(ctx context.Context, cfs checkpointFS, store Appender, auditDir string, window time.Duration, now time.Time) (Recovery, error) {
	rec := Recovery{At: now, Checkpoint: checkpointNone}
	var best *Checkpoint
	present, torn := 0, 0
	for i := range uint64(2) {
		b, err := cfs.ReadFile(CheckpointFile(i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		present++
		if err != nil {
			torn++
			rec.Problem = fmt.Sprintf("%s: %v", CheckpointFile(i), err)
			continue
		}
		c, err := DecodeCheckpoint(b)
		if err != nil {
			torn++
			rec.Problem = fmt.Sprintf("%s: %v", CheckpointFile(i), err)
			continue
		}
		rec.seq = max(rec.seq, c.Seq)
		if best == nil || c.Seq > best.Seq {
			best = c
		}
	}
	if present == 0 {
		return rec, nil
	}
	rec.Unclean = true
	switch {
	case best == nil:
		rec.Checkpoint = checkpointUnreadable
		return rec, nil
	case torn > 0:
		rec.Checkpoint = checkpointStale
	default:
		rec.Checkpoint = checkpointOK
	}
	rec.GapFrom = best.Instant
	if len(best.Windows) == 0 {
		return rec, nil
	}
	durable, err := durableWindows(ctx, auditDir, best.Instant.Add(-window-recoveryLookback))
	if err != nil {
		return rec, fmt.Errorf("reading the audit store: %w", err)
	}
	var recs []*audit.Record
	for _, w := range best.Windows {
		r := w.Record(window, best.Instant, now)
		if _, ok := durable[recordKeyOf(r)]; ok {
			rec.Durable++
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return rec, nil
	}
	errs := store.AppendBatch(context.WithoutCancel(ctx), recs)
	var firstErr error
	for i, r := range recs {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = errors.New("the store answered fewer records than it was given")
		}
		if err != nil {
			rec.Failed++
			firstErr = cmpOr(firstErr, err)
			continue
		}
		rec.Records++
		rec.Count = addSat(rec.Count, r.Count)
	}
	if firstErr != nil {
		return rec, fmt.Errorf("%d of %d recovered records not written: %w", rec.Failed, len(recs), firstErr)
	}
	return rec, nil
}

// recordKey identifies a window's counted record as the store holds it:
// the identity as bounded, the start at the store's millisecond.
type recordKey struct {
	identity string
	policy   string // "" for the default policy, as the record omits it
	verb     vocab.Verb
	bucket   vocab.Bucket
	shadow   bool
	start    int64 // window_start, Unix milliseconds
}

// recordKeyOf is r's key in the form the store writes it (the field bound
// applied, the start canonicalised), so that a record built from a
// checkpointed window matches the line written for the same window.
func recordKeyOf(r *audit.Record) recordKey {
	id := r.CallerIdentity
	if len(id) > audit.MaxFieldBytes {
		if line, err := audit.Marshal(r); err == nil {
			if back, err := audit.Unmarshal(line[:len(line)-1]); err == nil {
				id = back.CallerIdentity
			}
		}
	}
	policy := r.Policy
	if policy == audit.DefaultPolicy {
		policy = ""
	}
	return recordKey{identity: id, policy: policy, verb: r.Verb, bucket: r.LimitedBucket, shadow: r.Shadow, start: r.WindowStart.UnixMilli()}
}

// durableWindows reads the keys of the limited records written since.
func durableWindows(ctx context.Context, dir string, since time.Time) (map[recordKey]struct{}, error) {
	recs, err := audit.LimitedSince(ctx, dir, since)
	if err != nil {
		return nil, err
	}
	out := make(map[recordKey]struct{}, len(recs))
	for _, r := range recs {
		out[recordKeyOf(r)] = struct{}{}
	}
	return out, nil
}

// LogRecovery writes the one ERROR line of an unclean stop.
func LogRecovery(ctx context.Context, logger *slog.Logger, rec Recovery, stateDir string) {
	if !rec.Unclean {
		return
	}
	from := "unknown (no readable checkpoint)"
	if !rec.GapFrom.IsZero() {
		from = rec.GapFrom.UTC().Format(time.RFC3339Nano)
	}
	logger.LogAttrs(ctx, slog.LevelError, "unclean stop: counted evidence of limited invocations may be incomplete between the last checkpoint and this start",
		slog.String("gap_from", from),
		slog.String("gap_to", rec.At.UTC().Format(time.RFC3339Nano)),
		slog.String("checkpoint", rec.Checkpoint),
		slog.String("checkpoint_problem", rec.Problem),
		slog.Uint64("recovered_records", rec.Records),
		slog.Uint64("recovered_count", rec.Count),
		slog.Uint64("already_durable", rec.Durable),
		slog.Uint64("recovery_failures", rec.Failed),
		slog.String("state_dir", stateDir))
}

// cmpOr is a if it is not the zero value, else b.
func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

func addSat(a, b uint64) uint64 {
	if a > ^uint64(0)-b {
		return ^uint64(0)
	}
	return a + b
}
