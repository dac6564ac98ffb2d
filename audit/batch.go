package audit

import (
	"context"
	"errors"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/groupcommit"
)

// AppendBatch writes recs as one commit: their lines are written with one
// write and made durable with one fsync (two writes and two fsyncs when the
// batch crosses a rotation), instead of one fsync per record. It returns
// one error per record, in order, nil for each record that is durable.
//
// Every record is treated exactly as Append treats it: bounded, stamped,
// validated and serialized on its own, each a whole line. A record that
// fails validation or is larger than MaxFileBytes gets its own error and
// is left out; the others are still written. A failed write or fsync is
// rolled back like Append's and fails every record it covered (none of
// them is on disk). After Close every record gets ErrClosed.
//
// The batch goes through the same commit path as Append (the group-commit
// leader's commit, with every check it makes before writing), so it is
// never written around a check Append makes. Concurrent Appends may share
// its fsync. The Observer is told about each record. Like Append, ctx is
// not used to cancel. A nil or empty recs returns nil.
func (s *Store) AppendBatch(ctx context.Context, recs []*Record) []error {
	if len(recs) == 0 {
		return nil
	}
	start := time.Now()
	errs := make([]error, len(recs))
	ps := make([]*pending, 0, len(recs))
	at := make([]int, 0, len(recs)) // at[j] is the index in recs of ps[j]
	for i, r := range recs {
		line, err := s.batchLine(r)
		if err != nil {
			errs[i] = err
			continue
		}
		ps = append(ps, groupcommit.NewOp(s.lineEntry(line)))
		at = append(at, i)
	}
	if len(ps) > 0 {
		// Queued together, so one leader commits them all.
		closed := !s.group.Do(ps...)
		for j, p := range ps {
			errs[at[j]] = p.Err
			if closed {
				errs[at[j]] = ErrClosed
			}
		}
	}
	d := time.Since(start)
	for i, r := range recs {
		var phase Phase
		if r != nil {
			phase = r.Phase
		}
		if errors.Is(errs[i], ErrRetentionHeld) {
			continue // as Append: not attempted, not a failure
		}
		// As Append does: failures counted for the capacity probe (and
		// logged, throttled), a success clearing the unwritable state.
		s.account(phase, errs[i])
		if s.obs != nil {
			s.obs.Appended(phase, d, errs[i])
		}
	}
	return errs
}

// batchLine prepares r's line exactly as Append does: a copy, stamped with
// the store's clock if its TS is zero, bounded and validated by Marshal,
// and refused if it could never fit in a file.
func (s *Store) batchLine(r *Record) ([]byte, error) {
	if r == nil {
		return nil, &FieldError{Field: "record", Problem: "is nil"}
	}
	if err := s.checkHeld(r); err != nil {
		return nil, err
	}
	rec := *r
	if rec.TS.IsZero() {
		rec.TS = s.now()
	}
	line, err := Marshal(&rec)
	if err != nil {
		return nil, err
	}
	if n := uint64(len(line)); n > s.maxFile {
		return nil, &TooLargeError{LineBytes: n, MaxFileBytes: s.maxFile}
	}
	return line, nil
}
