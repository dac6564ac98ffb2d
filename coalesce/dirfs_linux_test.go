package coalesce

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 41: a FIFO or a directory at a checkpoint's name is
// refused at once, for reading and for writing, never opened to block the
// tick; and the files are reached through the held directory, not its
// path: the directory renamed after start still receives them.
func TestDirFSRefusesAnythingButARegularFileWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cfs := dirFS{dir: d}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "sub"} {
		var nr *NotRegularError
		if err := cfs.WriteFile(name, []byte("x")); err == nil {
			t.Errorf("WriteFile(%s) succeeded, want refused", name)
		}
		if _, err := cfs.ReadFile(name); !errors.As(err, &nr) || nr.Name != name {
			t.Errorf("ReadFile(%s) = %v, want a *NotRegularError naming it", name, err)
		} else if !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("the error %q does not say what is wrong", err)
		}
	}
	moved := dir + ".moved"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(moved, dir) // for t.TempDir's cleanup
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := cfs.WriteFile("a", []byte("held")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(moved, "a")); err != nil || string(b) != "held" {
		t.Fatalf("after the directory moved: %q, %v in the held directory; want the file written there", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file was written by path into the directory that replaced the held one: %v", err)
	}
	if err := cfs.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(moved, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Remove left the held directory's file: %v", err)
	}
	os.Remove(dir)
}

// A FIFO put at the next checkpoint file while the daemon runs: the tick
// returns at once with the refusal and counts a failure; once it is gone
// the next tick writes.
func TestATickPastAFIFOFailsAtOnceAndIsCounted(t *testing.T) {
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f := newFixture(t) // for its sink
	c, err := StartCheckpoint(d, Recovery{}, ckptT0)
	if err != nil {
		t.Fatal(err)
	}
	c.Track(f.sink)
	next := filepath.Join(dir, CheckpointFile(c.seq+1))
	os.Remove(next)
	if err := syscall.Mkfifo(next, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := c.Tick(context.Background(), time.Time{}); err == nil {
		t.Fatal("the tick wrote past a FIFO")
	}
	if c.Failures() != 1 {
		t.Fatalf("Failures() = %d, want 1", c.Failures())
	}
	os.Remove(next)
	if err := c.Tick(context.Background(), time.Time{}); err != nil {
		t.Fatalf("the tick after the FIFO went: %v", err)
	}
}
