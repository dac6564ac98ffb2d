//go:build linux

package audit

import (
	"errors"
	"os"
	"syscall"
)

// openIn opens name in the held directory dir by its descriptor (openat),
// never by path: a state directory renamed or replaced after start does
// not redirect the key. O_NOFOLLOW refuses a symlink (errSymlink),
// O_NONBLOCK keeps a FIFO put at the name from blocking, and anything but
// a regular file is refused (*notRegularError). As coalesce's checkpoint
// files are opened.
func openIn(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Openat(int(dir.Fd()), name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, &os.PathError{Op: "openat", Path: name, Err: errSymlink}
	}
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return regular(os.NewFile(uintptr(fd), name))
}

// removeIn removes name from the held directory dir (unlinkat).
func removeIn(dir *os.File, name string) error {
	if err := syscall.Unlinkat(int(dir.Fd()), name); err != nil {
		return &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	return nil
}

// renameIn renames oldName over newName in the held directory dir
// (renameat).
func renameIn(dir *os.File, oldName, newName string) error {
	fd := int(dir.Fd())
	if err := syscall.Renameat(fd, oldName, fd, newName); err != nil {
		return &os.LinkError{Op: "renameat", Old: oldName, New: newName, Err: err}
	}
	return nil
}
