//go:build linux

package server

import (
	"fmt"
	"io/fs"
	"net"
	"syscall"
)

// peerUID reads the connecting process's user id with SO_PEERCRED. The
// kernel records the credentials at connect time; the pid and gid are
// ignored on purpose.
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("wire: peer credentials: %w", err)
	}
	var (
		cred *syscall.Ucred
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("wire: peer credentials: %w", err)
	}
	if gerr != nil {
		return 0, fmt.Errorf("wire: peer credentials: SO_PEERCRED: %w", gerr)
	}
	if cred == nil {
		return 0, fmt.Errorf("wire: peer credentials: SO_PEERCRED returned nothing")
	}
	return cred.Uid, nil
}

// fileGID is the group id of fi (from os.Lstat), -1 if unknown.
func fileGID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Gid)
	}
	return -1
}
