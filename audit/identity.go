package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// ReopenCause says why the store reopened its active file. Its String is
// the cause label of registrar_audit_file_reopened_total and of the store's
// log lines.
type ReopenCause uint8

// The causes, in the order the identity check tells them apart.
const (
	// ReopenDirectoryRemoved: the record directory no longer exists at its
	// path (rm -rf); it is re-created with the start-up safety rules.
	ReopenDirectoryRemoved ReopenCause = iota
	// ReopenDirectoryReplaced: the path names a different directory than
	// the one the store opened (removed and re-created, or moved away).
	ReopenDirectoryReplaced
	// ReopenFileDeleted: the active file was unlinked (the open file has
	// no link left).
	ReopenFileDeleted
	// ReopenFileRenamed: the active file was moved away (it still has a
	// link elsewhere), e.g. by a logrotate rule.
	ReopenFileRenamed
	// ReopenFileReplaced: the active path names another file than the
	// open one.
	ReopenFileReplaced
	// ReopenSIGHUP: the operator asked (Store.Reopen, SIGHUP to the
	// daemon). The only cause that is not an ERROR.
	ReopenSIGHUP

	numReopenCauses = int(ReopenSIGHUP) + 1
)

// NumReopenCauses is the number of ReopenCause values, for arrays indexed
// by cause.
const NumReopenCauses = numReopenCauses

var reopenCauseNames = [numReopenCauses]string{
	ReopenDirectoryRemoved:  "directory_removed",
	ReopenDirectoryReplaced: "directory_replaced",
	ReopenFileDeleted:       "deleted",
	ReopenFileRenamed:       "renamed",
	ReopenFileReplaced:      "replaced",
	ReopenSIGHUP:            "sighup",
}

// String returns the cause's label spelling, e.g. "renamed".
func (c ReopenCause) String() string {
	if int(c) < numReopenCauses {
		return reopenCauseNames[c]
	}
	return fmt.Sprintf("reopen_cause(%d)", uint8(c))
}

// ensureActive is the identity check every write path runs before it
// writes: it must be called by the holder of the write path (the
// committing leader, under the store's commit protocol) immediately before
// writing to s.f. If the configured directory and active path still name
// the open directory and file (same device and inode), it returns nil at
// the cost of two lstat calls. Otherwise (deleted, renamed, replaced,
// directory removed) it reopens a fresh active file at the configured path
// and returns reopen's error: no record is ever written to a file the
// configured path no longer names, and while the reopen fails, so does
// every append (fail closed).
func (s *Store) ensureActive() error {
	if err := s.checkRefused(); err != nil {
		return err
	}
	if err := s.CheckDir(); err != nil {
		return &WriteError{Op: "check", Err: err}
	}
	cause, changed, err := s.identityChanged()
	if err != nil {
		return &WriteError{Op: "check", Err: err}
	}
	if !changed {
		return nil
	}
	return s.reopen(cause)
}

// CheckDir applies the record directory's mode and owner rules again, by
// fstat on the open directory: it returns an *UnsafeStoreError when the
// directory was made group- or world-writable or given to another uid
// since Open. Every write path calls it first, so such a directory fails
// every append (fail closed, counted as append failures) until it is put
// right; the daemon also calls it on its tick, so the change is logged even
// while nothing is appended. An unsafe directory marks the store unwritable
// at once (Stats.LastAppendFailed), until an append succeeds. It costs one
// fstat. Safe for concurrent use.
func (s *Store) CheckDir() error {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if s.dirClosed {
		return ErrClosed
	}
	err := privdir.Recheck(s.dirf, s.dir, dirRules)
	if ue, ok := errors.AsType[*privdir.UnsafeError](err); ok {
		// Unwritable now, not only after the next append fails: the
		// capacity state (and its alert) shows it while nothing is
		// appended; the next successful append clears it.
		s.lastFailed.Store(true)
		return &UnsafeStoreError{Path: s.dir, Problem: ue.Detail()}
	}
	return err
}

// identityChanged compares the configured paths with the open directory and
// active file.
func (s *Store) identityChanged() (ReopenCause, bool, error) {
	di, err := os.Lstat(s.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ReopenDirectoryRemoved, true, nil
	case err != nil:
		return 0, false, fmt.Errorf("checking the record directory: %w", err)
	case !os.SameFile(di, s.dirID):
		return ReopenDirectoryReplaced, true, nil
	}
	ai, err := os.Lstat(filepath.Join(s.dir, ActiveFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if st, serr := s.raw.Stat(); serr == nil {
			if n, ok := linkCount(st); ok && n > 0 {
				return ReopenFileRenamed, true, nil
			}
		}
		return ReopenFileDeleted, true, nil
	case err != nil:
		return 0, false, fmt.Errorf("checking the active file: %w", err)
	case !os.SameFile(ai, s.fileID):
		return ReopenFileReplaced, true, nil
	}
	return 0, false, nil
}

// reopen opens the active file at the configured path afresh, re-creating
// or reopening the record directory if it is not the open one, with the
// same safety rules as Open (0700, no symlink, not group/world-writable,
// 0600 file, torn line terminated). On success it installs the new file,
// closes the old one, clears a broken state (the line that could not be
// rolled back stays behind in the old file, as after a restart), counts the
// cause and logs it (ERROR, SIGHUP at INFO). On failure the old file stays
// open but unused (the next write path retries the reopen) and the error is
// a *WriteError with Op "reopen". The caller holds the write path.
func (s *Store) reopen(cause ReopenCause) error {
	ctx := context.Background()
	dirf, dirID := s.dirf, s.dirID
	newDir := false
	if di, err := os.Lstat(s.dir); err != nil || !os.SameFile(di, s.dirID) {
		d, id, err := openDir(s.dir)
		if err != nil {
			return s.reopenFailed(cause, err)
		}
		dirf, dirID, newDir = d, id, true
	}
	f, id, size, err := s.openActive(dirf)
	if err != nil {
		if newDir {
			dirf.Close()
		}
		return s.reopenFailed(cause, err)
	}
	if err := s.f.Close(); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "audit closing the previous active file failed", slog.Any("error", err))
	}
	if newDir {
		s.dirMu.Lock()
		if err := s.dirf.Close(); err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "audit closing the previous record directory failed", slog.Any("error", err))
		}
		s.dirf, s.dirID = dirf, dirID
		s.dirMu.Unlock()
		s.dirDirty = false
	}
	s.install(f, id, size)
	s.countLines()
	s.broken = nil
	s.reopens[cause].Add(1)
	s.lastFailed.Store(false)
	path := filepath.Join(s.dir, ActiveFileName)
	if cause == ReopenSIGHUP {
		s.log.LogAttrs(ctx, slog.LevelInfo, "audit active file reopened on request",
			slog.String("cause", cause.String()), slog.String("file", path), slog.Uint64("size", size))
		return nil
	}
	s.errLog.Log(ctx, "reopened "+cause.String(), slog.LevelError,
		"audit active file was no longer at its path; reopened a fresh active file there (records go on in it; nothing was written to the old one after the change)",
		slog.String("cause", cause.String()), slog.String("file", path), slog.Bool("directory_recreated", newDir), slog.Uint64("size", size))
	return nil
}

func (s *Store) reopenFailed(cause ReopenCause, err error) error {
	s.lastFailed.Store(true)
	return &WriteError{Op: "reopen", Err: fmt.Errorf("active file %s: %w", cause, err)}
}

// Reopen reopens the active file at the configured path, whether or not it
// still names the open one: the convention logrotate expects after moving
// the file away (SIGHUP to the daemon calls it). It is served in order with
// the appends queued before it; appends queued after it go to the reopened
// file. A failure is logged at ERROR (at most once per interval) and
// returned; appends then retry the reopen. After Close it returns
// ErrClosed. Safe for concurrent use.
func (s *Store) Reopen() error {
	err := s.enqueue(entry{reopen: true})
	if err != nil && !errors.Is(err, ErrClosed) {
		s.errLog.Log(context.Background(), "reopen failed sighup", slog.LevelError,
			"audit reopen of the active file on request failed; appends are refused until a reopen succeeds",
			slog.String("cause", ReopenSIGHUP.String()), slog.Any("error", err))
	}
	return err
}

// account updates the counters the capacity probe reads and logs a failed
// append at ERROR, at most one line per (phase, failed step) per interval.
func (s *Store) account(phase Phase, err error) {
	if err == nil {
		s.lastFailed.Store(false)
		return
	}
	if errors.Is(err, ErrClosed) {
		return
	}
	s.appendFailures.Add(1)
	step := "invalid"
	var we *WriteError
	switch {
	case errors.Is(err, ErrBroken):
		step = "broken"
	case errors.As(err, &we):
		step = we.Op
	case errors.Is(err, ErrRecordTooLarge):
		step = "too_large"
	}
	if step != "invalid" && step != "too_large" {
		// The file system refused: the store is unwritable until an append
		// succeeds again.
		s.lastFailed.Store(true)
	}
	name := "unknown"
	if phase.Valid() {
		name = phase.String()
	}
	s.errLog.Log(context.Background(), "append "+name+" "+step, slog.LevelError, "audit append failed",
		slog.String("phase", name), slog.String("step", step), slog.Any("error", err))
}

// StoreStats are the store's counters since Open, a plain value.
type StoreStats struct {
	// AppendFailures counts Appends that returned an error (Close excepted).
	AppendFailures uint64
	// LastAppendFailed reports whether the last append, or reopen, failed in
	// the file system: the store is unwritable until one succeeds.
	LastAppendFailed bool
	// Reopens counts reopens of the active file, by cause.
	Reopens [NumReopenCauses]uint64
	// HeldFiles is how many generations retention keeps past
	// MaxRetainedFiles because they are younger than MinRetention.
	HeldFiles uint64
	// RotatedRecords counts the rotated records retention wrote (one per
	// generation it deleted), and RetentionFailures the retention rounds
	// that failed and kept a generation past the budget, since Open.
	RotatedRecords, RetentionFailures uint64
	// Seal is the sealing state (zero when the store is not sealed).
	Seal SealStats
}

// Stats returns the store's counters. It takes no lock and is safe for
// concurrent use (telemetry and the capacity probe call it).
func (s *Store) Stats() StoreStats {
	st := StoreStats{
		AppendFailures:    s.appendFailures.Load(),
		LastAppendFailed:  s.lastFailed.Load(),
		HeldFiles:         s.held.Load(),
		RotatedRecords:    s.rotated.Load(),
		RetentionFailures: s.retainFailures.Load(),
		Seal:              s.sealStats(),
	}
	for i := range st.Reopens {
		st.Reopens[i] = s.reopens[i].Load()
	}
	return st
}
