//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// fileGroup returns the gid owning fi, or -1 (chown's "unchanged").
func fileGroup(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Gid)
	}
	return -1
}
