package main

// `audit verify`: the retention trail of the record store, checked
// offline (audit.Verify), as text or --json, with audit scan's exit
// statuses.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
)

// Exit statuses of `audit verify`, audit scan's.
const (
	auditVerifyOK       = exitOK      // the trail is whole
	auditVerifyProblems = exitFailure // a problem found
	auditVerifyFailed   = exitUsage   // usage error, or the store could not be read
)

var auditVerifyUsage = usageSpec{
	name:     "audit verify",
	synopsis: "[--dir DIR | --config FILE] [--json]",
	what: `Verifies the audit record store's retention trail (read-only, offline;
safe while the daemon runs). Before retention deletes a generation the
daemon writes a rotated record of it: its name, size, lines, SHA-256 and
the invocations it held per caller identity. This checks that the
rotated records the store keeps account for every deletion (their
rotation numbers, with the records each carries on, add up to the
newest; each names the generation its predecessor said was next; the
newest names the oldest generation present as next), and that each
deleted file is really gone: one still present is reported with whether
its bytes are the ones recorded. It names the first problem by file and
line. Lines that are not rotated records are audit scan's to check.

Exit status: 0 when the trail is whole, 1 when a problem is found, 2 on a
usage error or an unreadable store.`,
	examples: []string{
		"registrar-otel audit verify",
		"registrar-otel audit verify --config /etc/registrar-otel/registrar.toml --json",
	},
}

// runAuditVerify implements `registrar-otel audit verify [--dir D]
// [--json]` (args are what follows "audit verify").
func runAuditVerify(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit verify")
	dir := flags.String("dir", "", "audit record `directory` (default: registrar.audit_record_dir of --config, or of the embedded defaults: var/audit)")
	cfgPath := flags.String("config", "", "the daemon's configuration `file`, to find registrar.audit_record_dir (default: the embedded defaults, as make run)")
	asJSON := flags.Bool("json", false, "print one JSON object instead of text (schema: docs, operations, --json schemas)")
	if code, ok := parseFlags(flags, auditVerifyUsage, args, stdout, stderr); !ok {
		if code == exitUsage {
			return auditVerifyFailed
		}
		return code
	}
	if flags.NArg() > 0 {
		return usageError(stderr, "audit verify", "unexpected argument %q (the store is named with --dir DIR)", flags.Arg(0))
	}
	dirFromDefault := false
	if *dir == "" {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		cfg, err := loadConfig(*cfgPath, os.Environ(), logger)
		if err != nil {
			printErrors(stderr, err)
			return auditVerifyFailed
		}
		*dir = cfg.Registrar.AuditRecordDir
		dirFromDefault = *cfgPath == "" && *dir == config.Default().Registrar.AuditRecordDir
	}
	rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: *dir})
	if err != nil {
		cause := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause = pe.Err
		}
		fmt.Fprintf(stderr, "audit verify: cannot read the record store at %s: %v\n", describePath(*dir, dirFromDefault), cause)
		if dirFromDefault {
			fmt.Fprintln(stderr, "  point at the daemon's store with --dir DIR, or at its configuration with --config FILE")
		}
		return auditVerifyFailed
	}
	if *asJSON {
		err = writeVerifyJSON(stdout, rep)
	} else {
		err = writeVerifyText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "audit verify: writing the report: %v\n", err)
		return auditVerifyFailed
	}
	if !rep.OK() {
		return auditVerifyProblems
	}
	return auditVerifyOK
}

// verifyJSON is the stable --json shape. Lists are always arrays.
type verifyJSON struct {
	Dir            string              `json:"dir"`
	Verified       bool                `json:"verified"`
	Files          []string            `json:"files"`
	RotatedRecords uint64              `json:"rotated_records"`
	NewestRotation uint64              `json:"newest_rotation"`
	Deleted        []verifyDeletedJSON `json:"deleted"`
	ProblemCount   uint64              `json:"problem_count"`
	// FirstProblem is Problems[0], null when there is none.
	FirstProblem *verifyProblemJSON  `json:"first_problem"`
	Problems     []verifyProblemJSON `json:"problems"`
}

type verifyDeletedJSON struct {
	File       string `json:"file"`
	Rotation   uint64 `json:"rotation"`
	SHA256     string `json:"sha256"`
	RecordFile string `json:"record_file"`
	RecordLine uint64 `json:"record_line"`
}

type verifyProblemJSON struct {
	Kind   audit.VerifyProblemKind `json:"kind"`
	File   string                  `json:"file"`
	Line   uint64                  `json:"line"`
	Detail string                  `json:"detail"`
}

func writeVerifyJSON(w io.Writer, rep *audit.VerifyReport) error {
	out := verifyJSON{
		Dir: rep.Dir, Verified: rep.OK(), Files: append([]string{}, rep.Files...),
		RotatedRecords: rep.RotatedRecords, NewestRotation: rep.NewestRotation,
		Deleted: []verifyDeletedJSON{}, ProblemCount: rep.ProblemCount, Problems: []verifyProblemJSON{},
	}
	for _, d := range rep.Deleted {
		out.Deleted = append(out.Deleted, verifyDeletedJSON(d))
	}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, verifyProblemJSON(p))
	}
	if len(out.Problems) > 0 {
		out.FirstProblem = &out.Problems[0]
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeVerifyText(w io.Writer, rep *audit.VerifyReport) error {
	p := &errWriter{w: w}
	p.printf("audit verify of %s: %d files read, %d rotated records, newest rotation %d\n", rep.Dir, len(rep.Files), rep.RotatedRecords, rep.NewestRotation)
	if n := len(rep.Deleted); n > 0 {
		p.printf("\ndeleted by retention (the newest %d, oldest first):\n", n)
		for _, d := range rep.Deleted {
			p.printf("  rotation %d: %s, sha256 %s (recorded at %s:%d)\n", d.Rotation, d.File, d.SHA256, d.RecordFile, d.RecordLine)
		}
	}
	p.printf("\nproblems: %d\n", rep.ProblemCount)
	for _, pr := range rep.Problems {
		p.printf("  %s %s: %s\n", pr.Kind, location(pr.File, pr.Line), pr.Detail)
	}
	if n := rep.ProblemCount; n > uint64(len(rep.Problems)) {
		p.printf("  ... and %d more\n", n-uint64(len(rep.Problems)))
	}
	if rep.OK() {
		p.printf("\nresult: verified\n")
	} else {
		first := rep.Problems[0]
		p.printf("\nresult: FAILED: %s at %s\n", first.Kind, location(first.File, first.Line))
	}
	return p.err
}

// location is file:line, or the file alone for a problem of a whole file.
func location(file string, line uint64) string {
	if line == 0 {
		return file
	}
	return fmt.Sprintf("%s:%d", file, line)
}
