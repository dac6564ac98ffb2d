package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// Exit statuses of `audit scan`.
const (
	auditScanClean     = 0 // no anomalies
	auditScanAnomalies = 1 // an intent without outcome, a malformed line or a directory anomaly
	auditScanFailed    = 2 // usage error, or the store could not be read
)

var auditScanUsage = usageSpec{
	name:     "audit scan",
	synopsis: "[--dir DIR | --config FILE] [--window 720h] [--json]",
	what: `Scans the audit record store (read-only; safe while the daemon runs) for
intents without an outcome (older than a 60 s settle grace), malformed lines
and directory anomalies (records that stop without an active file, a gap in
the generation numbers, an unreadable store file), lists every file it did
not read with the reason, and summarises the limited (counted) records per
bucket.

Exit status: 0 when the store is clean, 1 when anomalies are found, 2 on a
usage error or an unreadable store.`,
	examples: []string{
		"registrar-otel audit scan",
		"registrar-otel audit scan --config /etc/registrar-otel/registrar.toml --window 24h --json",
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
	if code, ok := parseFlags(flags, auditScanUsage, args, stdout, stderr); !ok {
		if code == exitUsage {
			return auditScanFailed
		}
		return code
	}
	if *window <= 0 {
		return usageError(stderr, "audit scan", "--window must be positive, got %s", *window)
	}
	if *dir == "" {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		cfg, err := config.Load(*cfgPath, os.Environ(), logger)
		if err != nil {
			printErrors(stderr, err)
			return auditScanFailed
		}
		*dir = cfg.Registrar.AuditRecordDir
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: *dir, Window: *window})
	if err != nil {
		fmt.Fprintf(stderr, "audit scan: cannot read the record store: %v\n", err)
		return auditScanFailed
	}
	if *asJSON {
		err = writeScanJSON(stdout, rep)
	} else {
		err = writeScanText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "audit scan: writing the report: %v\n", err)
		return auditScanFailed
	}
	if rep.Anomalies() {
		return auditScanAnomalies
	}
	return auditScanClean
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

func writeScanJSON(w io.Writer, rep *audit.Report) error {
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
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeScanText(w io.Writer, rep *audit.Report) error {
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
	if rep.Anomalies() {
		p.printf("\nresult: ANOMALIES FOUND\n")
	} else {
		p.printf("\nresult: clean\n")
	}
	return p.err
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
