package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// runSizing implements "registrar-otel sizing --wave-hosts N
// --modules-per-host M [--config F] [--json]": the admission sizing formula
// run with the operator's own numbers and configured bucket.
func runSizing(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sizing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hosts := fs.Uint64("wave-hosts", 0, "the largest number of hosts brought up at once")
	modules := fs.Uint64("modules-per-host", 0, "the largest number of components (mints) on one host")
	cfgPath := fs.String("config", "", "configuration file (default: the embedded defaults)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: registrar-otel sizing --wave-hosts N --modules-per-host M [--config F] [--json]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Checks rate_limit_admission_burst ≥ wave_hosts × modules_per_host, and the extra")
		fmt.Fprintln(stderr, "time a larger wave takes: (mints − burst) × rate_limit_admission_refill_interval_ms / 1000 s.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sizing: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *hosts == 0 || *modules == 0 {
		fmt.Fprintln(stderr, "sizing: --wave-hosts and --modules-per-host are required and must be greater than 0")
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := config.Load(*cfgPath, os.Environ(), logger)
	if err != nil {
		printErrors(stderr, err)
		return 2
	}
	r := cfg.Registrar
	s, err := limiter.Size(*hosts, *modules, r.RateLimitAdmissionBurst, r.RateLimitAdmissionRefillIntervalMS)
	if err != nil {
		fmt.Fprintf(stderr, "sizing: %v\n", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Source           string `json:"source"`
			WaveHosts        uint64 `json:"wave_hosts"`
			ModulesPerHost   uint64 `json:"modules_per_host"`
			Mints            uint64 `json:"mints"`
			Burst            uint32 `json:"rate_limit_admission_burst"`
			RefillIntervalMS uint32 `json:"rate_limit_admission_refill_interval_ms"`
			Covered          bool   `json:"covered"`
			BurstNeeded      uint64 `json:"burst_needed"`
			ExtraSeconds     string `json:"extra_seconds"`
		}{cfg.Source, s.WaveHosts, s.ModulesPerHost, s.Mints, s.Burst, s.RefillIntervalMS, s.Covered, s.BurstNeeded, millisAsSeconds(s.ExtraMillis)})
		return 0
	}
	fmt.Fprintf(stdout, "wave:             %d hosts × %d modules per host = %d mints\n", s.WaveHosts, s.ModulesPerHost, s.Mints)
	fmt.Fprintf(stdout, "admission bucket: burst %d, one token per %d ms (%s)\n", s.Burst, s.RefillIntervalMS, cfg.Source)
	if s.Covered {
		fmt.Fprintf(stdout, "covered:          yes, the whole wave is admitted at once\n")
	} else {
		fmt.Fprintf(stdout, "covered:          no, %d mints wait for tokens\n", s.Mints-uint64(s.Burst))
	}
	fmt.Fprintf(stdout, "burst needed:     %d (registrar.rate_limit_admission_burst)\n", s.BurstNeeded)
	if s.Covered {
		fmt.Fprintln(stdout, "extra time:       0 s")
	} else {
		fmt.Fprintf(stdout, "extra time:       %s s = (%d − %d) × %d ms / 1000\n",
			millisAsSeconds(s.ExtraMillis), s.Mints, s.Burst, s.RefillIntervalMS)
		if s.BurstNeeded > uint64(^uint32(0)) {
			fmt.Fprintln(stdout, "advice:           the wave exceeds the largest configurable burst; split it into smaller waves")
		} else {
			fmt.Fprintf(stdout, "advice:           set rate_limit_admission_burst = %d before the bring-up, or accept the extra time\n", s.BurstNeeded)
		}
	}
	return 0
}

// millisAsSeconds renders a millisecond count as seconds without floating
// point: "544", "0.5", "12.25".
func millisAsSeconds(ms uint64) string {
	s := fmt.Sprintf("%d", ms/1000)
	if frac := ms % 1000; frac != 0 {
		f := fmt.Sprintf("%03d", frac)
		for f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		s += "." + f
	}
	return s
}

// printErrors prints each error of a joined error on its own line.
func printErrors(w io.Writer, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			printErrors(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}
