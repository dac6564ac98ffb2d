package audit

// refusal is the cause Refuse installed.
type refusal struct{ cause error }

// Refuse makes every append fail closed with cause until Refuse(nil): a
// *WriteError with Op "refused" wrapping cause, counted as an append
// failure and marking the store unwritable, exactly like a write the file
// system refused. The daemon's directory guard calls it while a directory
// the evidence depends on (the record directory, registrar.state_dir, the
// socket's directory) is no longer private, so nothing is recorded, and no
// mint is answered, in a place another uid may change.
//
// Refuse(cause) marks the store unwritable at once, so the capacity state
// (and RegistrarAuditStoreCritical) shows it even while nothing is
// appended. Refuse(nil) after a refusal clears that mark: the cause is gone,
// and the next append says whether the store writes. A nil cause on a store
// that is not refusing changes nothing. Safe for concurrent use.
func (s *Store) Refuse(cause error) {
	if cause == nil {
		if s.refused.Swap(nil) != nil {
			s.lastFailed.Store(false)
		}
		return
	}
	s.refused.Store(&refusal{cause: cause})
	s.lastFailed.Store(true)
}

// Refused returns the cause Refuse installed, or nil.
func (s *Store) Refused() error {
	if r := s.refused.Load(); r != nil {
		return r.cause
	}
	return nil
}

// checkRefused is the write path's first check.
func (s *Store) checkRefused() error {
	if r := s.refused.Load(); r != nil {
		return &WriteError{Op: "refused", Err: r.cause}
	}
	return nil
}
