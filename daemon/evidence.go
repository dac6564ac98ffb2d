package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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

// openCheckpointFS opens the state directory for the checkpoint (created
// 0700 if missing, checked as private, for every backend kind); tests
// replace it with a fault seam. The directory stays open for the
// checkpoint's *at calls and the tick's recheck (dirguard.go).
var openCheckpointFS = func(stateDir string) (checkpointFS, func() error, error) {
	dir, _, err := privdir.Open(stateDir, stateDirRules)
	if err != nil {
		return nil, nil, err
	}
	return dirFS{dir: dir}, dir.Close, nil
}

// now is the daemon's clock for recovery; tests replace it.
var clockNow = time.Now

// recoverEvidence opens the checkpoint, recovers an unclean stop's windows
// into counted records, logs the stop, and starts this run's checkpoint
// (the files rewritten empty: cleared, and the marker of a running daemon).
// A torn or unreadable checkpoint never fails it; a store that cannot take
// the recovered records does, leaving the files for the next start.
func (d *Daemon) recoverEvidence(cfg config.Config, logger *slog.Logger) error {
	r := cfg.Registrar
	cfs, closeFS, err := openCheckpointFS(r.StateDir)
	if err != nil {
		return fmt.Errorf("daemon: evidence checkpoint (registrar.state_dir %s): %w", r.StateDir, err)
	}
	d.closers = append(d.closers, closeFS)
	window := time.Duration(r.RateLimitCoalesceWindowSeconds) * time.Second
	at := clockNow()
	d.recovery, err = recoverCheckpoint(context.Background(), cfs, d.store, r.AuditRecordDir, window, at)
	logRecovery(context.Background(), logger, d.recovery, r.StateDir)
	if err != nil {
		return err
	}
	d.ckpt = &checkpointer{fs: cfs, started: at}
	if err := d.ckpt.Start(d.recovery.seq, at); err != nil {
		return fmt.Errorf("daemon: evidence checkpoint (registrar.state_dir %s): clearing after recovery: %w", r.StateDir, err)
	}
	return nil
}

// member is the registrar_health restart member.
func (r Recovery) member() health.RestartMember {
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
	s := telemetry.RestartStats{CheckpointFailures: d.ckpt.failures.Load()}
	if d.recovery.Unclean {
		s.UncleanRestarts = 1
		s.LastUncleanRestartUnix = float64(d.recovery.At.UnixNano()) / 1e9
	}
	return s
}
