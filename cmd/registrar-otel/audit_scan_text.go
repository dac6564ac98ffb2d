package main

// `audit scan`'s text report, for an operator at a terminal.

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

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
	for b := range vocab.Bucket(vocab.NumBuckets) {
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
		for b := range vocab.Bucket(vocab.NumBuckets) {
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
