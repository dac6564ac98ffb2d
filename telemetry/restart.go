package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// Restart and checkpoint instruments: the gap an unclean stop leaves in the
// counted evidence, and the checkpoint that bounds it (coalesce/checkpoint.go).
const (
	// registrar_unclean_restarts_total
	UncleanRestarts = "registrar.unclean_restarts"
	// registrar_last_unclean_restart_timestamp_seconds
	LastUncleanRestart = "registrar.last_unclean_restart_timestamp_seconds"
	// registrar_coalesce_checkpoint_failures_total
	CoalesceCheckpointFailures = "registrar.coalesce.checkpoint_failures"
)

// RestartStats is what RegisterRestart observes.
type RestartStats struct {
	// UncleanRestarts is 1 when this start found the previous run's
	// checkpoint (it stopped without its shutdown flush), else 0.
	UncleanRestarts uint64
	// LastUncleanRestartUnix is that start's instant, Unix seconds (0 when
	// the start was clean).
	LastUncleanRestartUnix float64
	// CheckpointFailures counts evidence checkpoint writes that failed.
	CheckpointFailures uint64
}

// RegisterRestart registers, on mp (nil means a no-op provider):
//
//   - registrar.unclean_restarts (counter, {restart}): starts that found an
//     unclean stop's checkpoint, 0 or 1 per process (the daemon counts its
//     own start); a rise means limited invocations between the last
//     checkpoint and the restart may be uncounted;
//   - registrar.last_unclean_restart_timestamp_seconds (gauge, s): that
//     start's Unix time, 0 when the start was clean;
//   - registrar.coalesce.checkpoint_failures (counter, {write}): checkpoint
//     writes that failed; while they fail, a crash loses whole windows.
//
// stats is called once per collection and must be safe from the collecting
// goroutine.
func RegisterRestart(mp metric.MeterProvider, stats func() RestartStats) error {
	if stats == nil {
		return errors.New("telemetry: RegisterRestart: nil stats func")
	}
	r := newRegistration(meterOf(mp), "RegisterRestart")
	restarts := r.counter(UncleanRestarts, "{restart}",
		"Starts that found the previous run's evidence checkpoint: it stopped without its shutdown flush (SIGKILL, crash, OOM kill, power loss). "+
			"Limited invocations between the last checkpoint and the restart may be uncounted; the ERROR line at start names the interval.")
	last := r.floatGauge(LastUncleanRestart, "s",
		"Unix time of this process's start if it found an unclean stop, 0 if its start was clean.")
	failures := r.counter(CoalesceCheckpointFailures, "{write}",
		"Evidence checkpoint writes (registrar.state_dir) that failed. While they fail, a crash loses whole coalescing windows instead of one tick.")
	return r.observe(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(restarts, toInt64(s.UncleanRestarts))
		o.ObserveFloat64(last, s.LastUncleanRestartUnix)
		o.ObserveInt64(failures, toInt64(s.CheckpointFailures))
		return nil
	})
}
