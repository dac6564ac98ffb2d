package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/daemon"
)

var serveUsage = usageSpec{
	name:     "serve",
	synopsis: "[--config FILE] [--log-format text|json] [--log-level LEVEL]",
	what: `Runs the registrar daemon: the unix socket (and the TCP+mTLS listener when
registrar.tls_listen is set), the metrics listener, the audit record store and
the embedded registry. Without --config it runs on the embedded defaults, with
every path under ./var/ (what "make run" does). SIGTERM or SIGINT stops it
gracefully: in-flight calls finish and open coalescing windows are flushed.

Exit status: 0 after a graceful stop, 1 when the daemon fails, 2 for a usage
or configuration error (every error is printed; "config check" shows them
without starting).`,
	examples: []string{
		"registrar-otel serve",
		"registrar-otel serve --config /etc/registrar-otel/registrar.toml --log-format json",
	},
}

// runServe implements "registrar-otel serve [--config F]": the daemon,
// until SIGTERM or SIGINT. Exit status: 0 after a graceful shutdown, 1 when
// the daemon fails, 2 for usage or configuration errors.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve")
	cfgPath := fs.String("config", "", "configuration file (default: the embedded defaults, state under ./var/)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if code, ok := parseFlags(fs, serveUsage, args, stdout, stderr); !ok {
		return code
	}
	// First, before the token is read: not dumpable, no core file.
	if err := hardenProcess(); err != nil {
		fmt.Fprintf(stderr, "registrar-otel serve: hardening the process: %v\n", err)
		return exitUsage
	}
	logger, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return usageError(stderr, "serve", "%v", err)
	}
	cfg, err := config.Load(*cfgPath, os.Environ(), logger)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, cfg, logger); err != nil {
		logger.Error("registrar-otel stopped", "error", err)
		return exitFailure
	}
	return exitOK
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
