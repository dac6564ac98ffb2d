package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// Verify checks the store's retention trail, offline and read-only: that
// the rotated records the store keeps account for every generation
// retention deleted, and that each deleted file is really gone.
//
// It reads every generation and the active file (no window: the trail is
// as old as the store), decoding only the rotated records, and reports, in
// the order of the files and lines they concern:
//
//   - VerifyDeletedFilePresent: a file a rotated record says was deleted
//     is there, with the bytes it had (kept, or put back) or with others;
//   - VerifyRotationDuplicate: two rotated records carry one rotation
//     number (a record replayed);
//   - VerifyRotatedRecordMissing: the rotated records present, with the
//     records each carries on (folded), do not add up to the newest
//     rotation number: a rotated record was removed (or edited);
//   - VerifyChainBroken: a rotated record does not name the generation
//     its predecessor said was next;
//   - VerifyUnrecordedDeletion: the generation the newest rotated record
//     says was next is gone and no record names it, or, with no rotated
//     record at all, generations before the oldest present one are gone;
//   - VerifyUnexpectedGeneration: a generation older than the newest
//     deletion's next is present and no rotated record names it;
//   - VerifyUnreadableFile: a store file could not be read, or a store
//     name holds something other than a regular file (a symlink, a
//     directory, a FIFO), which is not read.
//
// It returns an error only when the store cannot be read at all (missing,
// unreadable or symlinked directory) or ctx is done. Verify never follows
// a symlink, never holds more than one line of a file in memory, and
// keeps one small entry per rotated record (at most MaxVerifyRotated).
// It holds no shared state: a daemon appending meanwhile is safe, though
// a deletion racing the read may be reported.
//
// With a key (VerifyOptions.Key) it also verifies a sealed store's chain
// over every line, in the same walk, its findings added to the same report
// (sealverify.go), and with the daemon's logged heads the store's tail.
func Verify(ctx context.Context, opts VerifyOptions) (*VerifyReport, error) {
	if errPlatform != nil {
		return nil, errPlatform
	}
	if opts.Dir == "" {
		return nil, errors.New("audit: verify: no directory given")
	}
	fi, err := os.Lstat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("audit: verify: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &UnsafeStoreError{Path: opts.Dir, Problem: "is a symlink"}
	}
	if !fi.IsDir() {
		return nil, &UnsafeStoreError{Path: opts.Dir, Problem: "is not a directory"}
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("audit: verify: %w", err)
	}
	v := &verifier{rep: &VerifyReport{Dir: opts.Dir}, dir: opts.Dir, present: map[string]bool{}, order: map[string]int{}}
	var gens []string
	active := false
	for _, e := range entries {
		name := e.Name()
		_, _, isGen := parseGeneration(name)
		if !e.Type().IsRegular() {
			if isGen || name == ActiveFileName {
				// A store name on something else: what the store wrote
				// there is not what is there, and it is not read.
				v.problem(VerifyUnreadableFile, name, 0, "is "+privdir.FileKind(e.Type())+", not a regular file: not read")
			}
			continue
		}
		if isGen {
			gens = append(gens, name)
			v.present[name] = true
		} else if name == ActiveFileName {
			active = true
		}
	}
	v.gens = gens
	files := slices.Clone(gens)
	if active {
		files = append(files, ActiveFileName)
	}
	if opts.Key != nil {
		v.cv = newChainVerifier(v, opts.Key, opts.Heads)
		v.rep.Seal = v.cv.rep
		if len(files) > 0 {
			v.cv.firstFile = files[0]
		}
		v.cv.activeGen = 1
		if n := len(gens); n > 0 {
			_, seq, _ := parseGeneration(gens[n-1])
			v.cv.activeGen = (seq + 1) % (maxSequence + 1)
			_, v.cv.heads.oldest, _ = parseGeneration(gens[0])
		}
	}
	for i, name := range files {
		v.order[name] = i
		if err := v.file(ctx, name); err != nil {
			return nil, err
		}
	}
	v.check()
	return v.rep, nil
}

// VerifyOptions configures Verify.
type VerifyOptions struct {
	// Dir is the record directory; required.
	Dir string
	// Key, if not nil, is the verification key (`audit seal init` printed
	// it): Verify then also checks the chain over every line (sealverify.go)
	// and fills VerifyReport.Seal.
	Key *[SealKeyBytes]byte
	// Heads, with Key, are the heads the daemon logged (ReadHeads): the
	// line each names must be there, with its chain value.
	Heads *Heads
}

// MaxVerifyRotated bounds the rotated records Verify keeps: a store holds
// about one per generation it retains, so past it the store was written
// by something else (reported as VerifyRotatedRecordMissing's kin, too
// many to check).
const MaxVerifyRotated = 1 << 16

// VerifyProblemKind names what Verify found wrong. Its string is the
// stable spelling of `audit verify`.
type VerifyProblemKind string

// The problems.
const (
	VerifyDeletedFilePresent   VerifyProblemKind = "deleted_file_present"
	VerifyRotationDuplicate    VerifyProblemKind = "rotation_duplicate"
	VerifyRotatedRecordMissing VerifyProblemKind = "rotated_record_missing"
	VerifyChainBroken          VerifyProblemKind = "rotation_chain_broken"
	VerifyUnrecordedDeletion   VerifyProblemKind = "unrecorded_deletion"
	VerifyUnexpectedGeneration VerifyProblemKind = "unexpected_generation"
	VerifyUnreadableFile       VerifyProblemKind = "unreadable_file"
	VerifyTooManyRotated       VerifyProblemKind = "too_many_rotated_records"
)

// VerifyProblem is one finding: what, where (the file and line of the
// record concerned, line 0 for a file as a whole) and a sentence.
type VerifyProblem struct {
	Kind   VerifyProblemKind
	File   string
	Line   uint64
	Detail string
}

// VerifyReport is Verify's result.
type VerifyReport struct {
	Dir string
	// Files lists the files read, oldest first.
	Files []string
	// RotatedRecords counts the rotated records found; NewestRotation is
	// the highest rotation number among them (the store's deletions, as
	// far as its records say).
	RotatedRecords uint64
	NewestRotation uint64
	// Deleted lists the files the rotated records name, newest deletion
	// last (at most MaxReportedLines, the newest kept).
	Deleted []DeletedFile
	// Problems lists what is wrong, in file and line order (the first
	// MaxReportedLines); ProblemCount counts them all.
	Problems     []VerifyProblem
	ProblemCount uint64
	// Seal is the chain's verification, when a key was given (nil
	// otherwise).
	Seal *SealVerification
}

// DeletedFile is a file a rotated record names, and where that record is.
type DeletedFile struct {
	File     string
	Rotation uint64
	SHA256   string
	// RecordFile and RecordLine locate the rotated record.
	RecordFile string
	RecordLine uint64
}

// OK reports whether Verify found nothing wrong.
func (r *VerifyReport) OK() bool { return r.ProblemCount == 0 }

// verifier is one Verify's state. It is not safe for concurrent use.
type verifier struct {
	rep      *VerifyReport
	dir      string
	gens     []string        // the generations present, oldest first
	present  map[string]bool // the generations present
	order    map[string]int  // a file's position in the read order
	rotated  []rotatedAt
	problems []VerifyProblem
	cv       *chainVerifier // nil without a key
}

// rotatedAt is a rotated record and where it is.
type rotatedAt struct {
	file string
	line uint64
	Rotated
}

var (
	adminPrefix   = []byte(`{"record_version":1,"phase":"admin"`)
	rotatedMarker = []byte(`"action":"rotated"`)
)

// file reads one file's lines for its rotated records.
func (v *verifier) file(ctx context.Context, name string) error {
	v.rep.Files = append(v.rep.Files, name)
	f, err := os.OpenFile(filepath.Join(v.dir, name), os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed since the listing
	}
	if err != nil {
		v.problem(VerifyUnreadableFile, name, 0, "could not be opened ("+openReason(err)+"): its rotated records were not checked")
		return nil
	}
	defer f.Close()
	// Read a consistent snapshot, the size at open: the daemon may be
	// appending meanwhile.
	var r io.Reader = f
	if st, err := f.Stat(); err == nil {
		r = io.LimitReader(f, st.Size())
	}
	br := bufio.NewReaderSize(r, MaxRecordBytes)
	var lineNo uint64
	defer func() {
		if v.cv != nil {
			v.cv.heads.fileRead(v.cv.genOf(name), name, lineNo)
		}
	}()
	for {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 || err == nil {
			lineNo++
		}
		if err == nil {
			v.line(name, lineNo, chunk)
			continue
		}
		long := false
		for errors.Is(err, bufio.ErrBufferFull) {
			long = true
			_, err = br.ReadSlice('\n') // longer than any record: not one
		}
		if v.cv != nil {
			switch {
			case long && err == nil:
				v.cv.unchained(name, lineNo, nil)
			case len(chunk) > 0 || long:
				v.cv.partial(name, lineNo)
			}
		}
		if err == nil {
			continue
		}
		if err == io.EOF {
			return nil
		}
		v.problem(VerifyUnreadableFile, name, lineNo, "could not be read to its end ("+err.Error()+")")
		return nil
	}
}

// line keeps a rotated record, and with a key checks the line's place in
// the chain. Other lines, and lines that do not decode, are audit scan's
// to judge.
func (v *verifier) line(name string, lineNo uint64, chunk []byte) {
	if v.cv != nil {
		v.cv.line(name, lineNo, chunk)
	}
	if !bytes.HasPrefix(chunk, adminPrefix) || !bytes.Contains(chunk, rotatedMarker) {
		return
	}
	r, err := Unmarshal(chunk)
	if err != nil || r.Admin.Action != ActionRotated {
		return
	}
	if v.cv != nil {
		v.cv.rotated(name, lineNo, &r.Admin.Rotated)
	}
	v.rep.RotatedRecords++
	if len(v.rotated) >= MaxVerifyRotated {
		if len(v.rotated) == MaxVerifyRotated {
			v.problem(VerifyTooManyRotated, name, lineNo, fmt.Sprintf("more than %d rotated records: the store holds far more than retention writes; the rest were not checked", MaxVerifyRotated))
			v.rotated = append(v.rotated, rotatedAt{})
		}
		return
	}
	s := r.Admin.Rotated
	s.Counts, s.Others = nil, nil // not needed: keep the entry small
	v.rotated = append(v.rotated, rotatedAt{file: name, line: lineNo, Rotated: s})
}

// check runs the checks on what was read and sorts the findings.
func (v *verifier) check() {
	if len(v.rotated) > MaxVerifyRotated {
		v.rotated = v.rotated[:MaxVerifyRotated]
	}
	byRotation := map[uint64]*rotatedAt{}
	named := map[string]bool{}
	var accounted uint64
	for i := range v.rotated {
		r := &v.rotated[i]
		v.rep.NewestRotation = max(v.rep.NewestRotation, r.Rotation)
		named[r.File] = true
		if first := byRotation[r.Rotation]; first != nil {
			v.problem(VerifyRotationDuplicate, r.file, r.line, fmt.Sprintf("carries rotation %d, as %s:%d does: a rotated record written twice", r.Rotation, first.file, first.line))
			continue
		}
		byRotation[r.Rotation] = r
		accounted = addSat(accounted, addSat(r.Folded, 1))
		if v.present[r.File] {
			v.deletedPresent(r)
		}
	}
	numbers := slices.Sorted(func(yield func(uint64) bool) {
		for k := range byRotation {
			if !yield(k) {
				return
			}
		}
	})
	v.deletedList(byRotation, numbers)
	newest := v.rep.NewestRotation
	if newest > 0 && accounted != newest {
		v.missing(byRotation, numbers, accounted)
	}
	for i := 1; i < len(numbers); i++ {
		prev, cur := byRotation[numbers[i-1]], byRotation[numbers[i]]
		if cur.Rotation == prev.Rotation+1 && cur.File != prev.Next {
			v.problem(VerifyChainBroken, cur.file, cur.line, fmt.Sprintf("rotation %d deleted %s, but rotation %d (%s:%d) said the next generation was %s",
				cur.Rotation, cur.File, prev.Rotation, prev.file, prev.line, prev.Next))
		}
	}
	v.oldest(byRotation, named)
	if v.cv != nil {
		v.cv.finish()
	}
	orderOf := func(name string) int {
		if i, ok := v.order[name]; ok {
			return i
		}
		return len(v.order) // a file not read (a generation gone): after the others
	}
	slices.SortStableFunc(v.problems, func(a, b VerifyProblem) int {
		return cmp.Or(cmp.Compare(orderOf(a.File), orderOf(b.File)), cmp.Compare(a.Line, b.Line))
	})
	v.rep.ProblemCount = uint64(len(v.problems))
	v.rep.Problems = v.problems[:min(len(v.problems), MaxReportedLines)]
}

// deletedPresent reports a file a rotated record says was deleted that is
// still there, saying whether its bytes are those the record describes.
func (v *verifier) deletedPresent(r *rotatedAt) {
	what := "its bytes could not be read"
	if sum, err := fileSHA256(filepath.Join(v.dir, r.File)); err == nil {
		if sum == r.SHA256 {
			what = "with the bytes the record describes (kept or put back after the deletion)"
		} else {
			what = "with other bytes than the record describes (sha256 " + sum + ", recorded " + r.SHA256 + ")"
		}
	}
	v.problem(VerifyDeletedFilePresent, r.file, r.line, fmt.Sprintf("rotation %d recorded the deletion of %s, which is present %s", r.Rotation, r.File, what))
}

// deletedList fills the report's list of deleted files, the newest kept.
func (v *verifier) deletedList(byRotation map[uint64]*rotatedAt, numbers []uint64) {
	for _, k := range numbers[max(0, len(numbers)-MaxReportedLines):] {
		r := byRotation[k]
		v.rep.Deleted = append(v.rep.Deleted, DeletedFile{File: r.File, Rotation: r.Rotation, SHA256: r.SHA256, RecordFile: r.file, RecordLine: r.line})
	}
}

// missing reports rotated records that do not add up to the newest
// rotation number, locating the first hole among the numbers present.
func (v *verifier) missing(byRotation map[uint64]*rotatedAt, numbers []uint64, accounted uint64) {
	newest := numbers[len(numbers)-1]
	at := byRotation[newest]
	where := ""
	for i := 1; i < len(numbers); i++ {
		if numbers[i] != numbers[i-1]+1 {
			at = byRotation[numbers[i]]
			where = fmt.Sprintf("; the first hole among the numbers present is between %d and %d", numbers[i-1], numbers[i])
			break
		}
	}
	v.problem(VerifyRotatedRecordMissing, at.file, at.line, fmt.Sprintf(
		"the %d rotated records present, with the records they carry on, account for %d of the %d deletions numbered up to %d: a rotated record was removed or edited%s",
		len(numbers), accounted, newest, newest, where))
}

// oldest checks the start of the retained generations against the newest
// deletion: its next is the oldest generation present, and nothing older
// is there unnamed.
func (v *verifier) oldest(byRotation map[uint64]*rotatedAt, named map[string]bool) {
	newest := byRotation[v.rep.NewestRotation]
	if newest == nil {
		if len(v.gens) > 0 {
			if _, seq, _ := parseGeneration(v.gens[0]); seq > 1 {
				v.problem(VerifyUnrecordedDeletion, v.gens[0], 0, fmt.Sprintf(
					"the oldest generation present is numbered %06d, and no rotated record names the ones before it "+
						"(a store written before rotated records existed shows this until its next retention deletion)", seq))
			}
		}
		return
	}
	if !v.present[newest.Next] && !named[newest.Next] {
		v.problem(VerifyUnrecordedDeletion, newest.file, newest.line, fmt.Sprintf(
			"rotation %d, the newest, says %s was next, which is gone and named by no rotated record: a generation deleted without a record, or the newest rotated record removed",
			newest.Rotation, newest.Next))
	}
	for _, g := range v.gens {
		if g >= newest.Next {
			break
		}
		if !named[g] {
			v.problem(VerifyUnexpectedGeneration, g, 0, fmt.Sprintf(
				"is older than %s, the next generation after rotation %d, the newest deletion, and no rotated record names it: retention deletes the oldest first",
				newest.Next, newest.Rotation))
		}
	}
}

func (v *verifier) problem(kind VerifyProblemKind, file string, line uint64, detail string) {
	v.problems = append(v.problems, VerifyProblem{Kind: kind, File: file, Line: line, Detail: strings.TrimSpace(detail)})
}

// fileSHA256 is the SHA-256 of the file at path, never following a
// symlink.
func fileSHA256(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
