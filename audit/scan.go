package audit

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
)

// Scan defaults.
const (
	DefaultScanWindow = 720 * time.Hour // 30 days
	DefaultScanGrace  = 60 * time.Second
	// MaxReportedLines bounds Report.Malformed and Report.Unpaired; the
	// counts are always complete.
	MaxReportedLines = 100
)

// ScanOptions configures Scan. Zero values select the defaults.
type ScanOptions struct {
	// Dir is the record directory; required.
	Dir string
	// Window is the lookback: records with ts before Now-Window are
	// ignored, and generations rotated before it are not read. 0 means
	// DefaultScanWindow.
	Window time.Duration
	// Grace is the settle time before an intent without an outcome counts:
	// an intent younger than Now-Grace may still be in flight. 0 means
	// DefaultScanGrace.
	Grace time.Duration
	// Now is the scan's reference instant; zero means time.Now().
	Now time.Time
	// ByIdentity also sums the limited records per (caller identity,
	// bucket) into Report.LimitedByIdentity.
	ByIdentity bool
}

// MaxScanIdentities bounds the (caller identity, bucket) keys a scan with
// ScanOptions.ByIdentity keeps: the records of keys past it are summed in
// Report.LimitedOtherIdentities, so a store of any size is scanned in
// bounded memory. The limiter's own map holds 256 entries; a store that
// names more keys than this was flooded by an identity unstable across
// connections, which the remainder still counts.
const MaxScanIdentities = 4096

// IdentityLimited is one (caller identity, bucket)'s limited records.
type IdentityLimited struct {
	CallerIdentity string
	Bucket         limiter.Bucket
	LimitedSummary
}

// Report is the result of Scan. Its counts are exact; its lists are the
// first MaxReportedLines entries in file order.
type Report struct {
	// Dir, Now, Window and Grace are the scan's effective parameters.
	Dir    string
	Now    time.Time
	Window time.Duration
	Grace  time.Duration

	// IntentWithoutOutcome counts request_ids with an intent in the window
	// older than the grace and no outcome (a crash mid-mint).
	IntentWithoutOutcome uint64
	// Unpaired lists those intents (the first intent of each request_id).
	Unpaired []UnpairedIntent

	// MalformedRecords counts malformed lines, duplicates of a request_id
	// included.
	MalformedRecords uint64
	// MalformedByRule counts them per rule.
	MalformedByRule map[Rule]uint64
	// Malformed lists them.
	Malformed []MalformedLine

	// Limited summarises the limited (counted) records in the window,
	// indexed by limiter.Bucket.
	Limited [limiter.NumBuckets]LimitedSummary

	// LimitedByIdentity (with ScanOptions.ByIdentity) is Limited per
	// (caller identity, bucket), the most limited invocations first (then
	// the most records, then identity and bucket order). Keys past
	// MaxScanIdentities are summed in LimitedOtherIdentities instead.
	LimitedByIdentity      []IdentityLimited
	LimitedOtherIdentities [limiter.NumBuckets]LimitedSummary

	// Records counts the well-formed records in the window, by phase
	// (index Phase-1: intent, outcome, limited).
	Records [3]uint64

	// Files lists the files read, oldest first; Skipped lists every other
	// entry of the directory, not read, and why.
	Files   []string
	Skipped []SkippedFile

	// StoreAnomalies are anomalies of the directory rather than of a line:
	// records that stop without an active file, a gap in the generation
	// numbers, a store file that could not be read, the directory or an
	// entry of it owned by another uid or group- or world-writable.
	StoreAnomalies []StoreAnomaly

	// LateLimitedRecords counts the limited records written more than
	// LateLimitedAfter after their window_end: recovered from the evidence
	// checkpoint after an unclean stop (or written by a stalled store).
	// They are evidence, not anomalies.
	LateLimitedRecords uint64
	// Gaps groups them by window_end (at most MaxReportedLines): each is an
	// interval in which limited invocations may have gone uncounted.
	Gaps []EvidenceGap
}

// StoreAnomalyKind names an anomaly of the record directory. Its string is
// the stable spelling of the scan report.
type StoreAnomalyKind string

// The directory anomalies.
const (
	// AnomalyMissingActiveFile: the directory holds files (generations or
	// others) but no active file: the records stop without the file the
	// daemon appends to (deleted, renamed away, or a symlink planted).
	AnomalyMissingActiveFile StoreAnomalyKind = "missing_active_file"
	// AnomalyGenerationGap: two consecutive retained generations whose
	// numbers (the six-digit sequence) are not consecutive: generations
	// between them were removed. Retention only ever removes the oldest.
	AnomalyGenerationGap StoreAnomalyKind = "generation_gap"
	// AnomalyUnreadableFile: a file with a store name that could not be
	// opened: its records were not checked.
	AnomalyUnreadableFile StoreAnomalyKind = "unreadable_file"
)

// StoreAnomaly is one anomaly of the record directory.
type StoreAnomaly struct {
	Kind StoreAnomalyKind
	// File is the file concerned (for a gap, the generation after it).
	File string
	// Detail says what is wrong in a sentence.
	Detail string
}

// Reasons of Report.Skipped, besides "rotated before the window" and
// "removed during the scan".
const (
	SkipUnrecognisedName = "unrecognised name (not an active file or a rotated generation)"
	SkipSymlink          = "symlink (never followed)"
	SkipNotRegular       = "not a regular file"
	skipUnreadablePrefix = "unreadable: "
)

// UnpairedIntent locates an intent that has no outcome.
type UnpairedIntent struct {
	File      string
	Line      uint64
	RequestID string
	TS        time.Time
}

// MalformedLine locates a malformed line and names the rule it broke.
type MalformedLine struct {
	File string
	Line uint64 // 1-based
	Rule Rule
	// Detail is a short explanation; it never contains raw line bytes.
	Detail string
}

// LimitedSummary aggregates one bucket's limited records.
type LimitedSummary struct {
	// Records is the number of limited records.
	Records uint64
	// Count is the sum of their counts (saturating at math.MaxUint64): how
	// many invocations were limited.
	Count uint64
}

// SkippedFile is a directory entry the scan did not read.
type SkippedFile struct {
	Name   string
	Reason string
}

// Anomalies reports whether the scan found anything an operator must look
// at: an intent without outcome, a malformed line, or an anomaly of the
// directory (StoreAnomalies). Limited records are evidence, not anomalies;
// skipped files are listed, not anomalies by themselves.
func (r *Report) Anomalies() bool {
	return r.IntentWithoutOutcome > 0 || r.MalformedRecords > 0 || len(r.StoreAnomalies) > 0
}

// Scan reads the store in opts.Dir (read-only) and reports its anomalies.
// It reads rotated generations oldest first, then the active file; it
// never follows a symlink (symlinked entries are skipped and listed), never
// holds a line longer than MaxRecordBytes in memory, and never panics on any
// input. It returns an error only when the store cannot be read (missing,
// unreadable or symlinked directory, a read failure) or ctx is done.
//
// Scan holds no shared state: concurrent scans (and a daemon appending
// meanwhile) are safe. A final line still being appended when the scan
// reaches it is not read, rather than reported torn.
//
// Pairing is by request_id across all files read. Every request_id with an
// intent and no outcome counts once, however many duplicate intents it has;
// each duplicate intent or outcome line counts as malformed. Limited
// records are never paired and cannot be duplicates.
//
// Ownership: the directory and every entry of it must be owned by root or
// the store's owner, and none may be group- or world-writable
// (AnomalyWrongOwner, AnomalyUnsafeMode, each naming the path). The
// store's owner is the scanning uid when that is not root (so the daemon's
// uid scanning its own store finds a directory of another uid too), and the
// directory's owner when the scan runs as root, which cannot otherwise tell
// the daemon's uid: a file another uid wrote there is reported either way.
func Scan(ctx context.Context, opts ScanOptions) (*Report, error) {
	return scan(ctx, opts, nil)
}

// scan is Scan; setup, if not nil, adjusts the scanner before the first
// line (the tests' and benchmarks' reference scan).
func scan(ctx context.Context, opts ScanOptions, setup func(*scanner)) (*Report, error) {
	if errPlatform != nil {
		return nil, errPlatform
	}
	if opts.Dir == "" {
		return nil, errors.New("audit: scan: no directory given")
	}
	if opts.Window <= 0 {
		opts.Window = DefaultScanWindow
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultScanGrace
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	sc := &scanner{
		rep: &Report{
			Dir:             opts.Dir,
			Now:             opts.Now,
			Window:          opts.Window,
			Grace:           opts.Grace,
			MalformedByRule: make(map[Rule]uint64),
		},
		cutoff:  opts.Now.Add(-opts.Window),
		settled: opts.Now.Add(-opts.Grace),
		waiting: make(map[string]*reqState),
	}
	sc.decode = sc.dec.decode
	if opts.ByIdentity {
		sc.byIdentity = make(map[identityKey]*LimitedSummary)
	}
	if setup != nil {
		setup(sc)
	}
	fi, err := os.Lstat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("audit: scan: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &UnsafeStoreError{Path: opts.Dir, Problem: "is a symlink"}
	}
	if !fi.IsDir() {
		return nil, &UnsafeStoreError{Path: opts.Dir, Problem: "is not a directory"}
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("audit: scan: %w", err)
	}
	var files []string
	activeSeen := false
	var gens []string
	for _, e := range entries {
		name := e.Name()
		stamp, _, isGen := parseGeneration(name)
		if isGen {
			gens = append(gens, name)
		}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			sc.rep.Skipped = append(sc.rep.Skipped, SkippedFile{Name: name, Reason: SkipSymlink})
			continue
		case !isGen && name != ActiveFileName:
			sc.rep.Skipped = append(sc.rep.Skipped, SkippedFile{Name: name, Reason: SkipUnrecognisedName})
			continue
		case !e.Type().IsRegular():
			sc.rep.Skipped = append(sc.rep.Skipped, SkippedFile{Name: name, Reason: SkipNotRegular})
			continue
		case isGen && stamp.Before(sc.cutoff):
			// Rotated before the window opened: every record is older.
			sc.rep.Skipped = append(sc.rep.Skipped, SkippedFile{Name: name, Reason: "rotated before the window"})
			continue
		}
		if name == ActiveFileName {
			activeSeen = true
			continue
		}
		files = append(files, name)
	}
	if activeSeen {
		files = append(files, ActiveFileName) // newest last
	} else if len(entries) > 0 {
		last := "no rotated generation"
		if n := len(gens); n > 0 {
			last = "the last rotated generation is " + gens[n-1]
		}
		sc.rep.StoreAnomalies = append(sc.rep.StoreAnomalies, StoreAnomaly{Kind: AnomalyMissingActiveFile, File: ActiveFileName,
			Detail: fmt.Sprintf("the directory holds %d entries but no regular active file %s (%s): the records stop there; was it deleted or renamed?", len(entries), ActiveFileName, last)})
	}
	sc.rep.StoreAnomalies = append(sc.rep.StoreAnomalies, generationGaps(gens)...)
	sc.rep.StoreAnomalies = append(sc.rep.StoreAnomalies, ownership(opts.Dir, fi, entries)...)
	for _, name := range files {
		if err := sc.file(ctx, filepath.Join(opts.Dir, name), name); err != nil {
			return nil, err
		}
	}
	sc.finish()
	return sc.rep, nil
}

// reqState is what the scan knows about a request_id whose intent is still
// waiting for its outcome: the only per-request state it keeps.
type reqState struct {
	first UnpairedIntent // the first intent seen
	order uint64         // its position in the scan, for sorting
}

type scanner struct {
	rep     *Report
	cutoff  time.Time
	settled time.Time
	// waiting holds the request_ids with an intent and, so far, no
	// outcome. Once its outcome arrives a request_id leaves it for the
	// compact sets below, which remember, at about two bytes per id, what
	// the duplicate rule needs: whose intent and whose outcome were seen.
	waiting  map[string]*reqState
	intents  idSet  // intents seen, of request_ids no longer waiting
	outcomes idSet  // outcomes seen
	order    uint64 // lines seen so far, across files
	dec      lineDecoder
	// decode is dec.decode; the benchmarks set it to the token decoder
	// alone, to measure what the single pass buys the scan.
	decode func(line []byte) (*Record, error)
	// byIdentity sums limited records per key (ScanOptions.ByIdentity);
	// nil otherwise.
	byIdentity map[identityKey]*LimitedSummary

	// refLine and refFinish replace line and finish (the reference scan of
	// the benchmarks and agreement tests); nil in production.
	refLine   func(name string, lineNo uint64, chunk []byte)
	refFinish func()
}

// file scans one file. A file that vanished since the listing (trimmed by
// the running daemon) is skipped.
func (sc *scanner) file(ctx context.Context, path, name string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if errors.Is(err, fs.ErrNotExist) {
		sc.rep.Skipped = append(sc.rep.Skipped, SkippedFile{Name: name, Reason: "removed during the scan"})
		return nil
	}
	if err != nil {
		// Listed and reported; the other files are still scanned.
		sc.rep.Skipped = append(sc.rep.Skipped, SkippedFile{Name: name, Reason: skipUnreadablePrefix + openReason(err)})
		sc.rep.StoreAnomalies = append(sc.rep.StoreAnomalies, StoreAnomaly{Kind: AnomalyUnreadableFile, File: name,
			Detail: "could not be opened (" + openReason(err) + "): its records were not checked"})
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit: scan: %w", err)
	}
	if !st.Mode().IsRegular() {
		sc.rep.Skipped = append(sc.rep.Skipped, SkippedFile{Name: name, Reason: "not a regular file"})
		return nil
	}
	sc.rep.Files = append(sc.rep.Files, name)
	// Read a consistent snapshot: the size at open. The daemon may be
	// appending meanwhile.
	snapshot := st.Size()
	br := bufio.NewReaderSize(io.LimitReader(f, snapshot), MaxRecordBytes)
	var lineNo uint64
	for {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			lineNo++
			sc.line(name, lineNo, chunk)
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			// Longer than any record: skip to its end without keeping it.
			lineNo++
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				return fmt.Errorf("audit: scan %s: %w", name, err)
			}
			sc.malformed(name, lineNo, RuleOversizedLine, fmt.Sprintf("longer than %d bytes", MaxRecordBytes))
			if err == io.EOF {
				return nil
			}
			continue
		case err == io.EOF:
			if len(chunk) > 0 {
				lineNo++
				sc.unterminated(f, snapshot, name, lineNo)
			}
			return nil
		default:
			return fmt.Errorf("audit: scan %s: %w", name, err)
		}
	}
}

// unterminated classifies a final line without '\n': torn, unless the file
// has grown since the snapshot (an append was in flight; it is not read).
func (sc *scanner) unterminated(f *os.File, snapshot int64, name string, lineNo uint64) {
	if st, err := f.Stat(); err == nil && st.Size() > snapshot {
		return
	}
	sc.malformed(name, lineNo, RuleTornFinalLine, "final line has no newline")
}

// line classifies one complete line ('\n' included).
func (sc *scanner) line(name string, lineNo uint64, chunk []byte) {
	if sc.refLine != nil {
		sc.refLine(name, lineNo, chunk)
		return
	}
	sc.order++
	r, err := sc.decode(chunk)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			sc.malformed(name, lineNo, de.Rule, de.detail())
		} else {
			sc.malformed(name, lineNo, RuleInvalidJSON, err.Error())
		}
		return
	}
	if r.TS.Before(sc.cutoff) {
		return
	}
	sc.rep.Records[r.Phase-1]++
	switch r.Phase {
	case PhaseLimited:
		sc.rep.Limited[r.LimitedBucket].add(r.Count)
		if sc.byIdentity != nil {
			sc.identity(r)
		}
		sc.noteLate(name, lineNo, r)
	case PhaseIntent:
		id := r.RequestID
		switch {
		case sc.waiting[id] != nil || sc.intents.has(id):
			sc.malformed(name, lineNo, RuleDuplicateRequestID, "second intent for request_id "+id)
		case sc.outcomes.has(id):
			sc.intents.add(id) // its outcome came first: paired
		default:
			// The id is a slice of this line's own copy, never reused.
			sc.waiting[id] = &reqState{first: UnpairedIntent{File: name, Line: lineNo, RequestID: id, TS: r.TS}, order: sc.order}
		}
	case PhaseOutcome:
		id := r.RequestID
		if sc.outcomes.has(id) {
			sc.malformed(name, lineNo, RuleDuplicateRequestID, "second outcome for request_id "+id)
			return
		}
		sc.outcomes.add(id)
		if _, ok := sc.waiting[id]; ok {
			delete(sc.waiting, id)
			sc.intents.add(id)
		}
	}
}

func (sc *scanner) malformed(name string, lineNo uint64, rule Rule, detail string) {
	sc.rep.MalformedRecords++
	sc.rep.MalformedByRule[rule]++
	if len(sc.rep.Malformed) < MaxReportedLines {
		sc.rep.Malformed = append(sc.rep.Malformed, MalformedLine{File: name, Line: lineNo, Rule: rule, Detail: detail})
	}
}

type identityKey struct {
	identity string
	bucket   limiter.Bucket
}

// add counts one limited record of count invocations, saturating.
func (s *LimitedSummary) add(count uint64) {
	s.Records++
	if s.Count > math.MaxUint64-count {
		s.Count = math.MaxUint64
	} else {
		s.Count += count
	}
}

// identity adds a limited record to its (identity, bucket) sum, or to the
// remainder once MaxScanIdentities keys are held.
func (sc *scanner) identity(r *Record) {
	k := identityKey{r.CallerIdentity, r.LimitedBucket}
	s := sc.byIdentity[k]
	if s == nil {
		if len(sc.byIdentity) >= MaxScanIdentities {
			sc.rep.LimitedOtherIdentities[r.LimitedBucket].add(r.Count)
			return
		}
		// The identity is a slice of the decoder's buffer: keep a copy.
		k.identity = strings.Clone(k.identity)
		s = &LimitedSummary{}
		sc.byIdentity[k] = s
	}
	s.add(r.Count)
}

// finish counts the unpaired intents and sorts the per-identity sums.
func (sc *scanner) finish() {
	if sc.refFinish != nil {
		sc.refFinish()
		return
	}
	for k, s := range sc.byIdentity {
		sc.rep.LimitedByIdentity = append(sc.rep.LimitedByIdentity, IdentityLimited{CallerIdentity: k.identity, Bucket: k.bucket, LimitedSummary: *s})
	}
	slices.SortFunc(sc.rep.LimitedByIdentity, func(a, b IdentityLimited) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Records, a.Records),
			cmp.Compare(a.CallerIdentity, b.CallerIdentity), cmp.Compare(a.Bucket, b.Bucket))
	})
	var unpaired []*reqState
	for _, st := range sc.waiting {
		if st.first.TS.Before(sc.settled) {
			sc.rep.IntentWithoutOutcome++
			unpaired = append(unpaired, st)
		}
	}
	slices.SortFunc(unpaired, func(a, b *reqState) int { return cmp.Compare(a.order, b.order) })
	for _, st := range unpaired[:min(len(unpaired), MaxReportedLines)] {
		sc.rep.Unpaired = append(sc.rep.Unpaired, st.first)
	}
}

// openReason is an open error without its path (the report names the file).
func openReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// generationGaps reports each pair of consecutive generations (names sorted
// oldest first) whose numbers are not consecutive. Consecutive means the
// next number (n+1), or 0 under a later stamp: the number wrapping after
// 999999, and the naming of stores written before generation numbers were
// kept (the sequence restarted at 0 for each new stamp), which therefore
// shows no gap.
func generationGaps(gens []string) []StoreAnomaly {
	var out []StoreAnomaly
	for i := 1; i < len(gens); i++ {
		pStamp, pSeq, _ := parseGeneration(gens[i-1])
		stamp, seq, _ := parseGeneration(gens[i])
		if seq == pSeq+1 || (seq == 0 && stamp.After(pStamp)) {
			continue
		}
		detail := fmt.Sprintf("generation numbers jump from %06d (%s) to %06d: ", pSeq, gens[i-1], seq)
		if seq > pSeq+1 {
			detail += fmt.Sprintf("%d generation(s) between them are missing", seq-pSeq-1)
		} else {
			detail += "the numbering goes backwards"
		}
		out = append(out, StoreAnomaly{Kind: AnomalyGenerationGap, File: gens[i], Detail: detail})
	}
	return out
}
