//go:build !linux

package audit

import (
	"os"
	"path/filepath"
)

// openIn opens name in dir by path (the descriptor-relative calls are
// Linux's here), never following a symlink, refusing anything but a
// regular file.
func openIn(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	p := filepath.Join(dir.Name(), name)
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, &os.PathError{Op: "open", Path: name, Err: errSymlink}
	}
	f, err := os.OpenFile(p, flag|oNoFollow|oNonBlock, os.FileMode(perm))
	if err != nil {
		return nil, err
	}
	return regular(f)
}

// removeIn removes name from dir by path.
func removeIn(dir *os.File, name string) error { return os.Remove(filepath.Join(dir.Name(), name)) }

// renameIn renames oldName over newName in dir by path.
func renameIn(dir *os.File, oldName, newName string) error {
	return os.Rename(filepath.Join(dir.Name(), oldName), filepath.Join(dir.Name(), newName))
}
