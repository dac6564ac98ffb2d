//go:build linux

package coalesce

import (
	"errors"
	"os"
	"syscall"
)

// openIn opens name in the held directory dir by its descriptor (openat),
// never by path: a state directory renamed or replaced after start does
// not redirect the checkpoint. O_NOFOLLOW refuses a symlink, O_NONBLOCK
// keeps a FIFO (or a device) put at the name from blocking the tick, and
// anything but a regular file is refused with a *NotRegularError.
func openIn(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	fd, err := openat(int(dir.Fd()), name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	return regular(f, name)
}

func openat(dirfd int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flag, perm)
		if !errors.Is(err, syscall.EINTR) {
			return fd, err
		}
	}
}

// removeIn removes name from the held directory dir (unlinkat).
func removeIn(dir *os.File, name string) error {
	if err := syscall.Unlinkat(int(dir.Fd()), name); err != nil {
		return &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	return nil
}
