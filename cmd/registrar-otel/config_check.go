package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/registrar-otel/registrar-otel/config"
)

// Exit statuses of `config check`.
const (
	configCheckOK      = 0
	configCheckInvalid = 2 // configuration errors, and usage errors
)

// runConfigCheck implements `registrar-otel config check [--config FILE]`
// (args are what follows "config check"): it loads FILE, or the embedded
// defaults without --config, with the REGISTRAR_OTEL_ environment
// overrides, prints a summary of the effective configuration to stdout and
// returns 0; or prints every error on its own line to stderr and returns 2.
// Warnings (unknown keys) go to stderr and do not fail the check.
func runConfigCheck(args []string, stdout, stderr io.Writer) int {
	return configCheck(args, os.Environ(), stdout, stderr)
}

// configCheck is runConfigCheck with the environment injected.
func configCheck(args, environ []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("registrar-otel config check", flag.ContinueOnError)
	flags.SetOutput(stderr)
	path := flags.String("config", "", "TOML configuration `file` to check (default: the embedded defaults)")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "usage: registrar-otel config check [--config FILE]\n\n"+
			"Loads the configuration (FILE, or the embedded defaults) with the %s* environment\n"+
			"overrides, prints the effective settings and exits 0, or prints every error and exits 2.\n\n", config.EnvPrefix)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return configCheckOK
		}
		return configCheckInvalid // flag has printed the error and the usage
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "config check: unexpected argument %q\n", flags.Arg(0))
		flags.Usage()
		return configCheckInvalid
	}
	explicitEmpty := false
	flags.Visit(func(f *flag.Flag) { explicitEmpty = explicitEmpty || (f.Name == "config" && *path == "") })
	if explicitEmpty {
		fmt.Fprintln(stderr, "config check: --config needs a file name; omit it to check the embedded defaults")
		return configCheckInvalid
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // the check's output is read by a person, once
			}
			return a
		},
	}))
	cfg, err := config.Load(*path, environ, logger)
	if err != nil {
		errs := splitJoinedErrors(err)
		for _, e := range errs {
			fmt.Fprintln(stderr, e)
		}
		source := *path
		if source == "" {
			source = config.SourceDefaults
		}
		noun := "errors"
		if len(errs) == 1 {
			noun = "error"
		}
		fmt.Fprintf(stderr, "config check: %d %s in %s\n", len(errs), noun, source)
		return configCheckInvalid
	}
	// The files the openbao backend will read: the token's mode and
	// content, and the CA bundle. Nothing to do for the embedded backend.
	src, err := cfg.CheckFiles(environ)
	if err != nil {
		errs := splitJoinedErrors(err)
		for _, e := range errs {
			fmt.Fprintln(stderr, e)
		}
		fmt.Fprintf(stderr, "config check: %d openbao file %s in %s\n", len(errs), map[bool]string{true: "error", false: "errors"}[len(errs) == 1], cfg.Source)
		return configCheckInvalid
	}
	printConfigSummary(stdout, &cfg)
	if cfg.Registrar.Backend == config.BackendOpenBao {
		printOpenBaoSummary(stdout, &cfg, src)
	}
	return configCheckOK
}

// printOpenBaoSummary adds the openbao backend's settings: where the token
// comes from (never the token), the mounts and the secret id limits.
func printOpenBaoSummary(w io.Writer, cfg *config.Config, src config.TokenSource) {
	o := &cfg.OpenBao
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	fmt.Fprintln(tw, "openbao (registrar.backend = \"openbao\"):")
	row("address", o.Address)
	if o.CAFile == "" {
		row("ca_file", "(none: the system roots)")
	} else {
		row("ca_file", o.CAFile+" (PEM OK)")
	}
	row("token", "from "+src.String()+" (mode and content OK)")
	row("bindings", fmt.Sprintf("%s/data/%s/bindings/<registration_id> (KV v2)", o.KVMount, o.KVPrefix))
	row("roles", fmt.Sprintf("auth/%s/role/bootroot-service-<registration_id>", o.AppRoleMount))
	row("request timeout", fmt.Sprintf("%d ms", o.RequestTimeoutMS))
	row("secret ids", fmt.Sprintf("ttl %d s, %d use(s)", o.SecretIDTTLSeconds, o.SecretIDNumUses))
	tw.Flush()
}

// splitJoinedErrors flattens errors.Join trees, in order.
func splitJoinedErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitJoinedErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// printConfigSummary writes the effective settings an operator most often
// needs to confirm: where the daemon listens and writes, the two limiter
// buckets, the components, and telemetry.
func printConfigSummary(w io.Writer, cfg *config.Config) {
	r, t := &cfg.Registrar, &cfg.Telemetry
	fmt.Fprintf(w, "configuration OK: %s\n", cfg.Source)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	orNone := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}

	fmt.Fprintln(tw, "registrar:")
	row("socket_path", r.SocketPath)
	if r.TLSListen == "" {
		row("tls_listen", "(none: no TCP listener)")
	} else {
		row("tls_listen", fmt.Sprintf("%s (cert %s, key %s, client CA %s)", r.TLSListen, r.TLSCertFile, r.TLSKeyFile, r.TLSClientCAFile))
	}
	row("state_dir", r.StateDir)
	row("audit_record_dir", fmt.Sprintf("%s (rotate at %d bytes, keep %d files)", r.AuditRecordDir, r.AuditMaxFileBytes, r.AuditMaxRetainedFiles))
	row("admission bucket", fmt.Sprintf("burst %d, one token every %d ms", r.RateLimitAdmissionBurst, r.RateLimitAdmissionRefillIntervalMS))
	row("predecision_refusal bucket", fmt.Sprintf("burst %d, one token every %d ms", r.RateLimitPredecisionRefusalBurst, r.RateLimitPredecisionRefusalRefillIntervalMS))
	row("coalesce window", fmt.Sprintf("%d s", r.RateLimitCoalesceWindowSeconds))
	row("maintenance interval", fmt.Sprintf("%d ms", r.MaintenanceIntervalMS))
	row("max wrap_ttl", fmt.Sprintf("%d s", r.MaxWrapTTLSeconds))
	if unknown := cfg.UnknownKeys(); len(unknown) > 0 {
		row("unknown keys kept", strings.Join(unknown, ", "))
	}

	if len(r.Components) == 0 {
		fmt.Fprintln(tw, "components: (none: every mint is refused with component_not_configured)")
	} else {
		fmt.Fprintln(tw, "components:")
		names := make([]string, 0, len(r.Components))
		for name := range r.Components {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			row(name, r.Components[name].String())
		}
	}

	fmt.Fprintln(tw, "telemetry:")
	row("metrics_listen", orNone(t.MetricsListen, "(disabled)"))
	row("otlp_endpoint", orNone(t.OTLPEndpoint, "(none: no OTLP export)"))
	row("service_name", t.ServiceName)
	row("trace_sample_ratio", strconv.FormatFloat(t.TraceSampleRatio, 'g', -1, 64))
	tw.Flush()
}
