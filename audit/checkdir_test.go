package audit_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// Issue 27, item 3: a chmod 0777 of the record directory while the store is
// open let appends continue. Each append now checks the open directory
// first and fails closed; CheckDir (the daemon's tick) reports it.
func TestALoosenedRecordDirectoryFailsAppendsUntilPutRight(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("r1"))
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	err := s.Append(context.Background(), intent("r2"))
	if !errors.Is(err, audit.ErrUnsafeStore) || !strings.Contains(err.Error(), "has mode 0777") {
		t.Fatalf("append to a 0777 directory: %v, want an unsafe-store refusal naming the mode", err)
	}
	if err := s.CheckDir(); !errors.Is(err, audit.ErrUnsafeStore) {
		t.Errorf("CheckDir: %v, want the unsafe-store error", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckDir(); err != nil {
		t.Errorf("CheckDir after chmod 0700: %v", err)
	}
	appendOK(t, s, intent("r3"))
	s.Close()
	if err := s.CheckDir(); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("CheckDir after Close: %v, want ErrClosed", err)
	}
}

// The tick's CheckDir marks the store unwritable at once, so the capacity
// state shows a loosened directory before any append fails; the first
// append after it is put right clears it.
func TestCheckDirMarksTheStoreUnwritableBeforeAnyAppend(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckDir(); !errors.Is(err, audit.ErrUnsafeStore) {
		t.Fatalf("CheckDir: %v", err)
	}
	if st := s.Stats(); !st.LastAppendFailed || st.AppendFailures != 0 {
		t.Errorf("after CheckDir alone: %+v, want unwritable with no append failure counted", st)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	appendOK(t, s, intent("r1"))
	if s.Stats().LastAppendFailed {
		t.Errorf("still unwritable after a successful append")
	}
}
