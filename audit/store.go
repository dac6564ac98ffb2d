package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/groupcommit"
	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// ActiveFileName is the name of the file appends go to, inside the store's
// directory. Rotated generations are named
// registrar-audit-<YYYYMMDDTHHMMSSZ>-<NNNNNN>.jsonl.
const ActiveFileName = "registrar-audit.jsonl"

// Defaults and limits of Options (registrar.audit_max_file_bytes and
// registrar.audit_max_retained_files).
const (
	DefaultMaxFileBytes     = 8 << 20  // 8 MiB
	MinMaxFileBytes         = 64 << 10 // 64 KiB
	DefaultMaxRetainedFiles = 16
)

const (
	generationPrefix = "registrar-audit-"
	generationSuffix = ".jsonl"
	stampLayout      = "20060102T150405Z"
	maxSequence      = 999999
	generationLen    = len(generationPrefix) + len(stampLayout) + 1 + 6 + len(generationSuffix)
)

// Options configures a Store. The zero value of every field but Dir selects
// its default.
type Options struct {
	// Dir is the record directory (registrar.audit_record_dir). Open creates
	// it 0700 if missing; it must not be a symlink or group/world-writable.
	Dir string
	// MaxFileBytes is the size in bytes at which the active file rotates
	// (registrar.audit_max_file_bytes); 0 means DefaultMaxFileBytes, and
	// anything below MinMaxFileBytes is refused.
	MaxFileBytes uint64
	// MaxRetainedFiles is how many rotated generations are kept, the
	// active file not included (registrar.audit_max_retained_files); 0
	// means DefaultMaxRetainedFiles. The store's disk use is therefore at
	// most (MaxRetainedFiles+1) * MaxFileBytes.
	MaxRetainedFiles uint32
	// Logger receives rotation, retention and recovery messages; nil
	// discards them. Records are never logged.
	Logger *slog.Logger
	// Now is the clock used to stamp records with a zero TS and to name
	// rotated generations; nil means time.Now.
	Now func() time.Time
	// Observer, if non-nil, is told the outcome of every Append.
	Observer Observer
	// ErrorLogInterval bounds the store's ERROR lines: at most one per
	// cause (failed append by phase and step, reopen) per interval, the
	// next one carrying the count suppressed meanwhile; 0 means
	// DefaultErrorLogInterval.
	ErrorLogInterval time.Duration
}

// DefaultErrorLogInterval is Options.ErrorLogInterval's default.
const DefaultErrorLogInterval = time.Minute

// Observer is told about every Store.Append: the record's phase (0 if the
// record was nil), the call's wall-clock duration and its error (nil on
// success). It is called once per Append, after the outcome is known, on the
// appending goroutine, with no store lock held; implementations must be safe
// for concurrent use and should return quickly. Telemetry implements it
// without this package importing OpenTelemetry.
type Observer interface {
	Appended(phase Phase, d time.Duration, err error)
}

// file is the part of *os.File the write path uses; tests substitute a
// faulty one through hooks.
type file interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

var _ file = (*os.File)(nil)

// hooks are the store's test seams. The zero value is production behaviour;
// only export_test.go sets them.
type hooks struct {
	wrapFile     func(file) file
	rename       func(oldpath, newpath string) error
	remove       func(name string) error
	minFileBytes uint64
}

// Store is the append-only audit record store. Append (one record, the
// verbs' intent and outcome records) and AppendBatch (several records in
// one commit, the coalescer's counted records) are its two write paths,
// and they share one commit path: every record is bounded, validated,
// serialized, written as one whole line and fsynced before its write
// returns nil. A Store is safe for concurrent
// use; concurrent appenders are committed in groups sharing one write and
// one fsync, and each returns only after the fsync covering its own line.
type Store struct {
	dir  string
	dirf *os.File
	// dirMu guards dirf's replacement (reopen) and close against CheckDir
	// from outside the write path; the write path itself reads dirf freely.
	dirMu       sync.Mutex
	dirClosed   bool
	maxFile     uint64
	maxRetained uint32
	log         *slog.Logger
	now         func() time.Time
	obs         Observer
	h           hooks
	errLog      *logthrottle.Throttle

	// Read by the capacity probe and telemetry without the store lock.
	appendFailures atomic.Uint64           // appends that failed in the file system, since Open
	lastFailed     atomic.Bool             // the last append (or reopen) failed in the file system, or Refuse holds it
	refused        atomic.Pointer[refusal] // Refuse's cause: every append fails closed while set
	reopens        [numReopenCauses]atomic.Uint64

	// group is the commit queue: its leader (one appender at a time) runs
	// commit and owns the fields below, as Close does once it is closed.
	group *groupcommit.Queue[entry]

	f         file
	raw       *os.File    // the *os.File under f, for identity checks
	fileID    fs.FileInfo // identity (device, inode) of the open active file
	dirID     fs.FileInfo // identity of the open record directory (dirf)
	size      uint64      // bytes in the active file, all whole lines
	dirDirty  bool        // a directory fsync failed; retried before the next write
	broken    error       // sticky: a failed write could not be rolled back
	lastStamp time.Time
	lastSeq   int
	buf       []byte
}

// entry is one appender's line in the commit queue, or (reopen set, no
// line) a request to reopen the active file, served in queue order.
type entry struct {
	line   []byte
	reopen bool
}

// pending is an entry queued for a commit, with its result.
type pending = groupcommit.Op[entry]

// Open opens (creating if needed) the store in opts.Dir. A directory it
// creates is chmodded to 0700 whatever the umask; an existing one must not
// be a symlink or group/world-writable (an *UnsafeStoreError names it and
// its mode). The active file is opened 0600, append-only, without following
// a symlink. A torn final line left by a crash is terminated with '\n' so
// that no record is ever appended onto it (the scan reports it as
// malformed). Generations beyond MaxRetainedFiles are trimmed (failures are
// logged).
func Open(opts Options) (*Store, error) { return open(opts, hooks{}) }

func open(opts Options, h hooks) (*Store, error) {
	if errPlatform != nil {
		return nil, errPlatform
	}
	if opts.Dir == "" {
		return nil, errors.New("audit: Options.Dir (registrar.audit_record_dir) is empty")
	}
	maxFile := opts.MaxFileBytes
	if maxFile == 0 {
		maxFile = DefaultMaxFileBytes
	}
	minFile := uint64(MinMaxFileBytes)
	if h.minFileBytes != 0 {
		minFile = h.minFileBytes
	}
	if maxFile < minFile {
		return nil, fmt.Errorf("audit: Options.MaxFileBytes (registrar.audit_max_file_bytes) = %d is below the minimum %d", maxFile, minFile)
	}
	retained := opts.MaxRetainedFiles
	if retained == 0 {
		retained = DefaultMaxRetainedFiles
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if h.rename == nil {
		h.rename = os.Rename
	}
	if h.remove == nil {
		h.remove = os.Remove
	}
	interval := opts.ErrorLogInterval
	if interval <= 0 {
		interval = DefaultErrorLogInterval
	}
	dirf, dirID, err := openDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir:         opts.Dir,
		dirf:        dirf,
		dirID:       dirID,
		maxFile:     maxFile,
		maxRetained: retained,
		log:         logger.With("audit_dir", opts.Dir),
		now:         now,
		obs:         opts.Observer,
		h:           h,
	}
	s.errLog = logthrottle.New(s.log, interval, now)
	s.group = groupcommit.New(0, s.commit)
	gens, err := s.generations()
	if err != nil {
		dirf.Close()
		return nil, err
	}
	if n := len(gens); n > 0 {
		s.lastStamp, s.lastSeq, _ = parseGeneration(gens[n-1])
	}
	raw, fileID, size, err := s.openActive(dirf)
	if err != nil {
		dirf.Close()
		return nil, err
	}
	s.install(raw, fileID, size)
	s.trim()
	return s, nil
}

// dirRules are the record directory's privdir rules: the owner and the
// ancestors too, since whoever may change the directory may delete and
// forge generations (issue 27).
var dirRules = privdir.Options{Owner: true, Ancestors: true}

// openDir validates (creating if missing) the record directory and returns
// it open, for directory fsyncs, with its identity. The rules are privdir's;
// the errors are the store's.
func openDir(path string) (*os.File, fs.FileInfo, error) {
	d, st, err := privdir.Open(path, dirRules)
	if err == nil {
		return d, st, nil
	}
	if ue, ok := errors.AsType[*privdir.UnsafeError](err); ok {
		return nil, nil, &UnsafeStoreError{Path: path, Problem: ue.Detail()}
	}
	se, ok := errors.AsType[*privdir.StepError](err)
	if !ok {
		return nil, nil, err
	}
	switch se.Step {
	case privdir.StepCreate:
		return nil, nil, fmt.Errorf("audit: creating record directory: %w", err)
	case privdir.StepStat:
		return nil, nil, fmt.Errorf("audit: record directory: %w", err)
	case privdir.StepOpen:
		return nil, nil, fmt.Errorf("audit: opening record directory: %w", err)
	}
	return nil, nil, se.Err // fstat, chmod: the *fs.PathError says it
}

// openActive opens the existing active file in the directory open as dirf,
// or creates it, and returns it with its identity and size. The store is
// not modified: the caller installs the result.
func (s *Store) openActive(dirf *os.File) (*os.File, fs.FileInfo, uint64, error) {
	p := filepath.Join(s.dir, ActiveFileName)
	fi, err := os.Lstat(p)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, 0, fmt.Errorf("audit: active file: %w", err)
	}
	if exists {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, 0, &UnsafeStoreError{Path: p, Problem: "is a symlink"}
		}
		if !fi.Mode().IsRegular() {
			return nil, nil, 0, &UnsafeStoreError{Path: p, Problem: "is not a regular file"}
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE|oNoFollow, 0o600)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("audit: opening active file: %w", err)
	}
	st, size, err := s.checkActive(dirf, f, p, fi, exists)
	if err != nil {
		f.Close()
		return nil, nil, 0, err
	}
	return f, st, size, nil
}

// install makes f (already checked) the active file.
func (s *Store) install(f *os.File, id fs.FileInfo, size uint64) {
	s.f, s.raw, s.fileID, s.size = s.wrap(f), f, id, size
}

// checkActive verifies a just-opened active file and returns its identity
// and size, after terminating a torn final line.
func (s *Store) checkActive(dirf, f *os.File, p string, fi fs.FileInfo, existed bool) (fs.FileInfo, uint64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("audit: active file: %w", err)
	}
	if !st.Mode().IsRegular() || (existed && !os.SameFile(fi, st)) {
		return nil, 0, &UnsafeStoreError{Path: p, Problem: "changed while being opened"}
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		if err := f.Chmod(0o600); err != nil {
			return nil, 0, fmt.Errorf("audit: restating active file mode: %w", err)
		}
		if existed {
			s.log.Warn("audit active file mode tightened", "file", p, "was", fmt.Sprintf("%#o", perm))
		}
	}
	if !existed {
		if err := dirf.Sync(); err != nil {
			return nil, 0, fmt.Errorf("audit: fsync of record directory after creating the active file: %w", err)
		}
	}
	size := st.Size()
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			return nil, 0, fmt.Errorf("audit: reading active file tail: %w", err)
		}
		if last[0] != '\n' {
			// A crash tore the last write. Keep its bytes as evidence but
			// end the line, so no record is ever appended onto it.
			if _, err := f.Write([]byte{'\n'}); err != nil {
				return nil, 0, fmt.Errorf("audit: terminating torn final line: %w", err)
			}
			if err := f.Sync(); err != nil {
				return nil, 0, fmt.Errorf("audit: terminating torn final line: %w", err)
			}
			size++
			s.log.Warn("audit active file ended in a torn line; terminated it (the scan reports it malformed)", "file", p)
		}
	}
	return st, uint64(size), nil
}

// createActive creates a fresh active file after a rotation and returns it
// with its identity.
func (s *Store) createActive() (*os.File, fs.FileInfo, error) {
	p := filepath.Join(s.dir, ActiveFileName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

func (s *Store) wrap(f *os.File) file {
	if s.h.wrapFile != nil {
		return s.h.wrapFile(f)
	}
	return f
}

// Append writes r as one line and fsyncs it before returning nil. It and
// AppendBatch are the store's two write paths, on one commit path, and
// neither has a best-effort mode: every error must be handled by the
// caller.
//
// The store applies the field bound (to a copy; r is not modified), stamps
// a zero TS with its clock, canonicalises timestamps and validates phase
// consistency (*PhaseError, *FieldError). A line larger than MaxFileBytes is
// refused with a *TooLargeError before the file is touched. A failed write
// or fsync is rolled back (the file keeps only whole lines) and returned as
// a *WriteError; if the rollback itself fails, this and every later Append
// return an error wrapping ErrBroken. After Close, Append returns ErrClosed.
//
// Before writing, the store checks that the configured path still names
// its open active file (see ReopenCause): if it does not, the line goes to
// a fresh active file reopened there, never to the old one, and if the
// reopen fails the append fails with a *WriteError (Op "reopen"). A failed
// append is logged at ERROR, at most one line per phase and failed step per
// Options.ErrorLogInterval.
//
// ctx is not used to cancel: once started, an append runs to completion
// (a caller hanging up must not leave an intent half-recorded).
func (s *Store) Append(ctx context.Context, r *Record) (err error) {
	start := time.Now()
	var phase Phase
	if r != nil {
		phase = r.Phase
	}
	defer func() {
		s.account(phase, err)
		if s.obs != nil {
			s.obs.Appended(phase, time.Since(start), err)
		}
	}()
	if r == nil {
		return &FieldError{Field: "record", Problem: "is nil"}
	}
	rec := *r
	if rec.TS.IsZero() {
		rec.TS = s.now()
	}
	line, err := Marshal(&rec)
	if err != nil {
		return err
	}
	if n := uint64(len(line)); n > s.maxFile {
		return &TooLargeError{LineBytes: n, MaxFileBytes: s.maxFile}
	}
	return s.enqueue(entry{line: line})
}

// enqueue queues e and waits for the commit covering it, leading it if no
// commit is in progress.
func (s *Store) enqueue(e entry) error {
	p := groupcommit.NewOp(e)
	if !s.group.Do(p) {
		return ErrClosed
	}
	return p.Err
}

// commit writes batch's lines in order, rotating as needed, and sets each
// pending's err. Lines sharing a file are written and fsynced together.
// Before each write it checks, with ensureActive, that the configured path
// still names the open active file. Reopen requests are served in their
// place in the queue.
func (s *Store) commit(batch []*pending) {
	// fail sets err on every line up to the next reopen request.
	fail := func(i int, err error) int {
		for ; i < len(batch) && !batch[i].Item.reopen; i++ {
			batch[i].Err = err
		}
		return i
	}
	for i := 0; i < len(batch); {
		if batch[i].Item.reopen {
			batch[i].Err = s.reopen(ReopenSIGHUP)
			i++
			continue
		}
		if err := s.ensureActive(); err != nil {
			i = fail(i, err)
			continue
		}
		if s.broken != nil {
			i = fail(i, s.broken)
			continue
		}
		if s.size+uint64(len(batch[i].Item.line)) > s.maxFile {
			if err := s.rotate(); err != nil {
				i = fail(i, err)
				continue
			}
		}
		j, total := i, uint64(0)
		for j < len(batch) && !batch[j].Item.reopen && s.size+total+uint64(len(batch[j].Item.line)) <= s.maxFile {
			total += uint64(len(batch[j].Item.line))
			j++
		}
		var buf []byte
		if j == i+1 {
			buf = batch[i].Item.line
		} else {
			s.buf = s.buf[:0]
			for _, p := range batch[i:j] {
				s.buf = append(s.buf, p.Item.line...)
			}
			buf = s.buf
		}
		err := s.writeSync(buf)
		for _, p := range batch[i:j] {
			p.Err = err
		}
		i = j
	}
}

// writeSync appends buf (whole lines) and fsyncs. On failure the file is
// truncated back to its last acknowledged size; if that fails, the store
// is marked broken.
func (s *Store) writeSync(buf []byte) error {
	if s.dirDirty {
		if err := s.dirf.Sync(); err != nil {
			return &WriteError{Op: "sync directory", Err: err}
		}
		s.dirDirty = false
	}
	op := "write"
	n, err := s.f.Write(buf)
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err == nil {
		op = "sync"
		err = s.f.Sync()
	}
	if err == nil {
		s.size += uint64(len(buf))
		return nil
	}
	werr := &WriteError{Op: op, Err: err}
	if rerr := s.rollback(); rerr != nil {
		s.broken = fmt.Errorf("%w: %w; rolling back to %d bytes failed: %w", ErrBroken, werr, s.size, rerr)
		s.log.Error("audit append failed and could not be rolled back; refusing further appends", "err", s.broken)
		return s.broken
	}
	return werr
}

// rollback truncates the active file to its last acknowledged size. Only a
// failed truncate is fatal: once it succeeded the file holds whole lines
// only, and a failed fsync of the truncation is made good by the next
// append's successful fsync (which no append is acknowledged without).
func (s *Store) rollback() error {
	if err := s.f.Truncate(int64(s.size)); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		s.log.Warn("audit fsync after rolling back a failed append failed; the next append's fsync covers it", "err", err)
	}
	return nil
}

// rotate renames the active file to the next generation name, creates a
// new active file and trims old generations.
func (s *Store) rotate() error {
	active := filepath.Join(s.dir, ActiveFileName)
	var name string
	var stamp time.Time
	var seq int
	for tries := 0; ; tries++ {
		name, stamp, seq = s.nextGeneration()
		if _, err := os.Lstat(filepath.Join(s.dir, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		// Never rename over an existing file: skip the occupied name.
		s.lastStamp, s.lastSeq = stamp, seq
		if tries == 8 {
			return &WriteError{Op: "rotate", Err: fmt.Errorf("no free generation name (last tried %s)", name)}
		}
	}
	gen := filepath.Join(s.dir, name)
	if err := s.h.rename(active, gen); err != nil {
		return &WriteError{Op: "rotate", Err: err}
	}
	s.lastStamp, s.lastSeq = stamp, seq
	if err := s.dirf.Sync(); err != nil {
		s.dirDirty = true
		s.log.Warn("audit fsync of record directory after rotation failed; retried before the next write", "err", err)
	}
	nf, nid, err := s.createActive()
	if err != nil {
		if rerr := s.h.rename(gen, active); rerr != nil {
			s.broken = fmt.Errorf("%w: rotated the active file to %s but could not create a new one (%v) nor restore it (%v)", ErrBroken, name, err, rerr)
			s.log.Error("audit rotation failed half-way; refusing further appends", "err", s.broken)
			return s.broken
		}
		return &WriteError{Op: "rotate", Err: err}
	}
	if err := s.f.Close(); err != nil {
		s.log.Warn("audit closing rotated generation failed", "file", name, "err", err)
	}
	s.install(nf, nid, 0)
	if err := s.dirf.Sync(); err != nil {
		s.dirDirty = true
		s.log.Warn("audit fsync of record directory after rotation failed; retried before the next write", "err", err)
	}
	s.log.Info("audit active file rotated", "generation", name)
	s.trim()
	return nil
}

// nextGeneration returns the next generation name. The sequence is a
// generation number: one more than the last generation's, whatever the
// stamp, so a generation missing from the middle of the retained ones is a
// visible gap (audit scan reports it). Stamps never go backwards (a clock
// step back reuses the last stamp); when the number wraps from 999999 to 0
// the stamp moves on by at least a second, so names sort oldest first.
func (s *Store) nextGeneration() (string, time.Time, int) {
	stamp := s.now().UTC().Truncate(time.Second)
	if stamp.Before(s.lastStamp) {
		stamp = s.lastStamp
	}
	seq := s.lastSeq + 1
	if seq > maxSequence {
		seq = 0
		if !stamp.After(s.lastStamp) {
			stamp = s.lastStamp.Add(time.Second)
		}
	}
	return generationName(stamp, seq), stamp, seq
}

func generationName(stamp time.Time, seq int) string {
	b := make([]byte, 0, generationLen)
	b = append(b, generationPrefix...)
	b = stamp.AppendFormat(b, stampLayout)
	b = append(b, '-')
	b = fmt.Appendf(b, "%06d", seq)
	return string(append(b, generationSuffix...))
}

// parseGeneration parses a rotated generation's name.
func parseGeneration(name string) (time.Time, int, bool) {
	if len(name) != generationLen || name[:len(generationPrefix)] != generationPrefix ||
		name[len(name)-len(generationSuffix):] != generationSuffix {
		return time.Time{}, 0, false
	}
	rest := name[len(generationPrefix) : len(name)-len(generationSuffix)]
	stampText, seqText := rest[:len(stampLayout)], rest[len(stampLayout):]
	if seqText[0] != '-' {
		return time.Time{}, 0, false
	}
	seqText = seqText[1:]
	for i := 0; i < len(seqText); i++ {
		if seqText[i] < '0' || seqText[i] > '9' {
			return time.Time{}, 0, false
		}
	}
	seq, err := strconv.Atoi(seqText)
	if err != nil {
		return time.Time{}, 0, false
	}
	stamp, err := time.Parse(stampLayout, stampText)
	if err != nil || stamp.Format(stampLayout) != stampText {
		return time.Time{}, 0, false
	}
	return stamp, seq, true
}

// generations lists the rotated generations (regular files only), oldest
// first.
func (s *Store) generations() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("audit: listing record directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if _, _, ok := parseGeneration(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names, nil // os.ReadDir sorts by name, which is oldest first
}

// trim deletes the oldest generations beyond maxRetained. A failure is
// logged and never fails an append.
func (s *Store) trim() {
	gens, err := s.generations()
	if err != nil {
		s.log.Warn("audit retention: listing generations failed", "err", err)
		return
	}
	for i := 0; i < len(gens)-int(s.maxRetained); i++ {
		err := s.h.remove(filepath.Join(s.dir, gens[i]))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("audit retention: removing an old generation failed", "file", gens[i], "err", err)
		}
	}
}

// Close waits for in-flight appends to finish and closes the store's files.
// Later Appends return ErrClosed; a second Close returns nil.
func (s *Store) Close() error {
	if s.group.Close() {
		return nil
	}
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	s.dirClosed = true
	return errors.Join(s.f.Close(), s.dirf.Close())
}
