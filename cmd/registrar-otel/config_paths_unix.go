//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// ownerOf returns the uid owning fi.
func ownerOf(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// writable reports whether this process may create entries in dir.
func writable(dir string) bool {
	return syscall.Access(dir, 0x2|0x1) == nil // W_OK|X_OK
}
