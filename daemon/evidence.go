package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// stateDirRules are registrar.state_dir's privdir rules, for every backend
// kind: the owner and the ancestors too, since whoever may change the
// directory may replace the checkpoint (and the embedded registry beside
// it) with one of their own (issue 27).
var stateDirRules = privdir.Options{Owner: true, Ancestors: true}

// openStateDir opens registrar.state_dir (created 0700 if missing,
// checked as private, for every backend kind, and held open for the
// checkpoint, the audit store's sealing key and the tick's recheck,
// dirguard.go), and reads the sealing key file in it: nil when there is
// none (the store is not sealed). An unsafe directory, or a key file that
// cannot be trusted (damaged, not a regular file, readable by others), is
// a setup error: the daemon does not seal with a key it cannot trust, nor
// silently stop sealing.
func (d *Daemon) openStateDir(r config.Registrar) (*audit.SealKey, error) {
	dir, _, err := privdir.Open(r.StateDir, stateDirRules)
	if err != nil {
		return nil, setup(fmt.Errorf("daemon: state directory (registrar.state_dir %s): %w", r.StateDir, err), false)
	}
	d.stateDir = dir
	d.closers = append(d.closers, dir.Close)
	key, err := audit.OpenSealKey(dir)
	if err != nil {
		// A file that is not a key file stays so until someone acts.
		return nil, setup(fmt.Errorf("daemon: audit sealing key (registrar.state_dir %s): %w", r.StateDir, err), errors.Is(err, audit.ErrSealKey))
	}
	return key, nil
}

// recoverEvidence recovers an unclean stop's windows into counted records
// (coalesce.RecoverCheckpoint), logs the stop, and starts this run's
// checkpoint in the state directory openStateDir opened (the files
// rewritten empty: cleared, and the marker of a running daemon). A torn or
// unreadable checkpoint never fails it; a store that cannot take the
// recovered records does, leaving the files for the next start.
func (d *Daemon) recoverEvidence(cfg config.Config, logger *slog.Logger) error {
	r := cfg.Registrar
	dir := d.stateDir
	window := time.Duration(r.RateLimitCoalesceWindowSeconds) * time.Second
	at := d.seams.now()
	var err error
	d.recovery, err = coalesce.RecoverCheckpoint(context.Background(), dir, d.store, r.AuditRecordDir, window, at)
	coalesce.LogRecovery(context.Background(), logger, d.recovery, r.StateDir)
	if err != nil {
		return fmt.Errorf("daemon: evidence recovery: %w", err)
	}
	if d.ckpt, err = coalesce.StartCheckpoint(dir, d.recovery, at); err != nil {
		return fmt.Errorf("daemon: evidence checkpoint (registrar.state_dir %s): clearing after recovery: %w", r.StateDir, err)
	}
	return nil
}

// restartMember is the registrar_health restart member.
func restartMember(r coalesce.Recovery) health.RestartMember {
	m := health.RestartMember{
		Unclean:          r.Unclean,
		Checkpoint:       r.Checkpoint,
		RecoveredRecords: r.Records,
		RecoveredCount:   r.Count,
	}
	if r.Unclean {
		m.EvidenceGapTo = r.At.UTC().Format(healthTime)
		if !r.GapFrom.IsZero() {
			m.EvidenceGapFrom = r.GapFrom.UTC().Format(healthTime)
		}
	}
	return m
}

const healthTime = "2006-01-02T15:04:05.000Z"

// restartStats is the telemetry view of the recovery and the checkpoint.
func (d *Daemon) restartStats() telemetry.RestartStats {
	s := telemetry.RestartStats{CheckpointFailures: d.ckpt.Failures()}
	if d.recovery.Unclean {
		s.UncleanRestarts = 1
		s.LastUncleanRestartUnix = float64(d.recovery.At.UnixNano()) / 1e9
	}
	return s
}
