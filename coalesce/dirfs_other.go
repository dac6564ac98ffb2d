//go:build !linux

package coalesce

import (
	"os"
	"path/filepath"
)

// openIn opens name in dir by path (the descriptor-relative calls are
// Linux's here), refusing anything but a regular file.
func openIn(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir.Name(), name), flag|oNoFollow, os.FileMode(perm))
	if err != nil {
		return nil, err
	}
	return regular(f, name)
}

// removeIn removes name from dir by path.
func removeIn(dir *os.File, name string) error { return os.Remove(filepath.Join(dir.Name(), name)) }
