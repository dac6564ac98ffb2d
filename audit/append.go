package audit

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/groupcommit"
)

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
	if r != nil {
		// Not an append that failed: the record is not attempted, and
		// neither counted nor logged as a failure (the capacity state
		// says retention_held).
		if err := s.checkHeld(r); err != nil {
			return err
		}
	}
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
// still names the open active file. Reopen and retention requests are
// served in their place in the queue.
func (s *Store) commit(batch []*pending) {
	// fail sets err on every line up to the next request.
	fail := func(i int, err error) int {
		for ; i < len(batch) && !batch[i].Item.request(); i++ {
			batch[i].Err = err
		}
		return i
	}
	for i := 0; i < len(batch); {
		switch {
		case batch[i].Item.reopen:
			batch[i].Err = s.reopen(ReopenSIGHUP)
			i++
			continue
		case batch[i].Item.retain:
			s.retain()
			i++
			continue
		case batch[i].Item.seal != 0:
			batch[i].Err = s.sealNow(batch[i].Item.seal)
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
		s.sealIfOverdue()
		if s.size+s.sealPending()+s.lineCost(batch[i].Item.line) > s.maxFile {
			err := s.rotate()
			if err == nil && s.size+s.sealPending()+s.lineCost(batch[i].Item.line) > s.maxFile {
				// Retention's rotated records filled the fresh file: one
				// more rotation, without retention, so the line is
				// written now (the next rotation deletes what is due).
				err = s.rotateFile()
			}
			if err != nil {
				i = fail(i, err)
				continue
			}
		}
		j, total := i, s.sealPending()
		for j < len(batch) && !batch[j].Item.request() && s.size+total+s.lineCost(batch[j].Item.line) <= s.maxFile {
			total += s.lineCost(batch[j].Item.line)
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
//
// It is the one place a line of the store is written, so it is where a
// sealed store chains them (seal.go): each line gets its chain value, a
// sealed record due is written first, and the chain's state moves on only
// once the write is durable. buf may then be empty: a seal alone.
func (s *Store) writeSync(buf []byte) (err error) {
	if s.seal != nil {
		if len(buf) == 0 && s.seal.due == 0 {
			return nil
		}
		out, st, cerr := s.chainBuf(buf)
		if cerr != nil {
			return cerr
		}
		buf = out
		defer func() {
			if err == nil {
				s.applyChain(st)
			} else {
				s.abortChain(st)
			}
		}()
	}
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
