package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
)

var sizingUsage = usageSpec{
	name:     "sizing",
	synopsis: "--wave-hosts N --modules-per-host M [--config FILE] [--policy NAME] [--json]",
	what: `Runs the operator's largest bring-up wave through the admission sizing formula
with the configured bucket: is rate_limit_admission_burst at least
wave_hosts × modules_per_host, and if not, the extra time the wave takes,
(mints − burst) × rate_limit_admission_refill_interval_ms / 1000 seconds.

The bucket is the [registrar] table's (the caller policy "default"), or with
--policy NAME the caller policy [registrar.callers.NAME]'s: its enforced
sizes, a key it does not set being the [registrar] table's. Size the wave of
the caller that brings it up.

With registrar.instances = N (several registrars sharing each policy's
budget), each registrar holds burst / N tokens and one per interval × N,
and a balancer that spreads the wave evenly gives the busiest ⌈mints / N⌉
of it: the wave is covered when that part fits the share, the burst
needed is the part × N, and the extra time is (part − share) × interval ×
N / 1000 seconds.

Exit status: 0 (whatever the verdict), 2 for a usage or configuration error
(an unknown policy among them).`,
	examples: []string{
		"registrar-otel sizing --wave-hosts 64 --modules-per-host 8",
		"registrar-otel sizing --config /etc/registrar-otel/registrar.toml --wave-hosts 200 --modules-per-host 12 --json",
		"registrar-otel sizing --config /etc/registrar-otel/registrar.toml --policy control-plane --wave-hosts 200 --modules-per-host 8",
	},
}

// sizingJSON is the sizing --json schema: every number a JSON number.
type sizingJSON struct {
	Source string `json:"source"`
	// Policy is the caller policy whose bucket was sized: "default" for
	// the [registrar] table's.
	Policy           string      `json:"policy"`
	WaveHosts        uint64      `json:"wave_hosts"`
	ModulesPerHost   uint64      `json:"modules_per_host"`
	Mints            uint64      `json:"mints"`
	Burst            uint32      `json:"rate_limit_admission_burst"`
	RefillIntervalMS uint32      `json:"rate_limit_admission_refill_interval_ms"`
	Covered          bool        `json:"covered"`
	BurstNeeded      uint64      `json:"burst_needed"`
	ExtraSeconds     json.Number `json:"extra_seconds"` // exact decimal: 544, 0.5, 12.25
	ExtraMillis      uint64      `json:"extra_millis"`
	// Instances is registrar.instances; the per_instance members are one
	// registrar's share of the bucket and the busiest one's part of an
	// evenly spread wave (equal to the whole for one registrar).
	Instances             uint32 `json:"instances"`
	PerInstanceBurst      uint32 `json:"per_instance_burst"`
	PerInstanceIntervalMS uint64 `json:"per_instance_refill_interval_ms"`
	PerInstanceMints      uint64 `json:"per_instance_mints"`
}

// writeJSON writes v as indented JSON with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runSizing implements "registrar-otel sizing --wave-hosts N
// --modules-per-host M [--config F] [--policy NAME] [--json]": the
// admission sizing formula run with the operator's own numbers and the
// configured bucket of the default or of one caller policy.
func runSizing(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sizing")
	hosts := fs.Uint64("wave-hosts", 0, "the largest number of hosts brought up at once")
	modules := fs.Uint64("modules-per-host", 0, "the largest number of components (mints) on one host")
	cfgPath := fs.String("config", "", "the daemon's configuration `file` (default: the embedded defaults, as make run)")
	policy := fs.String("policy", "", "size the bucket of the caller policy `NAME` ([registrar.callers.NAME]; default: the [registrar] table's, policy default)")
	asJSON := fs.Bool("json", false, "print one JSON object (schema: docs, operations, --json schemas)")
	if code, ok := parseFlags(fs, sizingUsage, args, stdout, stderr); !ok {
		return code
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{{"wave-hosts", *hosts}, {"modules-per-host", *modules}} {
		if f.v == 0 {
			return usageError(stderr, "sizing", "--%s is required and must be greater than 0; for example: --wave-hosts 64 --modules-per-host 8", f.name)
		}
	}
	if flagSet(fs, "policy") && *policy == "" {
		return usageError(stderr, "sizing", "--policy needs a policy name; omit it to size the [registrar] table's bucket (policy %s)", callers.DefaultName)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := loadConfig(*cfgPath, os.Environ(), logger)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	b, err := sizedBucket(cfg, *policy)
	if err != nil {
		return usageError(stderr, "sizing", "%v", err)
	}
	s, err := limiter.SizeShared(*hosts, *modules, b.sizes.AdmissionBurst, b.sizes.AdmissionRefillIntervalMS, cfg.Registrar.Instances)
	if err != nil {
		fmt.Fprintf(stderr, "registrar-otel sizing: %v\n", err)
		return exitUsage
	}
	if *asJSON {
		writeJSON(stdout, sizingJSON{
			Source: cfg.Source, Policy: b.name, WaveHosts: s.WaveHosts, ModulesPerHost: s.ModulesPerHost, Mints: s.Mints,
			Burst: s.Burst, RefillIntervalMS: s.RefillIntervalMS, Covered: s.Covered, BurstNeeded: s.BurstNeeded,
			ExtraSeconds: json.Number(millisAsSeconds(s.ExtraMillis)), ExtraMillis: s.ExtraMillis,
			Instances: s.Instances, PerInstanceBurst: s.PerInstanceBurst, PerInstanceIntervalMS: s.PerInstanceIntervalMS, PerInstanceMints: s.PerInstanceMints,
		})
		return exitOK
	}
	fmt.Fprintf(stdout, "wave:             %d hosts × %d modules per host = %d mints\n", s.WaveHosts, s.ModulesPerHost, s.Mints)
	fmt.Fprintf(stdout, "admission bucket: burst %d, one token per %d ms (%s)\n", s.Burst, s.RefillIntervalMS, b.from(cfg.Source))
	shared := s.Instances > 1
	if shared {
		fmt.Fprintf(stdout, "registrars:       %d share it (registrar.instances): each burst %d = %d / %d, one token per %d ms, and up to %d mints of the wave spread evenly\n",
			s.Instances, s.PerInstanceBurst, s.Burst, s.Instances, s.PerInstanceIntervalMS, s.PerInstanceMints)
	}
	switch {
	case s.Covered:
		fmt.Fprintf(stdout, "covered:          yes, the whole wave is admitted at once\n")
	case shared:
		fmt.Fprintf(stdout, "covered:          no, %d mints wait for tokens on the busiest registrar\n", s.PerInstanceMints-uint64(s.PerInstanceBurst))
	default:
		fmt.Fprintf(stdout, "covered:          no, %d mints wait for tokens\n", s.Mints-uint64(s.Burst))
	}
	if shared {
		fmt.Fprintf(stdout, "burst needed:     %d = %d per registrar × %d (%s)\n", s.BurstNeeded, s.PerInstanceMints, s.Instances, b.key)
	} else {
		fmt.Fprintf(stdout, "burst needed:     %d (%s)\n", s.BurstNeeded, b.key)
	}
	switch {
	case s.Covered:
		fmt.Fprintln(stdout, "extra time:       0 s")
	case shared:
		fmt.Fprintf(stdout, "extra time:       %s s = (%d − %d) × %d ms / 1000 on the busiest registrar\n",
			millisAsSeconds(s.ExtraMillis), s.PerInstanceMints, s.PerInstanceBurst, s.PerInstanceIntervalMS)
	default:
		fmt.Fprintf(stdout, "extra time:       %s s = (%d − %d) × %d ms / 1000\n",
			millisAsSeconds(s.ExtraMillis), s.Mints, s.Burst, s.RefillIntervalMS)
	}
	if !s.Covered {
		if s.BurstNeeded > uint64(^uint32(0)) {
			fmt.Fprintln(stdout, "advice:           the wave exceeds the largest configurable burst; split it into smaller waves")
		} else {
			fmt.Fprintf(stdout, "advice:           set %s = %d before the bring-up, or accept the extra time\n", b.advice, s.BurstNeeded)
		}
	}
	return exitOK
}

// bucket is the admission bucket sizing runs the wave through: a policy's
// enforced sizes, with the key an operator would change.
type bucket struct {
	name  string // the policy's name, "default" for [registrar]'s
	named bool   // --policy was given
	sizes config.CallerSizes
	// key is the burst's dotted key; advice the way the advice names it
	// (the key inside [registrar] for the default, as the output always
	// has).
	key, advice string
}

// from says where the bucket's sizes come from: the source, and the policy
// when --policy named one.
func (b bucket) from(source string) string {
	if !b.named {
		return source
	}
	return "policy " + b.name + ", " + source
}

// sizedBucket is the bucket of policy in cfg: "" is the default, as is
// "default" named; another name must be a configured policy.
func sizedBucket(cfg config.Config, policy string) (bucket, error) {
	const burstKey = "rate_limit_admission_burst"
	r := cfg.Registrar
	if policy == "" || policy == callers.DefaultName {
		return bucket{name: callers.DefaultName, named: policy != "", sizes: r.DefaultSizes(),
			key: "registrar." + burstKey, advice: burstKey}, nil
	}
	p, ok := r.Policy(policy)
	if !ok {
		names := make([]string, len(r.Callers))
		for i, c := range r.Callers {
			names[i] = c.Name
		}
		have := "it has none but " + callers.DefaultName + " (the [registrar] table's)"
		if len(names) > 0 {
			have = "it has " + strings.Join(names, ", ") + " and " + callers.DefaultName + " (the [registrar] table's)"
		}
		return bucket{}, fmt.Errorf("--policy: %s has no caller policy %q; %s", cfg.Source, policy, have)
	}
	key := "registrar.callers." + p.Name + "." + burstKey
	return bucket{name: p.Name, named: true, sizes: p.EnforcedSizes(), key: key, advice: key}, nil
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
