package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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
	// bucket) into Report.LimitedByIdentity, the authorization
	// refusals per (caller identity, reason, scope) into
	// Report.RefusedByIdentity, and every invocation per (caller
	// identity, verb, outcome or limited) into
	// Report.InvocationsByIdentity, the rotated records' counts of
	// deleted files included.
	ByIdentity bool
	// ClockSkew is, for ScanStores, how far apart the clocks of the
	// stores' hosts may be: two answers closer than it may have taken
	// effect in either order. 0 means DefaultClockSkew. Scan ignores it.
	ClockSkew time.Duration
}

// MaxScanIdentities bounds the keys of each per-identity breakdown a scan
// with ScanOptions.ByIdentity keeps: (caller identity, bucket) for the
// limited records, (caller identity, reason, scope) for the refusals,
// (caller identity, verb, result) for the invocations. The records of keys
// past it are summed in Report.LimitedOtherIdentities,
// Report.RefusedOtherIdentities and Report.InvocationsOtherIdentities, so
// a store of any size is scanned in bounded memory. The limiter's own map holds 256 entries; a store that
// names more keys than this was flooded by an identity unstable across
// connections, which the remainder still counts.
const MaxScanIdentities = 4096

// Scan reads the store in opts.Dir (read-only) and reports its anomalies,
// and the evidence that is not one: the counted (limited) records, the
// admin records and the recorded caller-authorization refusals. It reads
// rotated generations oldest first, then the active file; it never follows
// a symlink (symlinked entries are skipped and listed), never holds a line
// longer than MaxRecordBytes in memory, and never panics on any input. It
// returns an error only when the store cannot be read (missing, unreadable
// or symlinked directory, a read failure) or ctx is done.
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
	sc.euid = os.Geteuid
	if opts.ByIdentity {
		sc.byIdentity = make(map[identityKey]*LimitedSummary)
		sc.refusedBy = make(map[refusedKey]*IdentityRefused)
		sc.invocations = make(map[countKey]*IdentityInvocations)
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
	sc.rep.StoreAnomalies = append(sc.rep.StoreAnomalies, ownership(opts.Dir, fi, entries, sc.euid())...)
	for _, name := range files {
		if err := sc.file(ctx, filepath.Join(opts.Dir, name), name); err != nil {
			return nil, err
		}
	}
	sc.finish()
	return sc.rep, nil
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
