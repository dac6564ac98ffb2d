package daemon

import (
	"context"
	"log/slog"
	"time"
)

// tickTask is one step of the maintenance pass. A task that fails logs
// and returns; the loop continues.
type tickTask struct {
	name string
	run  func(ctx context.Context, now time.Time) error
}

// tickLoop is the daemon's single maintenance loop: on every tick it runs
// each task in order (close due coalescing windows, then refresh the
// health snapshot, so the snapshot already counts what was just closed).
// There is no second scheduler and no timer per key. It returns when ctx
// is done.
//
// After each pass it calls after (nil: nothing): the daemon records the
// pass for the liveness probe and feeds the systemd watchdog there, so
// both see exactly the passes that ran.
func tickLoop(ctx context.Context, ticks <-chan time.Time, logger *slog.Logger, after func(time.Time), tasks ...tickTask) {
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticks:
			faultTickStall(ctx) // a test build's stall seam (fault_on.go); nothing in production
			runTasks(ctx, now, logger, tasks)
			if after != nil {
				after(now)
			}
		}
	}
}

func runTasks(ctx context.Context, now time.Time, logger *slog.Logger, tasks []tickTask) {
	for _, task := range tasks {
		if err := task.run(ctx, now); err != nil {
			logger.LogAttrs(ctx, slog.LevelWarn, "maintenance task failed",
				slog.String("task", task.name), slog.Any("error", err))
		}
	}
}
