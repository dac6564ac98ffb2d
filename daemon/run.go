package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// Run serves until ctx is done or a listener fails, then shuts down
// gracefully. It returns nil after a shutdown asked for by ctx.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	r := d.cfg.Registrar
	addrs := make([]string, len(d.listeners))
	for i, l := range d.listeners {
		addrs[i] = l.Addr().String()
	}
	metrics := "disabled"
	if d.metricsL != nil {
		metrics = "http://" + d.metricsL.Addr().String() + "/metrics"
	}
	// SIGHUP is caught before the "serving" line is written: whoever reads
	// that line as the daemon's readiness (a script, a test) and sends
	// SIGHUP at once must reach the reload, not the default action, which
	// ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// SIGABRT is systemd's watchdog signal (WatchdogSignal=, by default
	// SIGABRT) when the tick stops feeding it. Go's own answer, a stack dump
	// and exit status 2, is the status the unit keeps for configuration
	// errors (RestartPreventExitStatus=2): a daemon the watchdog killed
	// was never restarted (measured under systemd 252: failed, NRestarts=0).
	// The daemon answers it itself, with the same dump and AbortExitStatus.
	abrt := make(chan os.Signal, 1)
	signal.Notify(abrt, syscall.SIGABRT)
	defer signal.Stop(abrt)
	abrtDone := make(chan struct{})
	defer close(abrtDone)
	go func() {
		select {
		case <-abrt:
			d.abort(ctx)
		case <-abrtDone:
		}
	}()
	d.logger.LogAttrs(ctx, slog.LevelInfo, "registrar-otel serving",
		slog.String("config", d.cfg.Source),
		slog.Any("listeners", addrs),
		slog.String("metrics", metrics),
		slog.String("audit_record_dir", r.AuditRecordDir),
		slog.String("state_dir", r.StateDir),
		slog.String("backend", r.Backend),
		slog.String("log_level", config.LogLevelName(d.logLevel.v.Level())),
		slog.Int("components", len(r.Components)),
		slog.Uint64("admission_burst", uint64(r.RateLimitAdmissionBurst)),
		slog.Uint64("predecision_refusal_burst", uint64(r.RateLimitPredecisionRefusalBurst)),
		slog.Uint64("instances", uint64(max(r.Instances, 1))))

	serveErr := make(chan error, len(d.listeners)+1)
	for _, l := range d.listeners {
		go func() {
			if err := d.server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("daemon: serving %s: %w", l.Addr(), err)
			}
		}()
	}
	if d.metricsL != nil {
		go func() {
			if err := d.tel.Serve(d.metricsL); err != nil {
				serveErr <- fmt.Errorf("daemon: serving metrics on %s: %w", d.metricsL.Addr(), err)
			}
		}()
	}

	// SIGHUP reopens the audit store's active file (logrotate's
	// convention), in order with the appends queued before it, then
	// reloads the configuration (reload.go).
	hupDone := make(chan struct{})
	defer close(hupDone)
	go func() {
		for {
			select {
			case <-hupDone:
				return
			case <-hup:
				err := d.store.Reopen()
				if err != nil {
					d.logger.LogAttrs(ctx, slog.LevelError, "SIGHUP: reopening the audit active file failed", slog.Any("error", err))
				}
				_, _ = d.Reload(ctx) // logged and counted by Reload
				if d.seams.onSIGHUP != nil {
					d.seams.onSIGHUP(err)
				}
			}
		}
	}()

	interval := time.Duration(r.MaintenanceIntervalMS) * time.Millisecond
	d.ticks = newTickClock(interval, d.seams.now)
	if d.watchdog > 0 && d.watchdog < 2*interval {
		d.logger.LogAttrs(ctx, slog.LevelWarn, "the watchdog interval is shorter than two maintenance intervals: systemd may kill a healthy daemon",
			slog.Duration("watchdog", d.watchdog), slog.Duration("maintenance_interval", interval))
	}
	ticks := d.seams.ticks
	if ticks == nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		ticks = t.C
	}
	tickCtx, stopTick := context.WithCancel(context.WithoutCancel(ctx))
	var ticking sync.WaitGroup
	tasks := d.tickTasks()
	if stall := d.seams.beforeTick; stall != nil {
		tasks = append([]tickTask{{"test-stall", func(context.Context, time.Time) error { stall(); return nil }}}, tasks...)
	}
	d.lastStatus = d.status() // sent after READY=1; the tick owns it from here
	status := d.lastStatus
	ticking.Go(func() {
		tickLoop(tickCtx, ticks, d.logger, d.afterPass, tasks...)
	})
	// The single writer of windows flushed early at the coalescer's cap, so
	// no limited call waits on an fsync; it stops with the tick loop, and
	// the shutdown flush writes whatever it left in the hand-off.
	ticking.Go(func() { d.coalescer.Run(tickCtx) })

	// Every listener is bound (or was handed over) and served, the audit
	// store is open and the backend built: callers may come.
	d.tel.SetProbes(telemetry.Probes{Live: d.live, Ready: d.ready})
	d.notify("READY=1")
	d.notify("STATUS=" + status)

	var runErr error
	select {
	case <-ctx.Done():
		d.logger.LogAttrs(ctx, slog.LevelInfo, "shutting down")
	case runErr = <-serveErr:
		d.logger.LogAttrs(ctx, slog.LevelError, "listener failed, shutting down", slog.Any("error", runErr))
	}
	d.stopping.Store(true)
	d.notify("STOPPING=1")
	d.notify("STATUS=stopping: finishing in-flight calls")

	// 1. Stop accepting and let in-flight invocations finish: after this
	//    no limited event can arrive.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := d.server.Shutdown(sctx); err != nil {
		d.logger.LogAttrs(sctx, slog.LevelWarn, "in-flight invocations outlasted the grace period; each was answered before its connection closed", slog.Any("error", err))
	}
	// 2. Stop the tick loop and the coalescer's writer.
	stopTick()
	ticking.Wait()
	// 3. Flush every open coalescing window, so no counted record is lost
	//    to the restart.
	open := d.coalescer.Stats().OpenWindows + d.coalescer.Stats().Pending
	d.notify(fmt.Sprintf("STATUS=stopping: flushing %d coalescing windows", open))
	d.coalescer.Flush(sctx, time.Now())
	st := d.coalescer.Stats()
	d.logger.LogAttrs(sctx, slog.LevelInfo, "flushed coalescing windows",
		slog.Int("windows", open), slog.Uint64("write_failures", st.WriteFailures))
	// 4. Every window is durable (or its failure logged): remove the
	//    checkpoint, the marker whose presence at start means an unclean
	//    stop. A record that failed to write keeps the marker, so the next
	//    start reports the stop as unclean rather than claim it clean.
	if st.WriteFailures == 0 {
		if err := d.ckpt.Clear(); err != nil {
			d.logger.LogAttrs(sctx, slog.LevelWarn, "removing the evidence checkpoint failed; the next start will report an unclean stop",
				slog.String("state_dir", r.StateDir), slog.Any("error", err))
		}
	}
	return runErr
}

// tickTasks are the maintenance pass, in order: close due coalescing
// windows, sweep limiter entries back at full burst, end the audit store's
// sealing epoch when due and log its chain's head, recheck the private
// directories (before the capacity probe, so a refusal shows in the same
// pass), probe the audit store's capacity (after the coalescer's writes),
// then refresh the health snapshot (last, so it reflects the pass).
func (d *Daemon) tickTasks() []tickTask {
	return []tickTask{
		{"coalesce", func(ctx context.Context, now time.Time) error {
			d.coalescer.Tick(ctx, now)
			return nil
		}},
		// After the tick's batch is durable: the windows still not written.
		{"evidence-checkpoint", func(ctx context.Context, now time.Time) error {
			err := d.ckpt.Tick(ctx, now)
			if err == nil {
				d.ckptFailing = ""
				return nil
			}
			failing := err.Error()
			if _, ok := errors.AsType[*coalesce.NotRegularError](err); ok {
				failing = "not regular" // either file: the ticks take turns
			}
			if failing == d.ckptFailing {
				// The last tick's failure again (a FIFO left at a file's
				// name): counted, in registrar_coalesce_checkpoint_failures_total,
				// and logged once, not every second.
				return nil
			}
			d.ckptFailing = failing
			return fmt.Errorf("daemon: evidence checkpoint (registrar.state_dir): %w", err)
		}},
		{"limiter-sweep", func(context.Context, time.Time) error {
			d.limiter.Sweep()
			return nil
		}},
		// After the tick's counted records: the head logged covers them.
		{"audit-seal", d.sealTick},
		{"private-directories", d.guard.Tick},
		{"audit-capacity", d.probeCapacity},
		{"health", func(context.Context, time.Time) error { return d.health.Refresh() }},
		{"registrations-count", d.recountTick},
		{"openbao-token", func(ctx context.Context, now time.Time) error {
			if t, ok := d.backend.(tokenChecker); ok {
				return t.CheckToken(ctx, now, false)
			}
			return nil
		}},
		{"openbao-reachability", d.probeBackend},
	}
}

// tokenChecker is the openbao backend's token work on the tick: re-read a
// changed token file, look the token up, renew it before it lapses.
type tokenChecker interface {
	CheckToken(ctx context.Context, now time.Time, force bool) error
}

// Run opens a daemon from cfg and runs it until ctx is done.
func Run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	return RunWithOptions(ctx, cfg, logger, Options{})
}

// RunWithOptions is Run with Options (NewWithOptions).
func RunWithOptions(ctx context.Context, cfg config.Config, logger *slog.Logger, opts Options) error {
	d, err := NewWithOptions(cfg, logger, opts)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// probeCapacity is the tick's capacity probe. A change of state is logged
// (back to ok at INFO, low at WARN, critical and unwritable at ERROR) with
// the figures an operator needs to act, at most once a minute per target
// state, so free space hovering at a threshold does not flood the log.
func (d *Daemon) probeCapacity(ctx context.Context, _ time.Time) error {
	prev := d.capacity.Last().State
	c, err := d.capacity.Probe()
	if c.State != prev {
		level := slog.LevelError
		switch c.State {
		case audit.CapacityOK:
			level = slog.LevelInfo
		case audit.CapacityLow:
			level = slog.LevelWarn
		}
		d.capLog.Log(ctx, "capacity "+c.State.String(), level, "audit store capacity state changed",
			slog.String("from", prev.String()), slog.String("to", c.State.String()),
			slog.Uint64("free_bytes", c.FreeBytes), slog.Uint64("needed_bytes", c.NeededBytes),
			slog.Uint64("store_bytes", c.StoreBytes), slog.Uint64("budget_bytes", c.BudgetBytes),
			slog.Uint64("reserve_bytes", c.ReserveBytes), slog.Uint64("max_file_bytes", c.MaxFileBytes),
			slog.Uint64("append_failures", c.AppendFailures),
			slog.String("audit_record_dir", d.cfg.Registrar.AuditRecordDir))
	}
	return err
}

// AbortExitStatus is the daemon's exit status after SIGABRT: 128 + 6, as a
// shell reports a process SIGABRT ended. It is not 2 (a configuration
// error, which the unit does not restart) nor 1, so the journal and
// systemctl status say which it was, and Restart=on-failure restarts it.
const AbortExitStatus = 134

// abort answers SIGABRT: an ERROR line, every goroutine's stack to stderr
// (the journal, under systemd: what the stalled tick was waiting for),
// then exit AbortExitStatus. It does not shut down gracefully: whatever
// stalled the tick may stall a shutdown too, and the crash checkpoint
// keeps the counted evidence as it does through SIGKILL.
func (d *Daemon) abort(ctx context.Context) {
	d.logger.LogAttrs(ctx, slog.LevelError, "SIGABRT (systemd's watchdog saw no maintenance tick, or an operator sent it): writing every goroutine's stack to stderr and exiting",
		slog.Int("exit_status", AbortExitStatus))
	_ = pprof.Lookup("goroutine").WriteTo(d.seams.stacks, 2)
	d.seams.exit(AbortExitStatus)
}
