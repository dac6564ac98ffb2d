package main

// One load run: the client and its tracing, the first signal's graceful
// interrupt, and what the daemon reports afterwards.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

// loadRun is one kind of run, a wave or a flood, given the client, the
// driver's telemetry and where to report progress.
type loadRun func(ctx context.Context, c *wire.Client, tel *telemetry.Driver, progress func(loadgen.Progress)) (loadgen.Report, error)

// runLoad sets up the client and tracing, runs, and prints the summary.
func runLoad(stdout, stderr io.Writer, lf *loadFlags, sum *loadSummary, what string, run loadRun) (code int) {
	name := "load " + sum.Command
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := loadConfig(lf.config, os.Environ(), logger)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	socket := lf.socket
	if socket == "" {
		socket = cfg.Registrar.SocketPath
	}
	auditDir := lf.auditDir
	if auditDir == "" {
		auditDir = cfg.Registrar.AuditRecordDir
	}
	// The driver's own tracer: every span sampled, exported where the
	// daemon of --config exports (or to --otlp-endpoint), flushed on return.
	tel, err := telemetry.NewDriver(context.Background(), cfg.Telemetry, lf.otlp, logger)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	sum.traceEndpoint = tel.TracesEndpoint()
	defer func() {
		// The run's trace is one of its results: an exporter that failed
		// fails the run (exit 1 unless it already failed otherwise).
		if err := tel.Close(); err != nil {
			trace := "its trace"
			if sum.TraceID != "" {
				trace = "its trace " + sum.TraceID
			}
			fmt.Fprintf(stderr, "registrar-otel %s: %s was NOT exported: %v\n", name, trace, err)
			if code == exitOK {
				code = exitFailure
			}
		}
	}()
	fromDefault := lf.socket == "" && lf.config == ""
	addr := daemonAddr{socket: socket, fromConfig: lf.config, fromDefault: fromDefault}
	client, err := unixClient(socket, lf.config, fromDefault, stderr, wire.WithTimeout(30*time.Second))
	if err != nil {
		fmt.Fprintf(stderr, "registrar-otel %s: ", name)
		printErrors(stderr, err)
		return exitUsage
	}
	if h, err := client.Health(context.Background()); err != nil {
		return transportError(stderr, name, addr, err)
	} else if !h.OK() {
		fmt.Fprintf(stderr, "registrar-otel %s: the daemon at %s answers health with HTTP %d %s\n", name, socket, h.StatusCode, h.ErrorID)
		return exitTransport
	}

	// The first SIGINT or SIGTERM interrupts the run gracefully; after it
	// the default handling is back, so a second one aborts at once.
	pp := newProgressPrinter(stderr, lf.mode(stderr), lf.progressEvery)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var got os.Signal
	runDone := make(chan struct{})
	sigSeen := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case got = <-sigs:
			signal.Stop(sigs)
			close(sigSeen)
			pp.note(fmt.Sprintf("interrupted (%s): finishing the calls in flight; press Ctrl-C again to abort", sigName(got)))
			cancel()
		case <-runDone:
		}
	}()
	defer signal.Stop(sigs)

	if !lf.asJSON {
		fmt.Fprintf(stdout, "%s against %s\n", what, socket)
	}
	rep, err := run(ctx, client, tel, pp.update)
	close(runDone)
	<-watcherDone // from here on, sigs is read only below
	pp.finish()
	interrupted := false
	select {
	case <-sigSeen:
		interrupted = true
	default:
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "registrar-otel %s: %v\n", name, err)
		return exitUsage
	}
	sum.fill(socket, &rep)
	if interrupted {
		sum.Interrupted, sum.Signal = true, sigName(got)
	}

	// What the daemon reports afterwards: its counters once its tick has
	// refreshed the snapshot, and the counted records written so far. An
	// interrupted run does not wait for the tick.
	if lf.settle > 0 && !interrupted {
		// A Ctrl-C now skips the wait; the run itself completed.
		t := time.NewTimer(lf.settle)
		select {
		case <-t.C:
		case <-sigs:
			signal.Stop(sigs)
		}
		t.Stop()
	}
	if h, err := client.Health(context.Background()); err == nil && h.OK() {
		l := h.Health.Limiter
		sum.Daemon = &daemonJSON{LimitedPredecisionRefusal: l.LimitedPredecisionRefusal, LimitedAdmission: l.LimitedAdmission}
	} else if err != nil {
		sum.DaemonError = explainTransport(addr, err)
	} else {
		sum.DaemonError = fmt.Sprintf("health answered HTTP %d", h.StatusCode)
	}
	if auditDir != "-" {
		sum.Counted = countedRecords(auditDir, lf)
	}
	if lf.asJSON {
		_ = writeJSON(stdout, sum)
	} else {
		printSummary(stdout, sum)
	}
	switch {
	case interrupted && got == syscall.SIGTERM:
		return exitTerminate
	case interrupted:
		return exitInterrupt
	case rep.Failed > 0:
		return exitTransport
	}
	return exitOK
}

func sigName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case nil:
		return ""
	}
	return s.String()
}
