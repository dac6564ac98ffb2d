//go:build unix

package audit_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// TestOpenCreatesPrivateDirectoryWhateverTheUmask runs with a umask that
// would leave the directory 0500 and the file 0400: Open restates both.
func TestOpenCreatesPrivateDirectoryWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o277)
	defer syscall.Umask(old)
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("q1"))
	if got := mode(t, dir); got != 0o700 {
		t.Errorf("directory mode: got %#o, want 0700", got)
	}
	if got := mode(t, filepath.Join(dir, audit.ActiveFileName)); got != 0o600 {
		t.Errorf("active file mode: got %#o, want 0600", got)
	}
}

// looseDir is a setup of TestOpenRefusesUnsafePaths: a directory chmodded
// to mode.
func looseDir(mode fs.FileMode) func(t *testing.T, base string) string {
	return func(t *testing.T, base string) string {
		p := filepath.Join(base, "loose")
		must(t, os.Mkdir(p, 0o700))
		must(t, os.Chmod(p, mode))
		return p
	}
}

func TestOpenRefusesUnsafePaths(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, base string) string // returns the Dir to open
		want  string                                 // in the error
	}{
		{"symlinked directory", func(t *testing.T, base string) string {
			real := filepath.Join(base, "real")
			must(t, os.Mkdir(real, 0o700))
			must(t, os.Symlink(real, filepath.Join(base, "link")))
			return filepath.Join(base, "link")
		}, "is a symlink"},
		{"directory is a file", func(t *testing.T, base string) string {
			p := filepath.Join(base, "file")
			must(t, os.WriteFile(p, nil, 0o600))
			return p
		}, "is not a directory"},
		{"group-writable directory", looseDir(0o770), "has mode 0770"},
		{"world-writable directory", looseDir(0o1777), "has mode 0777"},
		{"symlinked active file", func(t *testing.T, base string) string {
			p := filepath.Join(base, "audit")
			must(t, os.Mkdir(p, 0o700))
			must(t, os.WriteFile(filepath.Join(base, "elsewhere"), nil, 0o600))
			must(t, os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(p, audit.ActiveFileName)))
			return p
		}, "is a symlink"},
		{"active file is a FIFO", func(t *testing.T, base string) string {
			p := filepath.Join(base, "audit")
			must(t, os.Mkdir(p, 0o700))
			must(t, syscall.Mkfifo(filepath.Join(p, audit.ActiveFileName), 0o600))
			return p
		}, "is not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t, t.TempDir())
			s, err := audit.Open(audit.Options{Dir: dir})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want a refusal")
			}
			if !errors.Is(err, audit.ErrUnsafeStore) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrUnsafeStore mentioning %q", err, tc.want)
			}
		})
	}
}

func TestOpenTerminatesATornFinalLine(t *testing.T) {
	dir := writeStore(t, goodIntent+"\n"+`{"record_version":1,"pha`)
	s, err := audit.Open(audit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendOK(t, s, intent("q9"))
	ls := lines(readActive(t, dir))
	if len(ls) != 3 || ls[1] != `{"record_version":1,"pha`+"\n" {
		t.Fatalf("got %q, want the torn line kept, terminated, and the new record after it", ls)
	}
}
