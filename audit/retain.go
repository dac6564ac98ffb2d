package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Retention: the oldest generations beyond Options.MaxRetainedFiles are
// deleted, oldest first, each only after its rotated record (rotated.go)
// is written and fsynced in the active file, so that what a file held is
// never erased without a trace. A generation younger than
// Options.MinRetention is kept instead, and so is every newer one: the
// store then holds more generations than its budget allows, its capacity
// state is retention_held, and a mint's intent is refused
// (*RetentionHeldError) until the oldest ages out and the daemon tick
// (CapacityProbe.Probe) has it deleted.
//
// Retention runs where the write path is held: after a rotation, at Open,
// and for Retain, in the commit queue. Reading a generation to count it
// costs about what audit scan spends on it (the single-pass decoder and a
// SHA-256 of its bytes), once per deletion: BenchmarkTallyAFullGeneration
// measured 51 to 72 ms for a full 8 MiB generation (117 to 165 MB/s, three
// runs on an idle shared 2-core machine), which the appends queued behind
// that rotation wait once.
//
// A rotated record is a line of the store like any other: Marshal'd,
// bounded, and written by writeSync, the one place every line of the
// store is written (commit's lines and retention's alike), after the same
// checks (ensureActive, broken). A store that chains its lines (a sealed
// store: each line's MAC over the previous one, seal.go) chains it where
// writeSync writes, so the rotated record is in the chain, and in a sealed
// store it carries, as the optional subject key chain, the deleted file's
// last chain value, for a verifier to check the first line of the first
// file kept against it.

// RetentionHeldError is Store.Append's answer to a mint's intent while
// retention holds generations younger than Options.MinRetention past the
// budget: the intent is not written, and the registrar answers the mint
// RegistrarBusy, retryable after RetryAfter. It matches ErrRetentionHeld.
// Other records are written as usual.
type RetentionHeldError struct {
	// HeldFiles is how many generations retention keeps past
	// Options.MaxRetainedFiles.
	HeldFiles uint64
	// RetryAfter is how long until the oldest of them is older than
	// Options.MinRetention, at least a second.
	RetryAfter time.Duration
}

func (e *RetentionHeldError) Error() string {
	return fmt.Sprintf("audit: retention holds %d generation(s) younger than the minimum retention past the store's budget; mints are refused for %s", e.HeldFiles, e.RetryAfter)
}

// Is makes a *RetentionHeldError match ErrRetentionHeld.
func (e *RetentionHeldError) Is(target error) bool { return target == ErrRetentionHeld }

// ErrRetentionHeld matches *RetentionHeldError.
var ErrRetentionHeld = errors.New("audit: retention held past the budget")

// retentionState is what retention remembers between deletions; the
// write-path holder owns it.
type retentionState struct {
	rotation uint64 // the newest rotated record's rotation number, 0 before the first
	lastFile string // the file it named
	lastSHA  string // and that file's digest
}

// Retain runs retention now, in order with the appends queued before it:
// the daemon tick calls it (through CapacityProbe.Probe) once the oldest
// held generation has aged past Options.MinRetention. After Close it
// returns ErrClosed. Safe for concurrent use.
func (s *Store) Retain() error { return s.enqueue(entry{retain: true}) }

// retentionDue reports whether a held generation has aged past the
// minimum retention, so that Retain would delete it.
func (s *Store) retentionDue() bool {
	until := s.heldUntil.Load()
	return s.held.Load() > 0 && !s.now().Before(time.Unix(0, until))
}

// checkHeld is Append's first check: a mint's intent is refused while
// retention holds generations past the budget.
func (s *Store) checkHeld(r *Record) error {
	if r.Phase != PhaseIntent || r.Verb != vocab.Mint {
		return nil
	}
	n := s.held.Load()
	if n == 0 {
		return nil
	}
	wait := time.Unix(0, s.heldUntil.Load()).Sub(s.now())
	return &RetentionHeldError{HeldFiles: n, RetryAfter: max(wait.Round(time.Second), time.Second)}
}

// retain deletes the generations past the budget, oldest first, each after
// its rotated record, and notes how many it holds back for the minimum
// retention. A failure is logged and ends this round (the file stays: no
// deletion without its record); it never fails an append. The caller holds
// the write path.
func (s *Store) retain() {
	ctx := context.Background()
	// Each step deletes a generation or rotates a full active file (which
	// adds one): a bound that no legitimate round reaches.
	for step := 0; step < 4*int(s.maxRetained)+16; step++ {
		gens, err := s.generations()
		if err != nil {
			s.retainFailed(ctx, "", err)
			return
		}
		excess := len(gens) - int(s.maxRetained)
		if excess <= 0 {
			s.setHeld(0, time.Unix(0, 0)) // the epoch: UnixNano of the zero Time is undefined
			return
		}
		victim, next := gens[0], gens[1]
		if stamp, _, _ := parseGeneration(victim); s.minRetention > 0 && s.now().Sub(stamp) < s.minRetention {
			s.setHeld(uint64(excess), stamp.Add(s.minRetention))
			return
		}
		// Deleted, or the active file was full and rotated instead (false):
		// either way, look again.
		if _, err := s.retire(victim, next); err != nil {
			s.retainFailed(ctx, victim, err)
			return
		}
	}
	s.retainFailed(ctx, "", errors.New("retention did not settle; trying again at the next rotation"))
}

// retire deletes generation name, its rotated record first. It reports
// false, having rotated the active file instead, when the record did not
// fit in it. A file the newest rotated record already names, with the
// digest it recorded, is only removed again: its deletion was interrupted
// (a crash between the record and the unlink) or failed.
func (s *Store) retire(name, next string) (bool, error) {
	path := filepath.Join(s.dir, name)
	subj, err := tallyFile(path)
	if err != nil {
		return false, err
	}
	if name != s.ret.lastFile || subj.SHA256 != s.ret.lastSHA {
		subj.File, subj.Next, subj.Rotation = name, next, s.ret.rotation+1
		line, err := Marshal(&Record{Phase: PhaseAdmin, TS: s.now(), CallerIdentity: DaemonIdentity,
			Admin: &Admin{Action: ActionRotated, Rotated: subj}})
		if err != nil {
			return false, err
		}
		if err := s.ensureActive(); err != nil {
			return false, err
		}
		if s.broken != nil {
			return false, s.broken
		}
		if n := s.lineCost(line) + s.sealPending(); s.size+n > s.maxFile {
			if s.size == 0 { // only a test's tiny cap: never rotate an empty file
				return false, &TooLargeError{LineBytes: n, MaxFileBytes: s.maxFile}
			}
			return false, s.rotateFile()
		}
		if err := s.writeSync(line); err != nil {
			return false, err
		}
		s.ret = retentionState{rotation: subj.Rotation, lastFile: name, lastSHA: subj.SHA256}
		s.rotated.Add(1)
	}
	if err := s.h.remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("removing %s after its rotated record: %w", name, err)
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "audit retention deleted a generation after writing its rotated record",
		slog.String("file", name), slog.Uint64("rotation", s.ret.rotation), slog.Uint64("lines", subj.Lines), slog.String("sha256", subj.SHA256))
	return true, nil
}

// setHeld publishes how many generations retention holds back and when the
// oldest of them ages out (the Unix epoch when none is held: a reader that
// loaded held > 0 just before a release then answers the shortest wait,
// which is right, the hold being over).
func (s *Store) setHeld(n uint64, until time.Time) {
	if n > 0 && s.held.Load() == 0 {
		s.log.LogAttrs(context.Background(), slog.LevelError,
			"audit retention holds generations younger than audit_min_retention_seconds past the store's budget; mints are refused RegistrarBusy until the oldest ages out",
			slog.Uint64("held_files", n), slog.Time("until", until.UTC()), slog.Duration("min_retention", s.minRetention))
	}
	s.heldUntil.Store(until.UnixNano())
	s.held.Store(n)
}

func (s *Store) retainFailed(ctx context.Context, file string, err error) {
	s.retainFailures.Add(1)
	s.errLog.Log(ctx, "retention", slog.LevelError,
		"audit retention failed; the generation is kept (no deletion without its rotated record) and retention is tried again at the next rotation",
		slog.String("file", file), slog.Any("error", err))
}

// countKey is a rotated record's count key.
type countKey struct {
	identity string
	verb     vocab.Verb
	result   Result
}

// tally counts what a generation holds for its rotated record.
type tally struct {
	dec         lineDecoder
	counts      map[countKey]uint64
	others      [vocab.NumVerbs][NumResults + 1]uint64
	folded      uint64
	first, last time.Time
}

// tallyFile reads the generation at path (never following a symlink,
// regular files only) and returns its rotated subject: size, lines,
// digest, timestamps, counts, folded and, if the file is chained, its last
// chain value; the caller sets File, Next and Rotation. A line that does
// not decode is counted in lines and nowhere else.
func tallyFile(path string) (Rotated, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		return Rotated{}, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return Rotated{}, err
	} else if !st.Mode().IsRegular() {
		return Rotated{}, &UnsafeStoreError{Path: path, Problem: "is not a regular file"}
	}
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(f, h), MaxRecordBytes)
	t := tally{counts: make(map[countKey]uint64)}
	var subj Rotated
	for {
		chunk, err := br.ReadSlice('\n')
		subj.Bytes += uint64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			subj.Lines++ // longer than any record: counted, never decoded
			for errors.Is(err, bufio.ErrBufferFull) {
				chunk, err = br.ReadSlice('\n')
				subj.Bytes += uint64(len(chunk))
			}
			if err == nil {
				continue
			}
		} else if err == nil {
			subj.Lines++
			t.line(chunk)
			if _, c, ok := splitChained(chunk); ok {
				subj.Chain = c.hexString()
			}
			continue
		} else if err == io.EOF && len(chunk) > 0 {
			subj.Lines++ // a torn final line
		}
		if err == io.EOF {
			break
		}
		return Rotated{}, err
	}
	subj.SHA256 = hex.EncodeToString(h.Sum(nil))
	t.fill(&subj)
	return subj, nil
}

// line counts one whole line.
func (t *tally) line(chunk []byte) {
	r, err := t.dec.decode(chunk)
	if err != nil {
		return
	}
	if t.first.IsZero() {
		t.first = r.TS
	}
	t.last = r.TS
	switch r.Phase {
	case PhaseOutcome:
		t.add(r.CallerIdentity, r.Verb, ResultOf(r.Outcome.Class), 1)
	case PhaseLimited:
		if !r.Shadow {
			t.add(r.CallerIdentity, r.Verb, ResultLimited, r.Count)
		}
	case PhaseAdmin:
		if r.Admin.Action != ActionRotated {
			return
		}
		// A rotated record of an earlier deletion: carried on.
		t.folded = addSat(t.folded, addSat(r.Admin.Folded, 1))
		for _, c := range r.Admin.Counts {
			t.add(c.Identity, c.Verb, c.Result, c.Invocations)
		}
		for _, c := range r.Admin.Others {
			t.others[c.Verb][c.Result] = addSat(t.others[c.Verb][c.Result], c.Invocations)
		}
	case PhaseIntent:
	}
}

// add counts n invocations under a key, or under others past
// MaxRotatedKeys keys.
func (t *tally) add(identity string, verb vocab.Verb, result Result, n uint64) {
	k := countKey{identity, verb, result}
	if v, ok := t.counts[k]; ok {
		t.counts[k] = addSat(v, n)
		return
	}
	if len(t.counts) >= MaxRotatedKeys {
		t.others[verb][result] = addSat(t.others[verb][result], n)
		return
	}
	k.identity = strings.Clone(identity) // a slice of the decoder's buffer
	t.counts[k] = n
}

// fill sets the subject's counts, others, folded and timestamps.
func (t *tally) fill(s *Rotated) {
	s.Folded, s.FirstTS, s.LastTS = t.folded, t.first, t.last
	for k, n := range t.counts {
		s.Counts = append(s.Counts, InvocationCount{Identity: k.identity, Verb: k.verb, Result: k.result, Invocations: n})
	}
	for v := range vocab.Verb(vocab.NumVerbs) {
		for r := Result(1); r.Valid(); r++ {
			if n := t.others[v][r]; n > 0 {
				s.Others = append(s.Others, InvocationCount{Verb: v, Result: r, Invocations: n})
			}
		}
	}
}

// recoverRetention reads the store, newest file first, for its newest
// rotated record, so that a restarted store numbers its next deletion one
// past it. Only admin lines naming the rotated action are decoded. A file
// that cannot be read is skipped (the scan reports it).
func (s *Store) recoverRetention(gens []string) {
	names := append([]string{ActiveFileName}, reversed(gens)...)
	prefix := []byte(`{"record_version":1,"phase":"admin"`)
	for _, name := range names {
		f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_RDONLY|oNoFollow|oNonBlock, 0)
		if err != nil {
			continue
		}
		br := bufio.NewReaderSize(f, MaxRecordBytes)
		found := false
		for {
			chunk, err := br.ReadSlice('\n')
			if err == nil && bytes.HasPrefix(chunk, prefix) && bytes.Contains(chunk, []byte(`"action":"rotated"`)) {
				if r, derr := Unmarshal(chunk); derr == nil && r.Admin.Action == ActionRotated && r.Admin.Rotation >= s.ret.rotation {
					s.ret = retentionState{rotation: r.Admin.Rotation, lastFile: r.Admin.File, lastSHA: r.Admin.SHA256}
					found = true
				}
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				break
			}
		}
		f.Close()
		if found {
			return // rotated records are written in order: no newer file holds one
		}
	}
}

func reversed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[len(names)-1-i] = n
	}
	return out
}
