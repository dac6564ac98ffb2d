package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
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

const loadExits = `Progress goes to stderr: a live line on a terminal, otherwise one plain line
every --progress-interval, so stdout (the summary, or --json) stays clean.
Ctrl-C (SIGINT) interrupts: no new call starts, calls in flight finish, and the
summary says "interrupted" with what completed; Ctrl-C again aborts at once.

Exit status: 0 the run completed, 2 usage or configuration error, 3 the daemon
is not running or some calls got no answer, 130 interrupted by SIGINT, 143
stopped by SIGTERM.`

var loadWaveUsage = usageSpec{
	name:     "load wave",
	synopsis: "--hosts H --modules-per-host M [--concurrency C] [--config FILE | --socket PATH] [--json] [flags]",
	what: `Mints a bring-up wave of H×M mints (instances 1..M of --component on hosts
wave-h0001..) under one root span "bringup.wave", retrying throttled mints
after their retry_after as a control plane does, then prints a summary: the
answers, the latencies, the daemon's registrar_health counters and the counted
records in its audit store.

` + loadExits,
	examples: []string{
		"registrar-otel load wave --hosts 64 --modules-per-host 8",
		"registrar-otel load wave --config /etc/registrar-otel/registrar.toml --hosts 100 --modules-per-host 8 --json 2>progress.log",
	},
}

var loadFloodUsage = usageSpec{
	name:     "load flood",
	synopsis: "--bucket predecision_refusal|admission --requests N [--concurrency C] [--config FILE | --socket PATH] [--json] [flags]",
	what: `Floods one limiter bucket of a running daemon, without retries:
predecision_refusal sends a service name that is not a DNS label (each caller
still gets ServiceLabelInvalid); admission remints one registration (throttled
past the burst). Then prints the same summary as load wave.

` + loadExits,
	examples: []string{
		"registrar-otel load flood --bucket admission --requests 2000",
		"registrar-otel load flood --bucket predecision_refusal --requests 500 --concurrency 4 --json",
	},
}

// runLoadWave implements "registrar-otel load wave".
func runLoadWave(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("load wave")
	var lf loadFlags
	lf.register(fs)
	hosts := fs.Int("hosts", 0, "hosts brought up at once")
	modules := fs.Int("modules-per-host", 0, "mints per host (instances 1..N of --component, N ≤ 999)")
	if code, ok := parseFlags(fs, loadWaveUsage, args, stdout, stderr); !ok {
		return code
	}
	switch {
	case !flagSet(fs, "hosts"):
		return usageError(stderr, "load wave", "--hosts is required: at least 1; for example: --hosts 24 --modules-per-host 10")
	case !flagSet(fs, "modules-per-host"):
		return usageError(stderr, "load wave", "--modules-per-host is required: 1 to 999; for example: --hosts 24 --modules-per-host 10")
	case *hosts < 1:
		return flagValueError(stderr, loadWaveUsage, "hosts", fmt.Sprint(*hosts), "at least 1", "--hosts 24")
	case *modules < 1 || *modules > 999:
		return flagValueError(stderr, loadWaveUsage, "modules-per-host", fmt.Sprint(*modules), "1 to 999", "--modules-per-host 10")
	}
	if code, ok := lf.check(stderr, "load wave"); !ok {
		return code
	}
	sum := loadSummary{Command: "wave", Wave: &waveJSON{Hosts: *hosts, ModulesPerHost: *modules}}
	return runLoad(stdout, stderr, &lf, &sum, fmt.Sprintf("wave of %d hosts × %d modules", *hosts, *modules),
		func(ctx context.Context, c *wire.Client, tel *telemetry.Driver, progress func(loadgen.Progress)) (loadgen.Report, error) {
			return loadgen.Wave(ctx, c, loadgen.WaveOptions{
				Hosts: *hosts, ModulesPerHost: *modules, Concurrency: lf.concurrency,
				Component: lf.component, Tracer: tel.TracerProvider().Tracer("registrar-otel/load"),
				OnProgress: progress, ProgressEvery: lf.tick(),
			})
		})
}

// runLoadFlood implements "registrar-otel load flood".
func runLoadFlood(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("load flood")
	var lf loadFlags
	lf.register(fs)
	bucket := fs.String("bucket", "", "the bucket to flood: predecision_refusal or admission")
	requests := fs.Int("requests", 0, "requests to send (no retries)")
	if code, ok := parseFlags(fs, loadFloodUsage, args, stdout, stderr); !ok {
		return code
	}
	buckets := []string{limiter.PredecisionRefusal.String(), limiter.Admission.String()}
	if *bucket == "" {
		return usageError(stderr, "load flood", "--bucket is required: predecision_refusal or admission; for example: --bucket admission --requests 2000")
	}
	b, err := limiter.ParseBucket(*bucket)
	if err != nil {
		return flagValueError(stderr, loadFloodUsage, "bucket", *bucket, "predecision_refusal or admission"+didYouMean(*bucket, buckets), "--bucket admission")
	}
	if *requests < 1 {
		if !flagSet(fs, "requests") {
			return usageError(stderr, "load flood", "--requests is required: at least 1; for example: --requests 2000")
		}
		return flagValueError(stderr, loadFloodUsage, "requests", fmt.Sprint(*requests), "at least 1", "--requests 2000")
	}
	if code, ok := lf.check(stderr, "load flood"); !ok {
		return code
	}
	sum := loadSummary{Command: "flood", Flood: &floodJSON{Bucket: b.String(), Requests: *requests}}
	return runLoad(stdout, stderr, &lf, &sum, fmt.Sprintf("flood of %d requests on %s", *requests, b),
		func(ctx context.Context, c *wire.Client, tel *telemetry.Driver, progress func(loadgen.Progress)) (loadgen.Report, error) {
			return loadgen.Flood(ctx, c, loadgen.FloodOptions{
				Bucket: b, Requests: *requests, Concurrency: lf.concurrency, Component: lf.component,
				OnProgress: progress, ProgressEvery: lf.tick(),
				Tracer: tel.TracerProvider().Tracer("registrar-otel/load"),
			})
		})
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

// liveEvery is how often the live terminal line is redrawn.
const liveEvery = 200 * time.Millisecond

// progressMode is how progress is shown, decided once per run.
type progressMode int

const (
	progressOff progressMode = iota
	progressPlain
	progressLive
)

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
	addr := daemonAddr{socket: socket, fromConfig: lf.config}
	client := wire.NewUnixClient(socket, wire.WithTimeout(30*time.Second))
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

// countedRecords reads the counted records of the audit store.
func countedRecords(dir string, lf *loadFlags) *countedJSON {
	c := &countedJSON{Dir: dir}
	scan, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		hint := "pass the daemon's --config, or --audit-dir DIR (\"-\" skips this)"
		if lf.config != "" || lf.auditDir != "" {
			hint = "is the daemon's registrar.audit_record_dir elsewhere? pass --audit-dir DIR (\"-\" skips this)"
		}
		c.Error = fmt.Sprintf("%s does not exist; %s", dir, hint)
		return c
	case err != nil:
		c.Error = fmt.Sprintf("cannot read %s: %v", dir, err)
		return c
	}
	c.PredecisionRefusal = scanLimJSON(scan.Limited[limiter.PredecisionRefusal])
	c.Admission = scanLimJSON(scan.Limited[limiter.Admission])
	return c
}

// loadSummary is the load wave / load flood --json schema.
type loadSummary struct {
	Command           string            `json:"command"` // "wave" or "flood"
	Socket            string            `json:"socket"`
	Wave              *waveJSON         `json:"wave,omitempty"`
	Flood             *floodJSON        `json:"flood,omitempty"`
	Interrupted       bool              `json:"interrupted"`
	Signal            string            `json:"signal"` // "SIGINT", "SIGTERM" or ""
	Target            uint64            `json:"target"`
	Completed         uint64            `json:"completed"`
	Admitted          uint64            `json:"admitted"`
	Throttled         uint64            `json:"throttled"`
	Refused           uint64            `json:"refused"`
	Failed            uint64            `json:"failed"`
	Abandoned         uint64            `json:"abandoned"`
	NotStarted        uint64            `json:"not_started"`
	Requests          uint64            `json:"requests"`
	ElapsedSeconds    float64           `json:"elapsed_seconds"`
	RequestsPerSecond float64           `json:"requests_per_second"`
	MaxRetryAfter     uint64            `json:"max_retry_after_seconds"`
	LatencyP50Seconds float64           `json:"latency_p50_seconds"`
	LatencyP99Seconds float64           `json:"latency_p99_seconds"`
	ByAnswer          map[string]uint64 `json:"by_answer"`
	FirstError        string            `json:"first_error"`
	TraceID           string            `json:"trace_id"`
	RootSpan          string            `json:"root_span"`    // the span trace_id is rooted at: bringup.wave or load.flood
	Daemon            *daemonJSON       `json:"daemon"`       // null when health could not be read
	DaemonError       string            `json:"daemon_error"` // why, then
	Counted           *countedJSON      `json:"counted_records"`
	// traceEndpoint is where the trace is exported, "" for nowhere.
	traceEndpoint string
}

type waveJSON struct {
	Hosts          int `json:"hosts"`
	ModulesPerHost int `json:"modules_per_host"`
}

type floodJSON struct {
	Bucket   string `json:"bucket"`
	Requests int    `json:"requests"`
}

type daemonJSON struct {
	LimitedPredecisionRefusal uint64 `json:"limited_predecision_refusal"`
	LimitedAdmission          uint64 `json:"limited_admission"`
}

type countedJSON struct {
	Dir                string      `json:"dir"`
	Error              string      `json:"error"`
	PredecisionRefusal scanLimJSON `json:"predecision_refusal"`
	Admission          scanLimJSON `json:"admission"`
}

func (s *loadSummary) fill(socket string, r *loadgen.Report) {
	s.Socket = socket
	s.Interrupted = r.Interrupted
	s.Target, s.Completed = r.Target, r.Done
	s.Admitted, s.Throttled, s.Refused, s.Failed, s.Abandoned = r.Admitted, r.Throttled, r.Refused, r.Failed, r.Abandoned
	s.NotStarted = r.NotStarted()
	s.Requests = r.Requests
	s.ElapsedSeconds = r.Elapsed.Seconds()
	s.RequestsPerSecond = r.Throughput()
	s.MaxRetryAfter = r.MaxRetryAfter
	s.LatencyP50Seconds, s.LatencyP99Seconds = r.P50.Seconds(), r.P99.Seconds()
	s.ByAnswer = map[string]uint64{}
	for id, n := range r.ByID {
		s.ByAnswer[string(id)] = n
	}
	if r.FirstError != nil {
		s.FirstError = r.FirstError.Error()
	}
	s.TraceID, s.RootSpan = r.TraceID, r.RootSpan
}

func printSummary(w io.Writer, s *loadSummary) {
	unit := "mints"
	if s.Command == "flood" {
		unit = "requests"
	}
	if s.Interrupted {
		fmt.Fprintf(w, "interrupted: by %s after %.1f s: %d of %d %s completed, %d abandoned while waiting to retry, %d not started\n",
			s.Signal, s.ElapsedSeconds, s.Completed, s.Target, unit, s.Abandoned, s.NotStarted)
	}
	fmt.Fprintf(w, "elapsed:     %.1f s\n", s.ElapsedSeconds)
	fmt.Fprintf(w, "requests:    %d (%.0f/s)\n", s.Requests, s.RequestsPerSecond)
	fmt.Fprintf(w, "admitted:    %d\n", s.Admitted)
	fmt.Fprintf(w, "throttled:   %d (RegistrarBusy answers; max retry_after %d s)\n", s.Throttled, s.MaxRetryAfter)
	fmt.Fprintf(w, "refused:     %d\n", s.Refused)
	if s.Failed > 0 {
		fmt.Fprintf(w, "failed:      %d (first: %s)\n", s.Failed, s.FirstError)
	}
	p50 := time.Duration(s.LatencyP50Seconds * float64(time.Second)).Round(time.Microsecond)
	p99 := time.Duration(s.LatencyP99Seconds * float64(time.Second)).Round(time.Microsecond)
	fmt.Fprintf(w, "latency:     p50 %v  p99 %v\n", p50, p99)
	if len(s.ByAnswer) > 0 {
		ids := make([]string, 0, len(s.ByAnswer))
		for id := range s.ByAnswer {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		fmt.Fprint(w, "by answer:  ")
		for _, id := range ids {
			fmt.Fprintf(w, " %s=%d", id, s.ByAnswer[id])
		}
		fmt.Fprintln(w)
	}
	if s.TraceID != "" {
		if s.traceEndpoint == "" {
			fmt.Fprintf(w, "trace:       %s (%s), NOT exported: no traces endpoint (set telemetry.otlp_endpoint or otlp_traces_endpoint in --config, OTEL_EXPORTER_OTLP_ENDPOINT, or --otlp-endpoint)\n", s.TraceID, s.RootSpan)
		} else {
			fmt.Fprintf(w, "trace:       %s (%s), exported to %s\n", s.TraceID, s.RootSpan, s.traceEndpoint)
		}
	}
	if d := s.Daemon; d != nil {
		fmt.Fprintf(w, "daemon registrar_health.limiter: limited_predecision_refusal=%d limited_admission=%d\n",
			d.LimitedPredecisionRefusal, d.LimitedAdmission)
	} else {
		fmt.Fprintf(w, "daemon registrar_health: unavailable (%s)\n", s.DaemonError)
	}
	if c := s.Counted; c != nil {
		if c.Error != "" {
			fmt.Fprintf(w, "counted records: none read: %s\n", c.Error)
		} else {
			fmt.Fprintf(w, "counted records in %s (windows still open are written at their deadline or at shutdown):\n", c.Dir)
			fmt.Fprintf(w, "  %-20s records=%d count=%d\n", limiter.PredecisionRefusal.String(), c.PredecisionRefusal.Records, c.PredecisionRefusal.Count)
			fmt.Fprintf(w, "  %-20s records=%d count=%d\n", limiter.Admission.String(), c.Admission.Records, c.Admission.Count)
		}
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
