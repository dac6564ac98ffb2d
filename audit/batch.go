package audit

import (
	"context"
	"time"
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
		ps = append(ps, &pending{line: line, done: make(chan verdict, 1)})
		at = append(at, i)
	}
	if len(ps) > 0 {
		s.enqueueAll(ps)
		for j, p := range ps {
			errs[at[j]] = p.err
		}
	}
	d := time.Since(start)
	for i, r := range recs {
		var phase Phase
		if r != nil {
			phase = r.Phase
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

// enqueueAll queues ps together (so one leader commits them all) and
// returns once each has its result in p.err. It leads the commit itself
// when no leader is active, or when leadership is handed to one of ps.
func (s *Store) enqueueAll(ps []*pending) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, p := range ps {
			p.err = ErrClosed
		}
		return
	}
	s.queue = append(s.queue, ps...)
	lead := !s.flushing
	s.flushing = true
	s.mu.Unlock()
	if lead {
		// Our lines are all in the queue the leader takes: one commit.
		s.lead(ps[0])
		for _, p := range ps[1:] {
			<-p.done // sent by lead; p.err is set
		}
		return
	}
	for _, p := range ps {
		if v := <-p.done; v.lead {
			// Leadership passes to the first queued appender, and ours
			// were queued together: this leader's commit covers every one
			// of ps not yet answered.
			s.lead(p)
		}
	}
}
