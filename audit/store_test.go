//go:build unix

package audit_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

var errInjected = errors.New("injected fault")

// faults is a switchboard for faultyFile, shared by every active file the
// store opens.
type faults struct {
	mu           sync.Mutex
	failWrite    bool
	partial      int // bytes really written before a failing Write returns
	failSync     bool
	failTruncate bool
	writes       int
	syncs        int
	ops          []string
}

func (f *faults) set(fn func(f *faults)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faults) reset() {
	f.set(func(f *faults) {
		f.failWrite, f.partial, f.failSync, f.failTruncate = false, 0, false, false
		f.writes, f.syncs, f.ops = 0, 0, nil
	})
}

func (f *faults) hooks() audit.TestHooks {
	return audit.TestHooks{WrapFile: func(inner audit.File) audit.File { return faultyFile{inner, f} }}
}

type faultyFile struct {
	audit.File
	f *faults
}

func (w faultyFile) Write(p []byte) (int, error) {
	w.f.mu.Lock()
	fail, partial := w.f.failWrite, w.f.partial
	w.f.writes++
	w.f.ops = append(w.f.ops, "write")
	w.f.mu.Unlock()
	if fail {
		n, err := w.File.Write(p[:min(partial, len(p))])
		if err != nil {
			return n, err
		}
		return n, errInjected
	}
	return w.File.Write(p)
}

func (w faultyFile) Sync() error {
	w.f.mu.Lock()
	fail := w.f.failSync
	w.f.syncs++
	w.f.ops = append(w.f.ops, "sync")
	w.f.mu.Unlock()
	if fail {
		return errInjected
	}
	return w.File.Sync()
}

func (w faultyFile) Truncate(size int64) error {
	w.f.mu.Lock()
	fail := w.f.failTruncate
	w.f.ops = append(w.f.ops, "truncate")
	w.f.mu.Unlock()
	if fail {
		return errInjected
	}
	return w.File.Truncate(size)
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestOpenValidatesOptions(t *testing.T) {
	if _, err := audit.Open(audit.Options{}); err == nil || !strings.Contains(err.Error(), "audit_record_dir") {
		t.Errorf("Open without Dir = %v; want an error naming audit_record_dir", err)
	}
	_, err := audit.Open(audit.Options{Dir: t.TempDir(), MaxFileBytes: 65535})
	if err == nil || !strings.Contains(err.Error(), "audit_max_file_bytes") {
		t.Errorf("Open with MaxFileBytes 65535 = %v; want an error naming audit_max_file_bytes", err)
	}
}

func TestCloseRefusesLaterAppends(t *testing.T) {
	s, _ := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("q1"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Append(context.Background(), intent("q2")); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestCloseWaitsForConcurrentAppends(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 16 {
		wg.Go(func() {
			err := s.Append(context.Background(), intent(fmt.Sprintf("q%d", i)))
			if err != nil && !errors.Is(err, audit.ErrClosed) {
				t.Errorf("Append: %v", err)
			}
			if err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	s.Close()
	wg.Wait()
	if got := len(lines(readActive(t, dir))); got != ok {
		t.Errorf("got %d lines, want the %d acknowledged appends", got, ok)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
