//go:build unix

package config

import (
	"io/fs"
	"syscall"
)

// Open flags that keep openChecked from following a symlink or blocking on
// a FIFO planted where the file is expected.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)

// fileOwner returns the uid owning fi.
func fileOwner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
