package audit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// Refuse is the directory guard's hold on the store: while it is set, every
// append fails closed (nothing written, counted as a failure, the store
// unwritable at once, even before an append); Refuse(nil) lets appends
// through again and clears the unwritable mark it set.
func TestRefuseFailsEveryAppendClosedUntilLifted(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("r1"))
	before := readActive(t, dir)
	cause := errors.New("registrar.state_dir is no longer private")
	s.Refuse(cause)
	if st := s.Stats(); !st.LastAppendFailed {
		t.Errorf("right after Refuse: LastAppendFailed false, want the store unwritable before any append")
	}
	if !errors.Is(s.Refused(), cause) {
		t.Errorf("Refused() = %v, want the cause", s.Refused())
	}
	err := s.Append(context.Background(), intent("r2"))
	var we *audit.WriteError
	if !errors.As(err, &we) || we.Op != "refused" || !errors.Is(err, cause) {
		t.Fatalf("append while refused: %v, want a *WriteError at refused wrapping the cause", err)
	}
	batchErrs := s.AppendBatch(context.Background(), []*audit.Record{intent("r3"), intent("r4")})
	for i, err := range batchErrs {
		if !errors.Is(err, cause) {
			t.Errorf("batch record %d while refused: %v, want the cause", i, err)
		}
	}
	if got := readActive(t, dir); string(got) != string(before) {
		t.Errorf("the active file changed while refused:\n%s\nwant\n%s", got, before)
	}
	if st := s.Stats(); st.AppendFailures != 3 || !st.LastAppendFailed {
		t.Errorf("stats %+v, want 3 failures counted and the store unwritable", st)
	}
	s.Refuse(nil)
	if st := s.Stats(); st.LastAppendFailed || s.Refused() != nil {
		t.Errorf("after Refuse(nil): LastAppendFailed %v, Refused %v; want both cleared", st.LastAppendFailed, s.Refused())
	}
	appendOK(t, s, intent("r5"))
}
