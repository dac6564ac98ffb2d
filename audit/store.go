package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/groupcommit"
	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
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
	// MinRetention (registrar.audit_min_retention_seconds) keeps every
	// generation younger than it, even past MaxRetainedFiles: 0 (the
	// default) keeps none longer than the budget. While it holds one past
	// the budget, a mint's intent is refused (*RetentionHeldError) and the
	// capacity state is retention_held.
	MinRetention time.Duration
	// Observer, if non-nil, is told the outcome of every Append.
	Observer Observer
	// Seal, if non-nil, seals the store (seal.go): every line is chained
	// under its key, which evolves one way. The store owns it from Open
	// on (it writes the evolved keys to its file and overwrites them in
	// memory at Close). nil: the store is not sealed, and writes lines
	// exactly as a store that never was.
	Seal *SealKey
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
	// minRetention is Options.MinRetention.
	minRetention time.Duration
	log          *slog.Logger
	now          func() time.Time
	obs          Observer
	h            hooks
	errLog       *logthrottle.Throttle

	// Read by the capacity probe and telemetry without the store lock.
	appendFailures atomic.Uint64           // appends that failed in the file system, since Open
	lastFailed     atomic.Bool             // the last append (or reopen) failed in the file system, or Refuse holds it
	refused        atomic.Pointer[refusal] // Refuse's cause: every append fails closed while set
	reopens        [numReopenCauses]atomic.Uint64
	held           atomic.Uint64             // generations retention keeps past the budget for MinRetention
	heldUntil      atomic.Int64              // when the oldest of them ages out (Unix nanoseconds)
	rotated        atomic.Uint64             // rotated records written since Open
	retainFailures atomic.Uint64             // retention rounds that failed since Open
	sealPub        atomic.Pointer[sealState] // the seal's published state; nil when not chained
	keyFailures    atomic.Uint64             // key file writes that failed since Open
	keyStale       atomic.Bool               // the key file lags the current epoch
	// chainedWithoutKey: the store holds a chain but was opened without a
	// key. Set at Open, read-only after.
	chainedWithoutKey bool

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
	ret       retentionState
	seal      *sealer // nil: not sealed
}

// entry is one appender's line in the commit queue, or (no line) a request
// to reopen the active file or to run retention, served in queue order.
type entry struct {
	line   []byte
	reopen bool
	retain bool
	seal   SealReason // a request to end the sealing epoch now
}

// request reports whether e is a request rather than a line.
func (e entry) request() bool { return e.reopen || e.retain || e.seal != 0 }

// pending is an entry queued for a commit, with its result.
type pending = groupcommit.Op[entry]

// Open opens (creating if needed) the store in opts.Dir. A directory it
// creates is chmodded to 0700 whatever the umask; an existing one must not
// be a symlink or group/world-writable (an *UnsafeStoreError names it and
// its mode). The active file is opened 0600, append-only, without following
// a symlink. A torn final line left by a crash is terminated with '\n' so
// that no record is ever appended onto it (the scan reports it as
// malformed). Generations beyond MaxRetainedFiles are deleted, each after
// its rotated record (retain.go; failures are logged).
func Open(opts Options) (*Store, error) { return open(opts, hooks{}) }

func open(opts Options, h hooks) (*Store, error) {
	if errPlatform != nil {
		return nil, errPlatform
	}
	if opts.Dir == "" {
		return nil, errors.New("audit: Options.Dir (registrar.audit_record_dir) is empty")
	}
	// A zero option selects its default (cmp.Or: the first non-zero).
	maxFile := cmp.Or(opts.MaxFileBytes, DefaultMaxFileBytes)
	minFile := cmp.Or(h.minFileBytes, MinMaxFileBytes)
	if maxFile < minFile {
		return nil, fmt.Errorf("audit: Options.MaxFileBytes (registrar.audit_max_file_bytes) = %d is below the minimum %d", maxFile, minFile)
	}
	retained := cmp.Or(opts.MaxRetainedFiles, DefaultMaxRetainedFiles)
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
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
		dir:          opts.Dir,
		dirf:         dirf,
		dirID:        dirID,
		maxFile:      maxFile,
		maxRetained:  retained,
		minRetention: max(opts.MinRetention, 0),
		log:          logger.With("audit_dir", opts.Dir),
		now:          now,
		obs:          opts.Observer,
		h:            h,
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
	if err := s.openSeal(opts.Seal, gens); err != nil {
		raw.Close()
		dirf.Close()
		return nil, err
	}
	s.recoverRetention(gens)
	s.retain()
	s.sealAtOpen()
	return s, nil
}

// Close waits for in-flight appends to finish and closes the store's files.
// Later Appends return ErrClosed; a second Close returns nil.
//
// A sealed store ends its epoch first (a sealed record of reason stop), so
// that the key left on disk while the daemon is stopped can rewrite
// nothing written before; a failure to write it is logged.
func (s *Store) Close() error {
	if s.seal != nil {
		if err := s.enqueue(entry{seal: SealReasonStop}); err != nil && !errors.Is(err, ErrClosed) {
			s.log.LogAttrs(context.Background(), slog.LevelError, "audit sealing: writing the stop seal failed; the records of the last epoch are not sealed", slog.Any("error", err))
		}
	}
	if s.group.Close() {
		return nil
	}
	s.clearKeys()
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	s.dirClosed = true
	return errors.Join(s.f.Close(), s.dirf.Close())
}
