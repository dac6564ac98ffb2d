package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/registrar-otel/registrar-otel/config"
)

// Exit statuses of `config check`.
const (
	configCheckOK      = exitOK
	configCheckInvalid = exitUsage // configuration errors, and usage errors
)

var configCheckUsage = usageSpec{
	name:     "config check",
	synopsis: "[--config FILE] [--user NAME] [--strict] [--json]",
	what: `Loads the configuration (FILE, or the embedded defaults) with the
REGISTRAR_OTEL_* environment overrides and checks what it refers to the way
serve would: the TLS certificate, key and client CA (they exist, are readable,
parse, and the key matches the certificate), the socket, state and audit
paths (serve creates a missing directory 0700 and refuses a symlink, a
non-directory or a group- or world-writable one), that
registrar.socket_group names a group this host has, and the [telemetry]
table with the OTEL_* variables, by the rules serve's start applies (an
http:// OTLP endpoint to another host while OTEL_EXPORTER_OTLP_HEADERS is
set is refused). It warns about a TLS private key its group or others may
read, about a listen address (registrar.tls_listen,
telemetry.metrics_listen) serve could not bind, saying when a running
daemon holds it, and about a listener that admits callers
(registrar.socket_group's members, registrar.tls_listen's certificate
holders) no caller policy can match: they would all be refused no_policy.

It judges the paths and files for the user serve will run as: their owner
(root or that user), the access serve needs, and the directories above
them. Run as root, that is the User= of the installed
registrar-otel.service (in /etc/systemd/system, /lib/systemd/system or
/usr/lib/systemd/system, the first found, with its drop-ins), whose
StateDirectory= and RuntimeDirectory= systemd gives to that user at each
start, or the user --user names; root when no unit is installed. Run as
another user, that user: it cannot see into another user's private
directories, so --user may name only itself. The report says whom it
judged for ("judged for: ...").

Unknown keys are warnings (they are kept, for keys a later version knows);
--strict makes them, and the three warnings above, errors. An unknown key one edit away from a known key is
an error in any mode: it is a likely misspelling, and the default applies
while it stays.

Prints the effective settings and exits 0, or prints every error and exits 2.`,
	examples: []string{
		"registrar-otel config check",
		"registrar-otel config check --config /etc/registrar-otel/registrar.toml --strict",
		"registrar-otel config check --config /etc/registrar-otel/registrar.toml --user registrar-otel",
		"registrar-otel config check --config registrar.toml --json | jq .errors",
	},
}

// runConfigCheck implements `registrar-otel config check`: see
// configCheckUsage.
func runConfigCheck(args []string, stdout, stderr io.Writer) int {
	return configCheck(args, os.Environ(), stdout, stderr)
}

// finding is one error or warning of the check, keyed when it concerns one
// key.
type finding struct {
	Key     string `json:"key"`
	Message string `json:"message"`
}

// unknownFinding is one unknown key.
type unknownFinding struct {
	Key        string `json:"key"`
	Kept       bool   `json:"kept"`
	DidYouMean string `json:"did_you_mean"`
}

// checkResult is everything config check found. Its JSON form is the
// config check --json schema.
type checkResult struct {
	Source string `json:"source"`
	OK     bool   `json:"ok"`
	Strict bool   `json:"strict"`
	// JudgedFor is the user the paths and files are judged for: the user
	// serve will run as (the installed unit's User=, --user, or the user
	// running the check).
	JudgedFor *judgedFor       `json:"judged_for"`
	Errors    []finding        `json:"errors"`
	Warnings  []finding        `json:"warnings"`
	Unknown   []unknownFinding `json:"unknown_keys"`
	Paths     []pathFinding    `json:"paths"`
	TLS       []tlsFinding     `json:"tls"`
	Config    *effectiveJSON   `json:"config"` // null when the configuration does not load
	// OpenBaoToken says where the openbao backend's token comes from
	// (never the token); absent for the embedded backend.
	OpenBaoToken string `json:"openbao_token_source,omitempty"`
	// ServiceInstance is the service.instance.id serve would export and
	// where it comes from; absent when the configuration does not load.
	ServiceInstance *serviceInstanceJSON `json:"service_instance,omitempty"`
	// Shares is each registrar's part of every policy's budget under
	// registrar.instances; absent when the configuration does not load.
	Shares  *sharesJSON `json:"instance_shares,omitempty"`
	cfg     *config.Config
	environ []string
}

func (r *checkResult) errorf(key, format string, args ...any) {
	r.Errors = append(r.Errors, finding{key, fmt.Sprintf(format, args...)})
}

// addErrors adds each error of err (joined: config.Errors), keyed by the
// key a *config.KeyError names.
func (r *checkResult) addErrors(err error) {
	for _, e := range config.Errors(err) {
		key := ""
		var ke *config.KeyError
		if errors.As(e, &ke) {
			key = ke.Key
		}
		r.Errors = append(r.Errors, finding{key, e.Error()})
	}
}

func (r *checkResult) warnf(key, format string, args ...any) {
	r.Warnings = append(r.Warnings, finding{key, fmt.Sprintf(format, args...)})
}

// configCheck is runConfigCheck with the environment injected.
func configCheck(args, environ []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("config check")
	path := fs.String("config", "", "TOML configuration `file` to check (default: the embedded defaults, as make run)")
	strict := fs.Bool("strict", false, "treat unknown keys, a private key others may read, a listen address serve cannot bind and a listener no caller policy covers as errors")
	as := fs.String("user", "", "judge the paths and files for the user `name` (or a uid); only root may name another user\n(default: as root, the User= of the installed registrar-otel.service, root without one; else the user running it)")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout (schema: docs, operations, --json schemas) instead of text")
	if code, ok := parseFlags(fs, configCheckUsage, args, stdout, stderr); !ok {
		return code
	}
	if flagSet(fs, "config") && *path == "" {
		return usageError(stderr, "config check", "--config needs a file name; omit it to check the embedded defaults")
	}
	if flagSet(fs, "user") && *as == "" {
		return usageError(stderr, "config check", "--user needs a user name or uid; omit it to judge for the user serve runs as")
	}

	res := newCheckResult(*path, *strict)
	j, err := resolveJudge(*as, res)
	if err != nil {
		return usageError(stderr, "config check", "%v", err)
	}
	runCheck(res, environ, j)
	if *asJSON {
		if err := writeJSON(stdout, res); err != nil {
			fmt.Fprintf(stderr, "registrar-otel config check: writing the report: %v\n", err)
			return configCheckInvalid
		}
	} else {
		for _, w := range res.Warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w.Message)
		}
		for _, e := range res.Errors {
			fmt.Fprintln(stderr, e.Message)
		}
		if res.OK {
			printConfigSummary(stdout, res)
		} else {
			noun := "errors"
			if len(res.Errors) == 1 {
				noun = "error"
			}
			fmt.Fprintln(stderr, res.JudgedFor.line())
			fmt.Fprintf(stderr, "config check: %d %s in %s\n", len(res.Errors), noun, res.Source)
		}
	}
	if !res.OK {
		return configCheckInvalid
	}
	return configCheckOK
}

// newCheckResult is the empty report of a check of the file path ("" for
// the embedded defaults).
func newCheckResult(path string, strict bool) *checkResult {
	res := &checkResult{
		Source: path, Strict: strict,
		Errors: []finding{}, Warnings: []finding{}, Unknown: []unknownFinding{}, Paths: []pathFinding{}, TLS: []tlsFinding{},
	}
	if path == "" {
		res.Source = config.SourceDefaults
	}
	return res
}

// runCheck loads the configuration of res.Source and checks what it
// refers to, judged for j's user, filling res.
func runCheck(res *checkResult, environ []string, j *judgedFor) {
	res.JudgedFor = j
	path, strict := res.Source, res.Strict
	if path == config.SourceDefaults {
		path = ""
	}
	logs := &collectHandler{}
	cfg, err := loadConfigFor(path, environ, slog.New(logs), j.UID)
	for _, rec := range logs.records() {
		key := rec.attrs["key"]
		if strings.HasPrefix(rec.msg, "unknown configuration key") {
			u := unknownFinding{Key: key, Kept: strings.Contains(rec.msg, "kept"), DidYouMean: rec.attrs["did_you_mean"]}
			res.Unknown = append(res.Unknown, u)
			if v := rec.attrs["variable"]; v != "" {
				// From the environment: name the variable, not the key
				// it happens to read as.
				msg := fmt.Sprintf("environment variable %s names no known key (it reads as %s)", v, key)
				switch {
				case u.DidYouMean != "":
					res.errorf(key, "%s; did you mean %s? Levels are separated by \"__\" (the default applies until it is fixed)", msg, u.DidYouMean)
				case strict:
					res.errorf(key, "%s (--strict); unset it", msg)
				default:
					res.warnf(key, "%s; ignored", msg)
				}
				continue
			}
			switch {
			case u.DidYouMean != "":
				res.errorf(key, "%s is not a known key: a likely misspelling of %s (the default applies until it is fixed)", key, u.DidYouMean)
			case strict:
				res.errorf(key, "%s is not a known key (--strict); remove it, or run without --strict to keep it for a later version", key)
			case u.Kept:
				res.warnf(key, "%s is not a known key; kept untouched, this version does not use it", key)
			default:
				res.warnf(key, "%s is not a known key; ignored", key)
			}
			continue
		}
		res.warnf(key, "%s: %s", key, rec.msg)
	}
	if err != nil {
		res.addErrors(err)
		// Errors from the load come first, as Load orders them.
		slices.SortStableFunc(res.Errors, func(a, b finding) int {
			return boolRank(isUnknownErr(res, a)) - boolRank(isUnknownErr(res, b))
		})
		res.OK = false
		return
	}
	for _, w := range cfg.AuthorizationWarnings() {
		res.note(w.Key, "%s", w.Message)
	}
	checkTLS(res, &cfg)
	checkKeyMode(res, &cfg)
	checkListen(res, &cfg, j)
	checkTelemetry(res, &cfg, environ)
	checkPaths(res, &cfg, j)
	checkReadable(res, &cfg, environ, j)
	// The files the openbao backend will read: the token's mode and
	// content, and the CA bundle. Nothing to do for the embedded backend.
	src, ferr := cfg.CheckFilesFor(environ, j.UID)
	if ferr != nil {
		res.addErrors(ferr)
	} else if cfg.Registrar.Backend == config.BackendOpenBao {
		res.OpenBaoToken = src.String()
	}
	eff := effective(&cfg)
	res.Config = &eff
	res.cfg = &cfg
	res.environ = environ
	res.ServiceInstance = serviceInstanceOf(&cfg, environ)
	res.Shares = sharesOf(cfg.Registrar)
	res.OK = len(res.Errors) == 0
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isUnknownErr reports whether f is an unknown-key error (reported after
// the load's own errors).
func isUnknownErr(r *checkResult, f finding) bool {
	for _, u := range r.Unknown {
		if u.Key == f.Key {
			return true
		}
	}
	return false
}

// collectHandler is a slog.Handler that keeps Load's warnings (message and
// string attributes) for the check to report in its own format.
type collectHandler struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	msg   string
	attrs map[string]string
}

func (h *collectHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *collectHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *collectHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *collectHandler) WithGroup(string) slog.Handler      { return h }

func (h *collectHandler) records() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs)
}

// effectiveJSON is the effective configuration in config check --json:
// the TOML key names, numbers as numbers.
type effectiveJSON struct {
	Registrar struct {
		SocketPath                                  string            `json:"socket_path"`
		SocketGroup                                 string            `json:"socket_group"`
		SubuidFile                                  string            `json:"subuid_file"`
		TLSListen                                   string            `json:"tls_listen"`
		TLSCertFile                                 string            `json:"tls_cert_file"`
		TLSKeyFile                                  string            `json:"tls_key_file"`
		TLSClientCAFile                             string            `json:"tls_client_ca_file"`
		StateDir                                    string            `json:"state_dir"`
		AuditRecordDir                              string            `json:"audit_record_dir"`
		AuditMaxFileBytes                           uint64            `json:"audit_max_file_bytes"`
		AuditMaxRetainedFiles                       uint32            `json:"audit_max_retained_files"`
		RateLimitAdmissionBurst                     uint32            `json:"rate_limit_admission_burst"`
		RateLimitAdmissionRefillIntervalMS          uint32            `json:"rate_limit_admission_refill_interval_ms"`
		RateLimitPredecisionRefusalBurst            uint32            `json:"rate_limit_predecision_refusal_burst"`
		RateLimitPredecisionRefusalRefillIntervalMS uint32            `json:"rate_limit_predecision_refusal_refill_interval_ms"`
		Instances                                   uint32            `json:"instances"`
		RateLimitCoalesceWindowSeconds              uint32            `json:"rate_limit_coalesce_window_seconds"`
		MaintenanceIntervalMS                       uint32            `json:"maintenance_interval_ms"`
		MaxWrapTTLSeconds                           uint32            `json:"max_wrap_ttl_seconds"`
		AuditStoreReserveBytes                      uint64            `json:"audit_store_reserve_bytes"`
		AuditMinRetentionSeconds                    uint32            `json:"audit_min_retention_seconds"`
		UnixMaxConns                                uint32            `json:"unix_max_conns"`
		TLSMaxConns                                 uint32            `json:"tls_max_conns"`
		TLSHandshakeMaxConns                        uint32            `json:"tls_handshake_max_conns"`
		TLSHandshakeTimeoutMS                       uint32            `json:"tls_handshake_timeout_ms"`
		MaxConnsPerIdentity                         uint32            `json:"max_conns_per_identity"`
		ReadHeaderTimeoutMS                         uint32            `json:"read_header_timeout_ms"`
		ReadBodyTimeoutMS                           uint32            `json:"read_body_timeout_ms"`
		IdleTimeoutMS                               uint32            `json:"idle_timeout_ms"`
		MaxInFlightPerIdentity                      uint32            `json:"max_in_flight_per_identity"`
		SharedInFlight                              uint32            `json:"shared_in_flight"`
		WaitTimeoutMS                               uint32            `json:"wait_timeout_ms"`
		RefusalPaceMS                               uint32            `json:"refusal_pace_ms"`
		Backend                                     string            `json:"backend"`
		LogLevel                                    string            `json:"log_level"`
		Components                                  map[string]string `json:"components"`
		MaxInstancesPerHost                         map[string]uint32 `json:"max_instances_per_host"`
		Callers                                     []callerJSON      `json:"callers"`
	} `json:"registrar"`
	Telemetry struct {
		MetricsListen         string `json:"metrics_listen"`
		OTLPEndpoint          string `json:"otlp_endpoint"`
		ServiceName           string `json:"service_name"`
		ServiceInstanceID     string `json:"service_instance_id"`
		TraceSamplePerMillion uint32 `json:"trace_sample_per_million"`
		OTLPTracesEndpoint    string `json:"otlp_traces_endpoint"`
		OTLPMetricsEndpoint   string `json:"otlp_metrics_endpoint"`
	} `json:"telemetry"`
}

// effective fills the effective configuration from the key table's
// values (config.Settings: secrets redacted): each member takes the value
// of the key its JSON name names, numbers parsed back. A key of [registrar]
// or [telemetry] without a member fails TestConfigCheckListsEveryKey.
func effective(cfg *config.Config) effectiveJSON {
	var e effectiveJSON
	values := map[string]string{}
	for _, s := range cfg.Settings() {
		values[s.Key] = s.Value
	}
	for prefix, table := range map[string]reflect.Value{
		"registrar": reflect.ValueOf(&e.Registrar).Elem(),
		"telemetry": reflect.ValueOf(&e.Telemetry).Elem(),
	} {
		for i := range table.NumField() {
			f := table.Field(i)
			v, ok := values[prefix+"."+table.Type().Field(i).Tag.Get("json")]
			if !ok {
				continue
			}
			switch f.Kind() {
			case reflect.String:
				f.SetString(v)
			case reflect.Uint32, reflect.Uint64:
				n, _ := strconv.ParseUint(v, 10, 64) // Settings spells integers in decimal
				f.SetUint(n)
			}
		}
	}
	e.Registrar.Components = map[string]string{}
	for n, m := range cfg.Registrar.Components {
		e.Registrar.Components[n] = m.String()
	}
	e.Registrar.MaxInstancesPerHost = map[string]uint32{}
	maps.Copy(e.Registrar.MaxInstancesPerHost, cfg.Registrar.MaxInstancesPerHost)
	e.Registrar.Callers = callersOf(cfg.Registrar)
	return e
}

// printConfigSummary writes the effective settings an operator most often
// needs to confirm: where the daemon listens and writes, the two limiter
// buckets, the components, telemetry, and what serve would do with each
// path.
func printConfigSummary(w io.Writer, res *checkResult) {
	e := res.Config
	r, t := &e.Registrar, &e.Telemetry
	fmt.Fprintf(w, "configuration OK: %s\n", res.Source)
	fmt.Fprintln(w, res.JudgedFor.line())

	tw, row := summaryRows(w)

	fmt.Fprintln(tw, "registrar:")
	row("socket_path", r.SocketPath)
	rowOr(row, "socket_group", r.SocketGroup, " (socket 0660 in this group)", "(none: socket 0600, the daemon's user only)")
	rowOr(row, "subuid_file", r.SubuidFile, " (a subordinate uid is its range owner's identity)", "(none: every unix uid is its own identity)")
	if r.TLSListen == "" {
		row("tls_listen", "(none: no TCP listener)")
	} else {
		row("tls_listen", fmt.Sprintf("%s (cert %s, key %s, client CA %s)", r.TLSListen, r.TLSCertFile, r.TLSKeyFile, r.TLSClientCAFile))
	}
	row("state_dir", r.StateDir)
	row("audit_record_dir", fmt.Sprintf("%s (rotate at %d bytes, keep %d files)", r.AuditRecordDir, r.AuditMaxFileBytes, r.AuditMaxRetainedFiles))
	row("admission bucket", fmt.Sprintf("burst %d, one token every %d ms", r.RateLimitAdmissionBurst, r.RateLimitAdmissionRefillIntervalMS))
	row("predecision_refusal bucket", fmt.Sprintf("burst %d, one token every %d ms", r.RateLimitPredecisionRefusalBurst, r.RateLimitPredecisionRefusalRefillIntervalMS))
	if res.Shares != nil {
		instancesRows(row, res.Shares)
	}
	row("coalesce window", fmt.Sprintf("%d s", r.RateLimitCoalesceWindowSeconds))
	row("maintenance interval", fmt.Sprintf("%d ms", r.MaintenanceIntervalMS))
	row("max wrap_ttl", fmt.Sprintf("%d s", r.MaxWrapTTLSeconds))
	row("connections", fmt.Sprintf("unix %d, tls %d (+%d in handshake, %d ms each), %d per identity",
		r.UnixMaxConns, r.TLSMaxConns, r.TLSHandshakeMaxConns, r.TLSHandshakeTimeoutMS, r.MaxConnsPerIdentity))
	row("connection timeouts", fmt.Sprintf("headers %d ms, body %d ms, idle %d ms", r.ReadHeaderTimeoutMS, r.ReadBodyTimeoutMS, r.IdleTimeoutMS))
	row("fair dispatch", fmt.Sprintf("%d in flight per identity alone, %d shared once two or more call, wait %d ms, limiter refusals paced %d ms while another calls", r.MaxInFlightPerIdentity, r.SharedInFlight, r.WaitTimeoutMS, r.RefusalPaceMS))
	row("audit store reserve", fmt.Sprintf("%d bytes", r.AuditStoreReserveBytes))
	if r.AuditMinRetentionSeconds == 0 {
		row("audit min retention", "0 (off: retention by size alone)")
	} else {
		row("audit min retention", fmt.Sprintf("%d s (younger generations kept past the budget; mints refused meanwhile)", r.AuditMinRetentionSeconds))
	}
	row("log_level", r.LogLevel+" (serve --log-level, when given, overrides it)")
	var kept []string
	for _, u := range res.Unknown {
		if u.Kept {
			kept = append(kept, u.Key)
		}
	}
	if len(kept) > 0 {
		row("unknown keys kept", strings.Join(kept, ", "))
	}

	if len(r.Components) == 0 {
		fmt.Fprintln(tw, "components: (none: every mint is refused with component_not_configured)")
	} else {
		fmt.Fprintln(tw, "components:")
		for _, name := range slices.Sorted(maps.Keys(r.Components)) {
			m := r.Components[name]
			if n, ok := r.MaxInstancesPerHost[name]; ok {
				m += fmt.Sprintf(", at most %d live per host (max_instances_per_host)", n)
			}
			row(name, m)
		}
	}

	if res.cfg != nil {
		printCallers(tw, &res.cfg.Registrar)
	}

	fmt.Fprintln(tw, "telemetry:")
	rowOr(row, "metrics_listen", t.MetricsListen, "", "(disabled)")
	rowOr(row, "otlp_endpoint", config.RedactURL(t.OTLPEndpoint), "", "(none)")
	row("service_name", t.ServiceName)
	if res.ServiceInstance != nil {
		row("service_instance_id", res.ServiceInstance.ID+" ("+res.ServiceInstance.From+")")
	}
	row("trace_sample_per_million", strconv.FormatUint(uint64(t.TraceSamplePerMillion), 10))
	tw.Flush() // the per-signal rows align among themselves
	row("otlp_traces_endpoint", signalEndpoint(t.OTLPTracesEndpoint, t.OTLPEndpoint, "/v1/traces", "spans"))
	row("otlp_metrics_endpoint", signalEndpoint(t.OTLPMetricsEndpoint, t.OTLPEndpoint, "/v1/metrics", "metrics"))
	if len(res.TLS) > 0 {
		fmt.Fprintln(tw, "tls:")
		for _, f := range res.TLS {
			row(f.Key, f.Path+": "+f.Detail)
		}
	}
	fmt.Fprintln(tw, "paths (what serve does):")
	for _, p := range res.Paths {
		// A relative path means nothing from another directory: the text
		// says where it resolves and whether it is the embedded default
		// (the JSON keeps the path as configured).
		row(p.Key, describePath(p.Path, res.Source == config.SourceDefaults)+": "+p.Detail)
	}
	tw.Flush()
	if res.cfg != nil && res.cfg.Registrar.Backend == config.BackendOpenBao {
		printOpenBaoSummary(w, res.cfg, res.OpenBaoToken)
	}
}

// signalEndpoint describes where one OTLP signal goes according to the file
// (the OTEL_EXPORTER_OTLP_* variables apply only where it says nothing).
func signalEndpoint(own, base, path, what string) string {
	switch {
	case own == config.SignalOff:
		return "none (no " + what + " exported)"
	case own != "":
		return config.RedactURL(own)
	case base != "":
		return "(follows otlp_endpoint: " + config.RedactURL(strings.TrimSuffix(base, "/")+path) + ")"
	}
	return "(none: OTEL_EXPORTER_OTLP_* variables, if set)"
}

// summaryRows is the table the summary is written in, with its row
// writer: "  key<TAB>value".
func summaryRows(w io.Writer) (*tabwriter.Writer, func(k, v string)) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	return tw, func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
}

// rowOr writes the row of key: v followed by suffix, or none when v is "".
func rowOr(row func(k, v string), key, v, suffix, none string) {
	if v == "" {
		row(key, none)
		return
	}
	row(key, v+suffix)
}

// printOpenBaoSummary adds the openbao backend's settings: where the token
// comes from (never the token), the mounts and the secret id limits.
func printOpenBaoSummary(w io.Writer, cfg *config.Config, src string) {
	o := &cfg.OpenBao
	tw, row := summaryRows(w)
	fmt.Fprintln(tw, "openbao (registrar.backend = \"openbao\"):")
	row("address", o.Address)
	rowOr(row, "ca_file", o.CAFile, " (PEM OK)", "(none: the system roots)")
	row("token", "from "+src+" (mode and content OK)")
	row("bindings", fmt.Sprintf("%s/data/%s/bindings/<registration_id> (KV v2)", o.KVMount, o.KVPrefix))
	row("roles", fmt.Sprintf("auth/%s/role/bootroot-service-<registration_id>", o.AppRoleMount))
	row("policies", "registrar-otel-service-<service_name>, written by the operator (registrar-otel openbao check verifies the token)")
	row("request timeout", fmt.Sprintf("%d ms", o.RequestTimeoutMS))
	row("readiness grace", fmt.Sprintf("%d ms (/readyz answers 503 once the cluster was unreachable this long)", o.ReadinessGraceMS))
	row("max in flight", fmt.Sprintf("%d (slot wait 100 ms)", o.MaxInFlight))
	row("secret ids", fmt.Sprintf("ttl %d s, %d use(s)", o.SecretIDTTLSeconds, o.SecretIDNumUses))
	tw.Flush()
}
