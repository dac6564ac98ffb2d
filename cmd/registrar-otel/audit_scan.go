package main

// `audit scan`: its flags, the scan, and the exit status. The report's two
// forms are in audit_scan_json.go and audit_scan_text.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/vocab"
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
	synopsis: "[--dir DIR [--dir DIR2 ... [--clock-skew 2s]] | --config FILE] [--window 720h] [--by identity [--top N]] [--fail-on-limited N] [--json]",
	what: `Scans the audit record store (read-only; safe while the daemon runs) for
intents without an outcome (older than a 60 s settle grace), malformed lines
and directory anomalies (records that stop without an active file, a gap in
the generation numbers, an unreadable store file, the directory or a file
of it owned by neither root nor the store's owner, or group- or
world-writable), lists every file it did not read with the reason, and
summarises the limited (counted) records per bucket, the shadow records
(calls a caller policy's shadow sizes would have limited, none of which
was) apart from them, both per caller policy, and lists the admin records
(who reset which identity's limits). It counts the recorded
caller-authorization refusals by reason (no_policy, out_of_scope split by
scope, not_owner: CallerNotPermitted; instance_ceiling:
InstanceCeilingReached); a refusal limited by predecision_refusal writes no
outcome record, so it is only in the limited counts. With --by identity it
also lists the limited records per caller identity and bucket, the most
limited invocations first (who is flooding), and the refusals per caller
identity and reason, the most first (who is asking for what it may not
have): the --top N rows of each, 0 for all. It also lists each caller
identity's invocations by verb and outcome (the outcome records by class,
and its limited ones), folding in the counts that retention's rotated
records carry for the files it deleted, so what a caller did shows
whether or not its records' files still exist. The store's owner is the
uid running the scan, or, run as root, the directory's owner.

Given --dir more than once (the stores of registrars sharing one OpenBao
cluster), it scans each store as above and then compares them: every
success outcome says what state its registration was in and left it in,
and the stores together must admit one history (answers closer than
--clock-skew may have taken effect in either order). It reports
duplicate_first_mint, remint_while_absent, absent_while_present,
duplicate_removal, and unsettled_intent (an intent without an outcome
after which no store holds an answer for its registration); each is an
anomaly. --fail-on-limited then counts the limited invocations of all
the stores.

Exit status: 0 when the store is clean, 1 when anomalies are found, 2 on a
usage error or an unreadable store, 4 when --fail-on-limited N is given and
more than N invocations were limited in the window (anomalies, 1, take
precedence; shadow records never count): counted records are evidence,
not anomalies, so a cron job learns of a flood only this way.`,
	examples: []string{
		"registrar-otel audit scan",
		"registrar-otel audit scan --config /etc/registrar-otel/registrar.toml --window 24h --json",
		"registrar-otel audit scan --by identity --top 5 --fail-on-limited 1000",
		"registrar-otel audit scan --dir /srv/registrar-a/audit --dir /srv/registrar-b/audit",
	},
}

// runAuditScan implements `registrar-otel audit scan [--dir D] [--window
// 720h] [--json]` (args are what follows "audit scan"). It scans the record
// store read-only and prints a report: text by default, one JSON object
// with --json. It returns 0 when the store is clean, 1 when it found
// anomalies, and 2 on a usage error or an unreadable store.
func runAuditScan(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit scan")
	var dirs dirList
	flags.Var(&dirs, "dir", "audit record `directory` (default: registrar.audit_record_dir of --config, or of the embedded defaults: var/audit); repeat it for the stores of several registrars sharing one registry, to compare them")
	cfgPath := flags.String("config", "", "the daemon's configuration `file`, to find registrar.audit_record_dir (default: the embedded defaults, as make run)")
	window := flags.Duration("window", audit.DefaultScanWindow, "lookback `duration`: older records are ignored")
	skew := flags.Duration("clock-skew", audit.DefaultClockSkew, "with several --dir, how far apart the registrars' clocks may be: answers closer than this `duration` may have taken effect in either order")
	asJSON := flags.Bool("json", false, "print one JSON object instead of text (schema: docs, operations, --json schemas)")
	by := flags.String("by", "bucket", "`breakdown` of the limited records and refusals: bucket (the totals) or identity (also per caller identity)")
	top := flags.Uint("top", defaultScanTop, "with --by identity, the `number` of rows shown of each per-identity list, most first; 0 shows all")
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
	if *skew <= 0 {
		return flagValueError(stderr, auditScanUsage, "clock-skew", skew.String(), "a positive duration", "--clock-skew 5s")
	}
	if flagSet(flags, "clock-skew") && len(dirs) < 2 {
		return usageError(stderr, "audit scan", "--clock-skew applies to several stores only (for example: --dir A --dir B --clock-skew 5s)")
	}
	if len(dirs) > 1 {
		return runAuditScanStores(dirs, *window, *skew, *asJSON, *by == "identity", *top, *failOn, flagSet(flags, "fail-on-limited"), stdout, stderr)
	}
	failOnSet := flagSet(flags, "fail-on-limited")
	dirFromDefault := false
	dir := new(string)
	if len(dirs) == 1 {
		*dir = dirs[0]
	}
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

// shown is the limited identity rows printed and how many were left out.
func (v scanView) shown() ([]audit.IdentityLimited, int) {
	return topRows(v.rep.LimitedByIdentity, v.top)
}

// shownInvocations is the invocation rows printed and how many were
// left out.
func (v scanView) shownInvocations() ([]audit.IdentityInvocations, int) {
	return topRows(v.rep.InvocationsByIdentity, v.top)
}

// shownRefused is the refused identity rows printed and how many were
// left out.
func (v scanView) shownRefused() ([]audit.IdentityRefused, int) {
	return topRows(v.rep.RefusedByIdentity, v.top)
}

// topRows is the first top rows (all when top is 0) and how many are left
// out.
func topRows[T any](rows []T, top uint) ([]T, int) {
	if top == 0 || uint(len(rows)) <= top {
		return rows, 0
	}
	return rows[:top], len(rows) - int(top)
}

// scopeName is how both outputs spell a refusal's scope: the scope an
// out_of_scope record's detail names, "unnamed" when it names none, and ""
// for the other reasons.
func scopeName(reason vocab.Reason, scope vocab.Scope) string {
	switch {
	case reason != vocab.ReasonOutOfScope:
		return ""
	case scope.Valid():
		return scope.String()
	}
	return scopeUnnamed
}

// scopeUnnamed spells an out_of_scope refusal whose detail names no
// scope.
const scopeUnnamed = "unnamed"

// totalLimited is how many invocations were limited in the window, both
// buckets, saturating. Shadow records are not limited invocations: they
// are never in it.
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
