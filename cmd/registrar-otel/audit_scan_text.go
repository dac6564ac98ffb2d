package main

// `audit scan`'s text report, for an operator at a terminal.

import (
	"fmt"
	"io"
	"maps"
	"math"
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
	p.printf("records in window: %d intent, %d outcome, %d limited, %d admin\n",
		rep.Records[audit.PhaseIntent-1], rep.Records[audit.PhaseOutcome-1], rep.Records[audit.PhaseLimited-1], rep.Records[audit.PhaseAdmin-1])

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
	writeShadowAndPolicies(p, rep)
	writeAdmin(p, rep)
	p.printf("\nevidence gaps (counted records written over %s after their window_end: recovered after an unclean stop): %d records\n",
		audit.LateLimitedAfter, rep.LateLimitedRecords)
	for _, g := range rep.Gaps {
		p.printf("  %s:%d from %s to %s: %d records, %d invocations recovered; limited invocations in between may be uncounted\n",
			g.File, g.Line, g.From.UTC().Format(audit.TimeLayout), g.To.UTC().Format(audit.TimeLayout), g.Records, g.Count)
	}
	writeRefused(p, rep)
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
		writeRefusedByIdentity(p, v)
		writeInvocationsByIdentity(p, v)
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

// writeRefused prints the recorded caller-authorization refusals per
// reason, every reason (0 included), out_of_scope's split by scope.
func writeRefused(p *errWriter, rep *audit.Report) {
	p.printf("\nrefused by caller authorization (CallerNotPermitted, InstanceCeilingReached; recorded refusals only, limited ones are under limited):\n")
	for _, r := range audit.AuthorizationReasons {
		p.printf("  %-20s %d records", r, rep.Refused[r])
		if r == vocab.ReasonOutOfScope {
			p.printf(" (")
			for sc := vocab.ScopeVerb; sc.Valid(); sc++ {
				p.printf("%s %d, ", sc, rep.RefusedOutOfScope[sc])
			}
			p.printf("%s %d)", scopeUnnamed, rep.RefusedOutOfScope[0])
		}
		p.printf("\n")
	}
}

// writeRefusedByIdentity prints the refusals per (caller identity,
// reason, scope), the most first, and the remainder past the scan's
// bound.
func writeRefusedByIdentity(p *errWriter, v scanView) {
	rep := v.rep
	rows, omitted := v.shownRefused()
	p.printf("\nrefused by caller identity (%d of %d, most refusals first):\n", len(rows), len(rep.RefusedByIdentity))
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  caller_identity\treason\tscope\trecords")
	scope := func(r vocab.Reason, sc vocab.Scope) string {
		if s := scopeName(r, sc); s != "" {
			return s
		}
		return "-"
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", printable(r.CallerIdentity), r.Reason, scope(r.Reason, r.Scope), r.Records)
	}
	for _, r := range audit.AuthorizationReasons {
		if n := rep.RefusedOtherIdentities[r]; n > 0 {
			fmt.Fprintf(tw, "  (identities past the first %d)\t%s\t-\t%d\n", audit.MaxScanIdentities, r, n)
		}
	}
	tw.Flush()
	p.printf("%s", buf.String())
	if omitted > 0 {
		p.printf("  ... and %d more (--top 0 shows all)\n", omitted)
	}
}

// writeInvocationsByIdentity prints every caller identity's invocations
// by verb and outcome, its limited ones among them, the counts of the
// files retention deleted folded in, and the remainder past the scan's
// bound.
func writeInvocationsByIdentity(p *errWriter, v scanView) {
	rep := v.rep
	rows, omitted := v.shownInvocations()
	p.printf("\ninvocations by caller identity (%d of %d rows, the identities with the most first; of deleted files: counted by the rotated records retention left of them):\n",
		len(rows), len(rep.InvocationsByIdentity))
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  caller_identity\tverb\toutcome\tinvocations\tof deleted files")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", printable(r.CallerIdentity), r.Verb, r.Result, r.Invocations, r.Rotated)
	}
	forOtherInvocations(rep, func(verb vocab.Verb, res audit.Result, t audit.InvocationTotals) {
		fmt.Fprintf(tw, "  (identities not named)\t%s\t%s\t%d\t%d\n", verb, res, t.Invocations, t.Rotated)
	})
	tw.Flush()
	p.printf("%s", buf.String())
	if omitted > 0 {
		p.printf("  ... and %d more (--top 0 shows all)\n", omitted)
	}
}

// writeShadowAndPolicies prints the shadow totals, apart from the limited
// ones, and the counted records per caller policy: only when a record has
// a shadow or a policy other than the default, so the report of a store
// without caller policies is what it always was.
func writeShadowAndPolicies(p *errWriter, rep *audit.Report) {
	var shadow uint64
	for _, s := range rep.ShadowLimited {
		shadow += s.Records
	}
	if shadow > 0 {
		p.printf("\nshadow (counted records of calls their policy's shadow sizes would have limited; none was limited):\n")
		for b := range vocab.Bucket(vocab.NumBuckets) {
			s := rep.ShadowLimited[b]
			p.printf("  %-20s %d records, %d invocations\n", b, s.Records, s.Count)
		}
	}
	policies := false
	for _, r := range rep.ByPolicy {
		policies = policies || r.Shadow || r.Policy != audit.DefaultPolicy
	}
	if !policies {
		return
	}
	p.printf("\ncounted records by caller policy (most invocations first):\n")
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  policy\tbucket\tkind\trecords\tinvocations")
	kind := func(shadow bool) string {
		if shadow {
			return "shadow"
		}
		return "limited"
	}
	for _, r := range rep.ByPolicy {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", printable(r.Policy), r.Bucket, kind(r.Shadow), r.Records, r.Count)
	}
	for shadow, byBucket := range rep.OtherPolicies {
		for b := range vocab.Bucket(vocab.NumBuckets) {
			if o := byBucket[b]; o.Records > 0 {
				fmt.Fprintf(tw, "  (policies past the first %d keys)\t%s\t%s\t%d\t%d\n", audit.MaxScanPolicyKeys, b, kind(shadow == 1), o.Records, o.Count)
			}
		}
	}
	tw.Flush()
	p.printf("%s", buf.String())
}

// writeAdmin prints the admin records (actions on the daemon's own
// state): their count by action and the first of them, who did what to
// whom. Nothing when there are none.
func writeAdmin(p *errWriter, rep *audit.Report) {
	var n uint64
	for _, c := range rep.Admin {
		n += c
	}
	if n == 0 {
		return
	}
	p.printf("\nadmin (actions on the daemon's own state): %d records\n", n)
	for a := audit.Action(1); int(a) <= audit.NumActions; a++ {
		if rep.Admin[a] > 0 {
			p.printf("  %-20s %d\n", a, rep.Admin[a])
		}
	}
	for _, e := range rep.AdminRecords {
		p.printf("  %s:%d %s %s by %s: %s\n", e.File, e.Line, e.TS.UTC().Format(audit.TimeLayout), e.Admin.Action, printable(e.CallerIdentity), subjectText(e.Admin))
	}
	if n > uint64(len(rep.AdminRecords)) {
		p.printf("  ... and %d more\n", n-uint64(len(rep.AdminRecords)))
	}
}

// subjectText is an admin record's subject on one line.
func subjectText(a audit.Admin) string {
	if a.Action == audit.ActionRotated {
		r := a.Rotated
		var invocations uint64
		for _, c := range append(slices.Clip(r.Counts), r.Others...) {
			if invocations > math.MaxUint64-c.Invocations {
				invocations = math.MaxUint64 // saturating
			} else {
				invocations += c.Invocations
			}
		}
		return fmt.Sprintf("file %s deleted (%d lines, %d bytes, sha256 %s), next %s, rotation %d folding %d, %d invocations counted (%d identity keys named)",
			r.File, r.Lines, r.Bytes, r.SHA256, r.Next, r.Rotation, r.Folded, invocations, len(r.Counts))
	}
	if a.Action == audit.ActionSealed {
		return fmt.Sprintf("epoch %d closed (%s), key id %s", a.Epoch, a.Reason, a.KeyID)
	}
	var parts []string
	if a.Identity != "" {
		parts = append(parts, "identity "+printable(a.Identity))
	}
	names := func(vs []string) string { return strings.Join(vs, ",") }
	if len(a.Verbs) > 0 {
		s := subjectJSON(a)
		parts = append(parts, "verbs "+names(s.Verbs))
	}
	if len(a.Buckets) > 0 {
		s := subjectJSON(a)
		parts = append(parts, "buckets "+names(s.Buckets))
	}
	return strings.Join(parts, ", ")
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
