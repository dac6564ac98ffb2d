package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/daemon"
	"github.com/registrar-otel/registrar-otel/internal/journalprio"
)

var serveUsage = usageSpec{
	name:     "serve",
	synopsis: "[--config FILE] [--log-format text|json] [--log-level LEVEL]",
	what: `Runs the registrar daemon: the unix socket (and the TCP+mTLS listener when
registrar.tls_listen is set), the metrics listener, the audit record store and
the embedded registry. Without --config it runs on the embedded defaults, with
every path under ./var/ (what "make run" does). SIGTERM or SIGINT stops it
gracefully: in-flight calls finish and open coalescing windows are flushed.

Exit status: 0 after a graceful stop; 1 for a runtime failure a restart may
fix (a listener failing while serving, a full disk or an I/O error at start);
2 for a usage error, an invalid configuration, or an environment error a
restart cannot fix (an unsafe or missing path, a non-socket file at the
socket path, a port in use, a bad certificate, an unreadable token file, an
unknown registrar.socket_group). Every error is printed; "config check" shows
the configuration's without starting.

Under systemd (Type=notify) it sends READY=1 once every listener serves,
STATUS= lines, STOPPING=1 when shutdown begins, and WATCHDOG=1 from the
maintenance tick when WatchdogSec= is set; it takes the unix socket from a
socket unit (LISTEN_FDS) instead of binding it.

SIGHUP (systemctl reload) or "registrar-otel reload" re-reads the
configuration; the keys documented live apply without a restart. The log
level is registrar.log_level (default info), live like them. --log-level,
when given, overrides that key at start and on every reload, for the life
of the process (a reload whose file sets another level says so in the log);
without it, the key rules.`,
	examples: []string{
		"registrar-otel serve",
		"registrar-otel serve --config /etc/registrar-otel/registrar.toml --log-format json",
		"registrar-otel serve --config /etc/registrar-otel/registrar.toml --log-level debug",
	},
}

// runServe implements "registrar-otel serve [--config F]": the daemon,
// until SIGTERM or SIGINT. Exit status: 0 after a graceful shutdown, 1 for
// a runtime failure, 2 for usage, configuration and environment errors a
// restart cannot fix (serveExit).
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve")
	cfgPath := fs.String("config", "", "configuration file (default: the embedded defaults, state under ./var/)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "", "log level: debug, info, warn or error; given, it overrides registrar.log_level\nat start and on every reload (default: the key's value, itself info by default)")
	if code, ok := parseFlags(fs, serveUsage, args, stdout, stderr); !ok {
		return code
	}
	// Given, the flag fixes the level (daemon.Options.LogLevelFixed);
	// until the configuration is read, info.
	level, levelFixed := new(slog.LevelVar), false
	fs.Visit(func(f *flag.Flag) { levelFixed = levelFixed || f.Name == "log-level" })
	if levelFixed {
		l, err := config.ParseLogLevel(*logLevel)
		if err != nil {
			return usageError(stderr, "serve", "--log-level %q: want debug, info, warn or error", *logLevel)
		}
		level.Set(l)
	}
	// First, before the token is read: not dumpable, no core file.
	if err := hardenProcess(); err != nil {
		fmt.Fprintf(stderr, "registrar-otel serve: hardening the process: %v\n", err)
		return exitUsage
	}
	logger, err := newLogger(stderr, *logFormat, level)
	if err != nil {
		return usageError(stderr, "serve", "%v", err)
	}
	cfg, err := config.Load(*cfgPath, os.Environ(), logger)
	if err != nil {
		printErrors(errorLines(stderr), err)
		daemon.CloseActivated()
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.RunWithOptions(ctx, cfg, logger, daemon.Options{LogLevel: level, LogLevelFixed: levelFixed}); err != nil {
		return serveExit(logger, err)
	}
	return exitOK
}

// serveExit logs why serve stopped and returns its exit status: 2 for a
// configuration or environment error a restart cannot fix (a
// *daemon.SetupError; the unit's RestartPreventExitStatus=2 then keeps
// systemd from restarting in a loop), 1 for a runtime failure, which a
// restart may fix.
func serveExit(logger *slog.Logger, err error) int {
	if daemon.IsSetupError(err) {
		daemon.CloseActivated() // when it failed before taking systemd's sockets
		logger.Error("registrar-otel cannot start: fix the configuration or the host, a restart alone will fail the same way", "error", err)
		return exitUsage
	}
	logger.Error("registrar-otel stopped", "error", err)
	return exitFailure
}

// errorLines is w for serve's error text before its logger can say it (a
// configuration that does not load): under systemd each line starts with
// the journal's error priority, "<3>", as the logger's ERROR lines do, so
// journalctl -p err and systemctl status show it.
func errorLines(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && journalprio.ToJournal(os.Getenv("JOURNAL_STREAM"), f) {
		return journalprio.Prefixed(w, 3)
	}
	return w
}

// newLogger is serve's logger, whose handler's level is level: the daemon
// sets it from registrar.log_level at start and on each reload, in place.
// When w is the stream systemd connected to the journal (JOURNAL_STREAM),
// each line starts with its level's syslog priority ("<3>" for ERROR),
// which journald takes as the entry's priority: `journalctl -p err` then
// shows the ERROR lines and only those.
func newLogger(w io.Writer, format string, level *slog.LevelVar) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	var inner func(io.Writer) slog.Handler
	switch format {
	case "text":
		inner = func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, opts) }
	case "json":
		inner = func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, opts) }
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	if f, ok := w.(*os.File); ok && journalprio.ToJournal(os.Getenv("JOURNAL_STREAM"), f) {
		return slog.New(journalprio.Handler(w, inner)), nil
	}
	return slog.New(inner(w)), nil
}
