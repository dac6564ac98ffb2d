//go:build unix

package audit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// TestAReopenClearsABrokenStore holds that a successful reopen (SIGHUP)
// clears the broken state a failed rollback left: the torn line stays in
// the old file and appends go on in the fresh one.
func TestAReopenClearsABrokenStore(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	appendOK(t, s, intent("q1"))
	f.set(func(f *faults) { f.failWrite, f.partial, f.failTruncate = true, 20, true })
	if err := s.Append(context.Background(), intent("q2")); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("got %v, want ErrBroken", err)
	}
	f.reset()
	must(t, os.Rename(filepath.Join(dir, audit.ActiveFileName), filepath.Join(dir, "old")))
	must(t, s.Reopen())
	if err := s.Append(context.Background(), intent("q3")); err != nil {
		t.Fatalf("append after a successful reopen of a broken store: %v, want it written", err)
	}
	if got := lines(readActive(t, dir)); len(got) != 1 || !strings.Contains(got[0], `"q3"`) {
		t.Errorf("the reopened active file holds %q, want q3 alone", got)
	}
	if s.Stats().LastAppendFailed {
		t.Error("still marked failed after a reopen and an append succeeded")
	}
}

// TestAFailedSIGHUPReopenMakesTheStoreUnwritable holds that a Reopen that
// fails (the SIGHUP path, with no append after it) turns the capacity
// state unwritable at once, and a successful one turns it back.
func TestAFailedSIGHUPReopenMakesTheStoreUnwritable(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("before"))
	p, err := audit.NewCapacityProbe(s, 0)
	must(t, err)
	audit.SetStatfs(p, func(string) (uint64, error) { return 1 << 40, nil })
	probe := func() audit.CapacityState {
		t.Helper()
		c, err := p.Probe()
		must(t, err)
		return c.State
	}
	if got := probe(); got != audit.CapacityOK {
		t.Fatalf("before the reopen: %v, want ok", got)
	}
	active := filepath.Join(dir, audit.ActiveFileName)
	must(t, os.Remove(active))
	must(t, os.Symlink(filepath.Join(dir, "elsewhere"), active))
	var we *audit.WriteError
	if err := s.Reopen(); !errors.As(err, &we) || we.Op != "reopen" {
		t.Fatalf("Reopen onto a symlink: %v, want a *WriteError at reopen", err)
	}
	if !s.Stats().LastAppendFailed {
		t.Error("LastAppendFailed is false after a failed reopen")
	}
	if got := probe(); got != audit.CapacityUnwritable {
		t.Errorf("after a failed reopen the capacity state is %v, want unwritable", got)
	}
	must(t, os.Remove(active))
	must(t, s.Reopen())
	if got := probe(); got != audit.CapacityOK {
		t.Errorf("after a successful reopen the capacity state is %v, want ok", got)
	}
}
