//go:build linux

package server

import (
	"io/fs"
	"net"
	"syscall"

	"github.com/registrar-otel/registrar-otel/wire"
)

// peerUID reads the connecting process's user id (wire.PeerUID).
func peerUID(c *net.UnixConn) (uint32, error) { return wire.PeerUID(c) }

// fileGID is the group id of fi (from os.Lstat), -1 if unknown.
func fileGID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Gid)
	}
	return -1
}
