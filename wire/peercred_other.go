//go:build !linux

package wire

import (
	"errors"
	"io/fs"
	"net"
)

// PeerUID is implemented on Linux only (SO_PEERCRED).
func PeerUID(*net.UnixConn) (uint32, error) {
	return 0, errors.New("wire: peer credentials are supported on Linux only")
}

// peerCredentials: without SO_PEERCRED the client cannot check the
// server's uid, and does not try.
const peerCredentials = false

// FileOwner is unknown off Linux.
func FileOwner(fs.FileInfo) (uint32, bool) { return 0, false }

// unmappedUID: no user namespaces to tell apart off Linux.
func unmappedUID(uint32) bool { return false }
