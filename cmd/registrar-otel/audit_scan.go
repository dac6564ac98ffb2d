package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// Exit statuses of `audit scan`.
const (
	auditScanClean     = exitOK      // no anomalies
	auditScanAnomalies = exitFailure // an intent without outcome, a malformed line or a directory anomaly
	auditScanFailed    = exitUsage   // usage error, or the store could not be read
	auditScanLimited   = exitLimited // --fail-on-limited N: more than N invocations limited in the window
)

// defaultScanTop is --top's default: the identities an operator reads at a
// glance.
const defaultScanTop = 10

var auditScanUsage = usageSpec{
	name:     "audit scan",
	synopsis: "[--dir DIR | --config FILE] [--window 720h] [--by identity [--top N]] [--fail-on-limited N] [--json]",
	what: `Scans the audit record store (read-only; safe while the daemon runs) for
intents without an outcome (older than a 60 s settle grace), malformed lines
and directory anomalies (records that stop without an active file, a gap in
the generation numbers, an unreadable store file, the directory or a file
of it owned by neither root nor the store's owner, or group- or
world-writable), lists every file it did not read with the reason, and
summarises the limited (counted) records per bucket. With --by identity it
also lists them per caller identity and bucket, the most limited
invocations first (the --top N, 0 for all): who is flooding. The store's
owner is the uid running the scan, or, run as root, the directory's owner.

Exit status: 0 when the store is clean, 1 when anomalies are found, 2 on a
usage error or an unreadable store, 4 when --fail-on-limited N is given and
more than N invocations were limited in the window (anomalies, 1, take
precedence): counted records are evidence, not anomalies, so a cron job
learns of a flood only this way.`,
	examples: []string{
		"registrar-otel audit scan",
		"registrar-otel audit scan --config /etc/registrar-otel/registrar.toml --window 24h --json",
		"registrar-otel audit scan --by identity --top 5 --fail-on-limited 1000",
	},
}

// runAuditScan implements `registrar-otel audit scan [--dir D] [--window
// 720h] [--json]` (args are what follows "audit scan"). It scans the record
// store read-only and prints a report: text by default, one JSON object
// with --json. It returns 0 when the store is clean, 1 when it found
// anomalies, and 2 on a usage error or an unreadable store.
func runAuditScan(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit scan")
	dir := flags.String("dir", "", "audit record `directory` (default: registrar.audit_record_dir of --config, or of the embedded defaults: var/audit)")
	cfgPath := flags.String("config", "", "the daemon's configuration `file`, to find registrar.audit_record_dir (default: the embedded defaults, as make run)")
	window := flags.Duration("window", audit.DefaultScanWindow, "lookback `duration`: older records are ignored")
	asJSON := flags.Bool("json", false, "print one JSON object instead of text (schema: docs, operations, --json schemas)")
	by := flags.String("by", "bucket", "`breakdown` of the limited records: bucket (the totals) or identity (also per caller identity and bucket)")
	top := flags.Uint("top", defaultScanTop, "with --by identity, the `number` of identity rows shown, most limited first; 0 shows all")
	failOn := flags.Uint64("fail-on-limited", 0, "exit 4 when more than this `number` of invocations were limited in the window")
	if code, ok := parseFlags(flags, auditScanUsage, args, stdout, stderr); !ok {
		if code == exitUsage {
			return auditScanFailed
		}
		return code
	}
	if *window <= 0 {
		return flagValueError(stderr, auditScanUsage, "window", window.String(), "a positive duration", "--window 24h")
	}
	if *by != "bucket" && *by != "identity" {
		return flagValueError(stderr, auditScanUsage, "by", *by, "bucket or identity"+didYouMean(*by, []string{"bucket", "identity"}), "--by identity")
	}
	if flagSet(flags, "top") && *by != "identity" {
		return usageError(stderr, "audit scan", "--top applies to --by identity only (for example: --by identity --top 5)")
	}
	failOnSet := flagSet(flags, "fail-on-limited")
	dirFromDefault := false
	if *dir == "" {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		cfg, err := loadConfig(*cfgPath, os.Environ(), logger)
		if err != nil {
			printErrors(stderr, err)
			return auditScanFailed
		}
		*dir = cfg.Registrar.AuditRecordDir
		dirFromDefault = *cfgPath == "" && *dir == config.Default().Registrar.AuditRecordDir
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: *dir, Window: *window, ByIdentity: *by == "identity"})
	if err != nil {
		cause := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause = pe.Err
		}
		fmt.Fprintf(stderr, "audit scan: cannot read the record store at %s: %v\n", describePath(*dir, dirFromDefault), cause)
		if dirFromDefault {
			fmt.Fprintln(stderr, "  point at the daemon's store with --dir DIR, or at its configuration with --config FILE")
		}
		return auditScanFailed
	}
	view := scanView{rep: rep, byIdentity: *by == "identity", top: *top}
	if failOnSet {
		view.failOn = &failOnLimited{Threshold: *failOn, Limited: totalLimited(rep)}
		view.failOn.Exceeded = view.failOn.Limited > *failOn
	}
	if *asJSON {
		err = writeScanJSON(stdout, view)
	} else {
		err = writeScanText(stdout, view)
	}
	if err != nil {
		fmt.Fprintf(stderr, "audit scan: writing the report: %v\n", err)
		return auditScanFailed
	}
	return view.exitCode()
}

// scanView is a report with what the flags asked of it.
type scanView struct {
	rep        *audit.Report
	byIdentity bool
	top        uint           // identity rows shown; 0 all
	failOn     *failOnLimited // nil without --fail-on-limited
}

// failOnLimited is the --fail-on-limited check, as --json shows it.
type failOnLimited struct {
	Threshold uint64 `json:"threshold"`
	Limited   uint64 `json:"limited"`
	Exceeded  bool   `json:"exceeded"`
}

// exitCode is 1 for anomalies, else 4 when --fail-on-limited was
// exceeded, else 0.
func (v scanView) exitCode() int {
	switch {
	case v.rep.Anomalies():
		return auditScanAnomalies
	case v.failOn != nil && v.failOn.Exceeded:
		return auditScanLimited
	}
	return auditScanClean
}

// shown is the identity rows printed and how many were left out.
func (v scanView) shown() ([]audit.IdentityLimited, int) {
	rows := v.rep.LimitedByIdentity
	if v.top == 0 || uint(len(rows)) <= v.top {
		return rows, 0
	}
	return rows[:v.top], len(rows) - int(v.top)
}

// totalLimited is how many invocations were limited in the window, both
// buckets, saturating.
func totalLimited(rep *audit.Report) uint64 {
	var n uint64
	for _, s := range rep.Limited {
		if n > math.MaxUint64-s.Count {
			return math.MaxUint64
		}
		n += s.Count
	}
	return n
}

// scanJSON is the stable --json shape. Lists are always arrays, never
// null; durations are whole seconds; times use the audit TimeLayout.
type scanJSON struct {
	Dir                  string                 `json:"dir"`
	Now                  string                 `json:"now"`
	WindowSeconds        int64                  `json:"window_seconds"`
	GraceSeconds         int64                  `json:"grace_seconds"`
	Anomalies            bool                   `json:"anomalies"`
	IntentWithoutOutcome uint64                 `json:"intent_without_outcome"`
	MalformedRecords     uint64                 `json:"malformed_records"`
	MalformedByRule      map[audit.Rule]uint64  `json:"malformed_by_rule"`
	Malformed            []scanMalformedJSON    `json:"malformed"`
	UnpairedIntents      []scanUnpairedJSON     `json:"unpaired_intents"`
	Limited              map[string]scanLimJSON `json:"limited"`
	Records              map[string]uint64      `json:"records"`
	Files                []string               `json:"files"`
	Skipped              []scanSkippedJSON      `json:"skipped"`
	StoreAnomalies       []scanStoreAnomalyJSON `json:"store_anomalies"`
	LateLimitedRecords   uint64                 `json:"late_limited_records"`
	EvidenceGaps         []scanGapJSON          `json:"evidence_gaps"`
	// With --by identity only.
	LimitedByIdentity        []scanIdentityJSON     `json:"limited_by_identity,omitempty"`
	LimitedByIdentityOmitted *int                   `json:"limited_by_identity_omitted,omitempty"`
	LimitedOtherIdentities   map[string]scanLimJSON `json:"limited_other_identities,omitempty"`
	// With --fail-on-limited only.
	FailOnLimited *failOnLimited `json:"fail_on_limited,omitempty"`
}

type scanGapJSON struct {
	File    string `json:"file"`
	Line    uint64 `json:"line"`
	From    string `json:"from"`
	To      string `json:"to"`
	Records uint64 `json:"records"`
	Count   uint64 `json:"count"`
}

type scanIdentityJSON struct {
	CallerIdentity string `json:"caller_identity"`
	Bucket         string `json:"bucket"`
	Records        uint64 `json:"records"`
	Count          uint64 `json:"count"`
}

type scanStoreAnomalyJSON struct {
	Kind   audit.StoreAnomalyKind `json:"kind"`
	File   string                 `json:"file"`
	Detail string                 `json:"detail"`
}

type scanMalformedJSON struct {
	File   string     `json:"file"`
	Line   uint64     `json:"line"`
	Rule   audit.Rule `json:"rule"`
	Detail string     `json:"detail"`
}

type scanUnpairedJSON struct {
	File      string `json:"file"`
	Line      uint64 `json:"line"`
	RequestID string `json:"request_id"`
	TS        string `json:"ts"`
}

type scanLimJSON struct {
	Records uint64 `json:"records"`
	Count   uint64 `json:"count"`
}

type scanSkippedJSON struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

func writeScanJSON(w io.Writer, v scanView) error {
	rep := v.rep
	out := scanJSON{
		Dir:                  rep.Dir,
		Now:                  rep.Now.UTC().Format(audit.TimeLayout),
		WindowSeconds:        int64(rep.Window / time.Second),
		GraceSeconds:         int64(rep.Grace / time.Second),
		Anomalies:            rep.Anomalies(),
		IntentWithoutOutcome: rep.IntentWithoutOutcome,
		MalformedRecords:     rep.MalformedRecords,
		MalformedByRule:      rep.MalformedByRule,
		Malformed:            []scanMalformedJSON{},
		UnpairedIntents:      []scanUnpairedJSON{},
		Limited:              map[string]scanLimJSON{},
		Records:              map[string]uint64{},
		Files:                append([]string{}, rep.Files...),
		Skipped:              []scanSkippedJSON{},
		StoreAnomalies:       []scanStoreAnomalyJSON{},
		LateLimitedRecords:   rep.LateLimitedRecords,
		EvidenceGaps:         []scanGapJSON{},
	}
	for _, g := range rep.Gaps {
		out.EvidenceGaps = append(out.EvidenceGaps, scanGapJSON{g.File, g.Line, g.From.UTC().Format(audit.TimeLayout), g.To.UTC().Format(audit.TimeLayout), g.Records, g.Count})
	}
	for _, a := range rep.StoreAnomalies {
		out.StoreAnomalies = append(out.StoreAnomalies, scanStoreAnomalyJSON(a))
	}
	if out.MalformedByRule == nil {
		out.MalformedByRule = map[audit.Rule]uint64{}
	}
	for _, m := range rep.Malformed {
		out.Malformed = append(out.Malformed, scanMalformedJSON(m))
	}
	for _, u := range rep.Unpaired {
		out.UnpairedIntents = append(out.UnpairedIntents, scanUnpairedJSON{u.File, u.Line, u.RequestID, u.TS.UTC().Format(audit.TimeLayout)})
	}
	for b := range limiter.Bucket(limiter.NumBuckets) {
		out.Limited[b.String()] = scanLimJSON(rep.Limited[b])
	}
	for p := audit.PhaseIntent; p <= audit.PhaseLimited; p++ {
		out.Records[p.String()] = rep.Records[p-1]
	}
	for _, s := range rep.Skipped {
		out.Skipped = append(out.Skipped, scanSkippedJSON(s))
	}
	if v.byIdentity {
		rows, omitted := v.shown()
		out.LimitedByIdentity = []scanIdentityJSON{}
		for _, r := range rows {
			out.LimitedByIdentity = append(out.LimitedByIdentity, scanIdentityJSON{r.CallerIdentity, r.Bucket.String(), r.Records, r.Count})
		}
		out.LimitedByIdentityOmitted = &omitted
		out.LimitedOtherIdentities = map[string]scanLimJSON{}
		for b := range limiter.Bucket(limiter.NumBuckets) {
			out.LimitedOtherIdentities[b.String()] = scanLimJSON(rep.LimitedOtherIdentities[b])
		}
	}
	out.FailOnLimited = v.failOn
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeScanText(w io.Writer, v scanView) error {
	rep := v.rep
	p := &errWriter{w: w}
	p.printf("audit scan of %s at %s (window %s, grace %s)\n", rep.Dir, rep.Now.UTC().Format(audit.TimeLayout), rep.Window, rep.Grace)
	p.printf("files read: %d, skipped: %d\n", len(rep.Files), len(rep.Skipped))
	for _, s := range rep.Skipped {
		p.printf("  skipped %s: %s\n", s.Name, s.Reason)
	}
	p.printf("records in window: %d intent, %d outcome, %d limited\n",
		rep.Records[audit.PhaseIntent-1], rep.Records[audit.PhaseOutcome-1], rep.Records[audit.PhaseLimited-1])

	p.printf("\nintent_without_outcome: %d\n", rep.IntentWithoutOutcome)
	for _, u := range rep.Unpaired {
		p.printf("  %s:%d request_id %s at %s\n", u.File, u.Line, u.RequestID, u.TS.UTC().Format(audit.TimeLayout))
	}
	if n := rep.IntentWithoutOutcome; n > uint64(len(rep.Unpaired)) {
		p.printf("  ... and %d more\n", n-uint64(len(rep.Unpaired)))
	}

	p.printf("\nmalformed_records: %d\n", rep.MalformedRecords)
	for _, rule := range slices.Sorted(maps.Keys(rep.MalformedByRule)) {
		p.printf("  %-24s %d\n", rule, rep.MalformedByRule[rule])
	}
	for _, m := range rep.Malformed {
		p.printf("  %s:%d %s: %s\n", m.File, m.Line, m.Rule, m.Detail)
	}
	if n := rep.MalformedRecords; n > uint64(len(rep.Malformed)) {
		p.printf("  ... and %d more\n", n-uint64(len(rep.Malformed)))
	}

	p.printf("\nstore_anomalies: %d\n", len(rep.StoreAnomalies))
	for _, a := range rep.StoreAnomalies {
		p.printf("  %s %s: %s\n", a.Kind, a.File, a.Detail)
	}

	p.printf("\nlimited (counted records of suppressed invocations):\n")
	for b := range limiter.Bucket(limiter.NumBuckets) {
		s := rep.Limited[b]
		p.printf("  %-20s %d records, %d invocations\n", b, s.Records, s.Count)
	}
	p.printf("\nevidence gaps (counted records written over %s after their window_end: recovered after an unclean stop): %d records\n",
		audit.LateLimitedAfter, rep.LateLimitedRecords)
	for _, g := range rep.Gaps {
		p.printf("  %s:%d from %s to %s: %d records, %d invocations recovered; limited invocations in between may be uncounted\n",
			g.File, g.Line, g.From.UTC().Format(audit.TimeLayout), g.To.UTC().Format(audit.TimeLayout), g.Records, g.Count)
	}
	if v.byIdentity {
		rows, omitted := v.shown()
		p.printf("\nlimited by caller identity (%d of %d, most limited invocations first):\n", len(rows), len(rep.LimitedByIdentity))
		var buf strings.Builder
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  caller_identity\tbucket\trecords\tinvocations")
		for _, r := range rows {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", printable(r.CallerIdentity), r.Bucket, r.Records, r.Count)
		}
		for b := range limiter.Bucket(limiter.NumBuckets) {
			if o := rep.LimitedOtherIdentities[b]; o.Records > 0 {
				fmt.Fprintf(tw, "  (identities past the first %d)\t%s\t%d\t%d\n", audit.MaxScanIdentities, b, o.Records, o.Count)
			}
		}
		tw.Flush()
		p.printf("%s", buf.String())
		if omitted > 0 {
			p.printf("  ... and %d more (--top 0 shows all)\n", omitted)
		}
	}
	if v.failOn != nil {
		verdict := "not more than"
		if v.failOn.Exceeded {
			verdict = "more than"
		}
		p.printf("\nfail-on-limited: %d invocations limited in the window, %s %d\n", v.failOn.Limited, verdict, v.failOn.Threshold)
	}
	switch {
	case rep.Anomalies():
		p.printf("\nresult: ANOMALIES FOUND\n")
	case v.failOn != nil && v.failOn.Exceeded:
		p.printf("\nresult: no anomalies; LIMITED above --fail-on-limited (exit %d)\n", auditScanLimited)
	default:
		p.printf("\nresult: clean\n")
	}
	return p.err
}

// printable is an identity as it can be printed on one line of a
// terminal: as is when every rune is graphic, quoted otherwise.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}

// errWriter keeps the first write error so the report is printed with
// plain printf calls.
type errWriter struct {
	w   io.Writer
	err error
}

func (p *errWriter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
