//go:build unix

package audit

import (
	"io/fs"
	"syscall"
)

// Open flags that keep the store from following a symlink or blocking on a
// FIFO planted where a file is expected.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)

// errPlatform is nil where the store's guarantees can be kept.
var errPlatform error

// linkCount returns a file's hard-link count (0 once it is deleted).
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

// statfsFree returns the bytes available to an unprivileged writer on the
// file system holding path (f_bavail × f_bsize), saturating.
func statfsFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	return mulSat(uint64(st.Bavail), uint64(st.Bsize)), nil
}
