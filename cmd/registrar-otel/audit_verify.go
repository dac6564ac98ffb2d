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
	"time"

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
	synopsis: "[--dir DIR | --config FILE] [--key KEY [--heads FILE|-]] [--json]",
	what: `Verifies the audit record store (read-only, offline; safe while the
daemon runs): its retention trail, and with --key its seal.

The retention trail. Before retention deletes a generation the
daemon writes a rotated record of it: its name, size, lines, SHA-256 and
the invocations it held per caller identity. This checks that the
rotated records the store keeps account for every deletion (their
rotation numbers, with the records each carries on, add up to the
newest; each names the generation its predecessor said was next; the
newest names the oldest generation present as next), and that each
deleted file is really gone: one still present is reported with whether
its bytes are the ones recorded. It names the first problem by file and
line. Lines that are not rotated records are audit scan's to check.

The seal (--key, the verification key audit seal init printed). Every line
of a sealed store carries a chain value, a MAC under its epoch's key of the
previous line's value and its own bytes; each epoch ends with a sealed
record, and the key evolves one way. This derives each line's key from
KEY and its epoch from the seals before it, and names the first line that
does not follow: a line edited, removed, replayed, reordered or inserted,
a seal removed or made with a later key, records written without a chain
value after sealing began. The lines after the last seal are not sealed
yet (the key on the host could rewrite them): they are counted apart.

A chain cannot see its own tail cut. --heads reads the daemon's "audit seal
head" log lines (the daemon's JSON or text log, journalctl -o cat or -o
json output; - for stdin), which the journal keeps out of the daemon's
reach: the line each names must be there with the chain value it had,
which finds a truncated tail or a deleted newest generation.

Exit status: 0 when the store verifies, 1 when a problem is found, 2 on a
usage error, an unreadable store, key or heads.`,
	examples: []string{
		"registrar-otel audit verify",
		"registrar-otel audit verify --config /etc/registrar-otel/registrar.toml --json",
		"journalctl -u registrar-otel -o cat | registrar-otel audit verify --key \"$(cat key)\" --heads -",
	},
}

// runAuditVerify implements `registrar-otel audit verify [--dir D]
// [--json]` (args are what follows "audit verify").
func runAuditVerify(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit verify")
	dir := flags.String("dir", "", "audit record `directory` (default: registrar.audit_record_dir of --config, or of the embedded defaults: var/audit)")
	cfgPath := flags.String("config", "", "the daemon's configuration `file`, to find registrar.audit_record_dir (default: the embedded defaults, as make run)")
	asJSON := flags.Bool("json", false, "print one JSON object instead of text (schema: docs, operations, --json schemas)")
	keyText := flags.String("key", "", "the verification `key` audit seal init printed (64 hex digits): also verify the seal of every record")
	headsPath := flags.String("heads", "", "with --key, a `file` of the daemon's log lines (- for stdin) whose \""+audit.HeadMessage+"\" lines the store must still hold")
	if code, ok := parseFlags(flags, auditVerifyUsage, args, stdout, stderr); !ok {
		if code == exitUsage {
			return auditVerifyFailed
		}
		return code
	}
	if flags.NArg() > 0 {
		return usageError(stderr, "audit verify", "unexpected argument %q (the store is named with --dir DIR)", flags.Arg(0))
	}
	var key *[audit.SealKeyBytes]byte
	if flagSet(flags, "key") {
		k, err := audit.ParseVerificationKey(*keyText)
		if err != nil {
			return usageError(stderr, "audit verify", "--key: %v", err)
		}
		key = &k
		defer clear(key[:])
	}
	var heads *audit.Heads
	if *headsPath != "" {
		if key == nil {
			return usageError(stderr, "audit verify", "--heads needs --key: the heads are checked against the sealed chain")
		}
		var err error
		if heads, err = readHeads(*headsPath, stdinReader); err != nil {
			fmt.Fprintf(stderr, "audit verify: --heads %s: %v\n", *headsPath, err)
			return auditVerifyFailed
		}
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
	rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: *dir, Key: key, Heads: heads})
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
	// Seal is the seal's verification, null without --key.
	Seal *verifySealJSON `json:"seal"`
}

// verifySealJSON is the seal's part of --json.
type verifySealJSON struct {
	KeyID          string `json:"key_id"`
	ChainStart     string `json:"chain_start"`
	ChainedLines   uint64 `json:"chained_lines"`
	Seals          uint64 `json:"seals"`
	Epoch          uint64 `json:"epoch"`
	LastSeal       string `json:"last_seal"` // "" without a seal
	UnsealedBefore uint64 `json:"unsealed_before"`
	TornLines      uint64 `json:"torn_lines"`
	UnsealedTail   uint64 `json:"unsealed_tail"`
	HeadsRead      uint64 `json:"heads_read"`
	HeadsChecked   uint64 `json:"heads_checked"`
	// NewestHead is the newest head given, null without one.
	NewestHead *verifyHeadJSON `json:"newest_head"`
}

type verifyHeadJSON struct {
	Time       string `json:"time"` // "" when the line had none
	Generation int    `json:"generation"`
	Line       uint64 `json:"line"`
	Epoch      uint64 `json:"epoch"`
	Chain      string `json:"chain"`
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
	if sv := rep.Seal; sv != nil {
		out.Seal = &verifySealJSON{
			KeyID: sv.KeyID, ChainStart: sv.ChainStart, ChainedLines: sv.ChainedLines, Seals: sv.Seals, Epoch: sv.Epoch,
			LastSeal: jsonTime(sv.LastSeal), UnsealedBefore: sv.UnsealedBefore, TornLines: sv.TornLines, UnsealedTail: sv.UnsealedTail,
			HeadsRead: sv.HeadsRead, HeadsChecked: sv.HeadsChecked,
		}
		if h := sv.NewestHead; h.Chain != "" {
			out.Seal.NewestHead = &verifyHeadJSON{Time: jsonTime(h.Time), Generation: h.Generation, Line: h.Line, Epoch: h.Epoch, Chain: h.Chain}
		}
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
	if sv := rep.Seal; sv != nil {
		p.printf("\nseal (key id %s):\n", sv.KeyID)
		start := sv.ChainStart
		if start == "" {
			start = "none found"
		}
		p.printf("  chain start: %s\n", start)
		p.printf("  chained lines: %d, seals: %d, epoch: %d", sv.ChainedLines, sv.Seals, sv.Epoch)
		if !sv.LastSeal.IsZero() {
			p.printf(", last seal %s", sv.LastSeal.UTC().Format(audit.TimeLayout))
		}
		p.printf("\n  not sealed yet (after the last seal): %d; written before sealing began: %d; torn writes: %d\n", sv.UnsealedTail, sv.UnsealedBefore, sv.TornLines)
		if sv.HeadsRead > 0 {
			p.printf("  heads: %d read, %d checked against the store", sv.HeadsRead, sv.HeadsChecked)
			if h := sv.NewestHead; !h.Time.IsZero() {
				p.printf("; newest %s (generation %d, line %d)", h.Time.UTC().Format(audit.TimeLayout), h.Generation, h.Line)
			}
			p.printf("\n")
		} else {
			p.printf("  heads: none given (a cut tail or a deleted newest generation is not looked for)\n")
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

// jsonTime is t in the store's spelling, "" for the zero time.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(audit.TimeLayout)
}

// readHeads reads the heads from the file at path, or from in for "-".
func readHeads(path string, in io.Reader) (*audit.Heads, error) {
	if path == "-" {
		return audit.ReadHeads(in)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return audit.ReadHeads(f)
}

// stdinReader is what --heads - reads: the process's stdin, a test's
// reader.
var stdinReader io.Reader = os.Stdin
