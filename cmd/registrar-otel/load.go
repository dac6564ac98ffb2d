package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

// loadFlags are the flags both load subcommands share.
type loadFlags struct {
	socket, config, otlp, auditDir string
	concurrency                    int
	component                      string
	settle                         time.Duration
}

func (l *loadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.socket, "socket", "", "the daemon's unix socket (default: registrar.socket_path of --config, or of the embedded defaults)")
	fs.StringVar(&l.config, "config", "", "the daemon's configuration file (for the socket and the audit record directory)")
	fs.StringVar(&l.otlp, "otlp-endpoint", "", "export the run's spans over OTLP/HTTP to this base URL (e.g. http://127.0.0.1:4318); default: where the daemon of --config exports its traces")
	fs.StringVar(&l.auditDir, "audit-dir", "", "audit record directory to summarise afterwards (default: registrar.audit_record_dir of --config or the defaults; \"-\" skips it)")
	fs.IntVar(&l.concurrency, "concurrency", 16, "requests in flight")
	fs.StringVar(&l.component, "component", "review", "a many-per-host component configured on the daemon")
	fs.DurationVar(&l.settle, "settle", 1500*time.Millisecond, "wait this long after the run for the daemon's tick before reading its counters")
}

// runLoadWave implements "registrar-otel load wave".
func runLoadWave(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load wave", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf loadFlags
	lf.register(fs)
	hosts := fs.Int("hosts", 0, "hosts brought up at once")
	modules := fs.Int("modules-per-host", 0, "mints per host (instances 1..N of --component)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: registrar-otel load wave --hosts H --modules-per-host M [--concurrency C] [flags]")
		fmt.Fprintln(stderr, "\nMints a bring-up wave of H×M mints under one root span \"bringup.wave\", retrying throttled")
		fmt.Fprintln(stderr, "mints after their retry_after, and prints a summary.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 || *hosts < 1 || *modules < 1 {
		fmt.Fprintln(stderr, "load wave: --hosts and --modules-per-host are required and must be at least 1")
		return exitUsage
	}
	return runLoad(stdout, stderr, &lf, fmt.Sprintf("wave of %d hosts × %d modules", *hosts, *modules),
		func(ctx context.Context, c *wire.Client, tel *telemetry.Driver, progress func(loadgen.Progress)) (loadgen.Report, error) {
			return loadgen.Wave(ctx, c, loadgen.WaveOptions{
				Hosts: *hosts, ModulesPerHost: *modules, Concurrency: lf.concurrency,
				Component: lf.component, Tracer: tel.TracerProvider().Tracer("registrar-otel/load"),
				OnProgress: progress,
			})
		})
}

// runLoadFlood implements "registrar-otel load flood".
func runLoadFlood(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf loadFlags
	lf.register(fs)
	bucket := fs.String("bucket", "", "the bucket to flood: predecision_refusal or admission")
	requests := fs.Int("requests", 0, "requests to send (no retries)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: registrar-otel load flood --bucket predecision_refusal|admission --requests N [--concurrency C] [flags]")
		fmt.Fprintln(stderr, "\npredecision_refusal sends a service name that is not a DNS label (each caller still gets")
		fmt.Fprintln(stderr, "ServiceLabelInvalid); admission remints one registration (throttled past the burst).")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	b, err := limiter.ParseBucket(*bucket)
	if err != nil || fs.NArg() > 0 || *requests < 1 {
		fmt.Fprintln(stderr, "load flood: --bucket (predecision_refusal or admission) and --requests ≥ 1 are required")
		return exitUsage
	}
	return runLoad(stdout, stderr, &lf, fmt.Sprintf("flood of %d requests on %s", *requests, b),
		func(ctx context.Context, c *wire.Client, tel *telemetry.Driver, progress func(loadgen.Progress)) (loadgen.Report, error) {
			return loadgen.Flood(ctx, c, loadgen.FloodOptions{
				Bucket: b, Requests: *requests, Concurrency: lf.concurrency, Component: lf.component, OnProgress: progress,
				Tracer: tel.TracerProvider().Tracer("registrar-otel/load"),
			})
		})
}

type loadRun func(ctx context.Context, c *wire.Client, tel *telemetry.Driver, progress func(loadgen.Progress)) (loadgen.Report, error)

// runLoad sets up the client and tracing, runs, and prints the summary.
func runLoad(stdout, stderr io.Writer, lf *loadFlags, what string, run loadRun) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := config.Load(lf.config, os.Environ(), logger)
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
	defer func() {
		if err := tel.Close(); err != nil {
			fmt.Fprintf(stderr, "load: flushing traces: %v\n", err)
		}
	}()
	client := wire.NewUnixClient(socket, wire.WithTimeout(30*time.Second))
	if h, err := client.Health(context.Background()); err != nil || !h.OK() {
		fmt.Fprintf(stderr, "load: the daemon at %s does not answer: %v\n", socket, err)
		return exitTransport
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var progress func(loadgen.Progress)
	if isTerminal(stdout) {
		progress = func(p loadgen.Progress) {
			fmt.Fprintf(stdout, "\r%6.1fs  %d/%d done  admitted %d  throttled %d  refused %d  failed %d ",
				p.Elapsed.Seconds(), p.Done, p.Target, p.Admitted, p.Throttled, p.Refused, p.Failed)
		}
	}
	fmt.Fprintf(stdout, "%s against %s\n", what, socket)
	rep, err := run(ctx, client, tel, progress)
	if progress != nil {
		fmt.Fprintln(stdout)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return exitUsage
	}
	printReport(stdout, &rep)

	// What the daemon reports afterwards: its counters once its tick has
	// refreshed the snapshot, and the counted records written so far.
	if lf.settle > 0 {
		time.Sleep(lf.settle)
	}
	if h, err := client.Health(context.Background()); err == nil && h.OK() {
		l := h.Health.Limiter
		fmt.Fprintf(stdout, "daemon registrar_health.limiter: limited_predecision_refusal=%d limited_admission=%d\n",
			l.LimitedPredecisionRefusal, l.LimitedAdmission)
	} else {
		fmt.Fprintf(stdout, "daemon registrar_health: unavailable (%v)\n", err)
	}
	if auditDir != "-" {
		scan, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: auditDir})
		if err != nil {
			fmt.Fprintf(stdout, "counted records: cannot read %s: %v\n", auditDir, err)
		} else {
			fmt.Fprintf(stdout, "counted records in %s (windows still open are written at their deadline or at shutdown):\n", auditDir)
			for b := range limiter.NumBuckets {
				s := scan.Limited[b]
				fmt.Fprintf(stdout, "  %-20s records=%d count=%d\n", limiter.Bucket(b).String(), s.Records, s.Count)
			}
		}
	}
	if rep.Failed > 0 {
		return exitTransport
	}
	return exitOK
}

func printReport(w io.Writer, r *loadgen.Report) {
	fmt.Fprintf(w, "elapsed:     %.1f s\n", r.Elapsed.Seconds())
	fmt.Fprintf(w, "requests:    %d (%.0f/s)\n", r.Requests, r.Throughput())
	fmt.Fprintf(w, "admitted:    %d\n", r.Admitted)
	fmt.Fprintf(w, "throttled:   %d (RegistrarBusy answers; max retry_after %d s)\n", r.Throttled, r.MaxRetryAfter)
	fmt.Fprintf(w, "refused:     %d\n", r.Refused)
	if r.Failed > 0 {
		fmt.Fprintf(w, "failed:      %d (first: %v)\n", r.Failed, r.FirstError)
	}
	fmt.Fprintf(w, "latency:     p50 %v  p99 %v\n", r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
	if len(r.ByID) > 0 {
		ids := make([]string, 0, len(r.ByID))
		for id := range r.ByID {
			ids = append(ids, string(id))
		}
		sort.Strings(ids)
		fmt.Fprint(w, "by answer:  ")
		for _, id := range ids {
			fmt.Fprintf(w, " %s=%d", id, r.ByID[wire.ErrorID(id)])
		}
		fmt.Fprintln(w)
	}
	if r.TraceID != "" {
		fmt.Fprintf(w, "trace:       %s (%s)\n", r.TraceID, r.RootSpan)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
