package main

// The flags both load commands share, and the progress display they
// choose.

import (
	"flag"
	"io"
	"time"
)

// loadFlags are the flags both load subcommands share.
type loadFlags struct {
	socket, config, otlp, auditDir string
	concurrency                    int
	component                      string
	settle                         time.Duration
	asJSON                         bool
	progress                       string
	progressEvery                  time.Duration
}

func (l *loadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.socket, "socket", "", "the daemon's unix socket `path` (default: registrar.socket_path of --config, or of the embedded defaults: "+defaultSocket()+")")
	fs.StringVar(&l.config, "config", "", "the daemon's configuration `file`, for the socket and the audit record directory (default: the embedded defaults, as make run)")
	fs.StringVar(&l.otlp, "otlp-endpoint", "", "export the run's spans over OTLP/HTTP to this base `URL` (e.g. http://127.0.0.1:4318); default: where the daemon of --config exports its traces")
	fs.StringVar(&l.auditDir, "audit-dir", "", "audit record `directory` to summarise afterwards (default: registrar.audit_record_dir of --config or the defaults; \"-\" skips it)")
	fs.IntVar(&l.concurrency, "concurrency", 16, "requests in flight")
	fs.StringVar(&l.component, "component", "review", "a many-per-host component configured on the daemon")
	fs.DurationVar(&l.settle, "settle", 1500*time.Millisecond, "wait this long after the run for the daemon's tick before reading its counters")
	fs.BoolVar(&l.asJSON, "json", false, "print the summary as one JSON object on stdout (schema: docs, operations, --json schemas)")
	fs.StringVar(&l.progress, "progress", "auto", "progress on stderr: auto (a live line on a terminal, else a plain line every --progress-interval), plain, or off")
	fs.DurationVar(&l.progressEvery, "progress-interval", 5*time.Second, "how often a plain progress line is printed")
}

// check validates the shared flags.
func (l *loadFlags) check(stderr io.Writer, name string) (int, bool) {
	switch {
	case l.concurrency < 1:
		return usageError(stderr, name, "--concurrency must be at least 1, got %d", l.concurrency), false
	case l.progress != "auto" && l.progress != "plain" && l.progress != "off":
		return usageError(stderr, name, "--progress: got %q, want auto, plain or off%s; for example: --progress plain", l.progress, didYouMean(l.progress, []string{"auto", "plain", "off"})), false
	case l.progressEvery <= 0:
		return usageError(stderr, name, "--progress-interval must be positive, got %s", l.progressEvery), false
	case l.settle < 0:
		return usageError(stderr, name, "--settle must not be negative, got %s", l.settle), false
	}
	return 0, true
}

func (l *loadFlags) mode(stderr io.Writer) progressMode {
	switch l.progress {
	case "off":
		return progressOff
	case "plain":
		return progressPlain
	}
	if isTerminal(stderr) {
		return progressLive
	}
	return progressPlain
}

// tick is the interval at which loadgen reports progress.
func (l *loadFlags) tick() time.Duration {
	if l.progress == "auto" || l.progress == "off" {
		// auto decides live or plain at run time; the printer throttles
		// plain lines to --progress-interval.
		return min(liveEvery, l.progressEvery)
	}
	return l.progressEvery
}
