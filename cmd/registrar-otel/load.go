package main

// The load commands, `load wave` and `load flood`: their usage and their
// own flags. The run they share is in load_run.go, its summary in
// load_summary.go.

import (
	"context"
	"fmt"
	"io"

	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

const loadExits = `Progress goes to stderr: a live line on a terminal, otherwise one plain line
every --progress-interval, so stdout (the summary, or --json) stays clean.
Ctrl-C (SIGINT) interrupts: no new call starts, calls in flight finish, and the
summary says "interrupted" with what completed; Ctrl-C again aborts at once.

Exit status: 0 the run completed, 2 usage or configuration error, 3 the daemon
is not running or some calls got no answer, 130 interrupted by SIGINT, 143
stopped by SIGTERM.`

var loadWaveUsage = usageSpec{
	name:     "load wave",
	synopsis: "--hosts H --modules-per-host M [--pace] [--concurrency C] [--config FILE | --socket PATH] [--json] [flags]",
	what: `Mints a bring-up wave of H×M mints (instances 1..M of --component on hosts
wave-h0001..) under one root span "bringup.wave", retrying throttled mints
after their retry_after as a control plane does, then prints a summary: the
answers, the latencies, the daemon's registrar_health counters and the counted
records in its audit store.

With --pace the wave reads each answer's RateLimit and RateLimit-Policy fields
(the caller's own admission bucket) and sends a mint only when they say a token
is there for it, waiting one refill (w/q seconds) when the bucket is empty: it
meets no RegistrarBusy, and the summary says how long it waited.

` + loadExits,
	examples: []string{
		"registrar-otel load wave --hosts 64 --modules-per-host 8",
		"registrar-otel load wave --hosts 200 --modules-per-host 8 --pace",
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
	pace := fs.Bool("pace", false, "pace the mints by the answers' RateLimit fields so that none is throttled")
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
				Hosts: *hosts, ModulesPerHost: *modules, Concurrency: lf.concurrency, Pace: *pace,
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
	buckets := []string{vocab.PredecisionRefusal.String(), vocab.Admission.String()}
	if *bucket == "" {
		return usageError(stderr, "load flood", "--bucket is required: predecision_refusal or admission; for example: --bucket admission --requests 2000")
	}
	b, err := vocab.ParseBucket(*bucket)
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
