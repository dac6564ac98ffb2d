//go:build !linux

package server

import (
	"errors"
	"io/fs"
	"net"

	"github.com/registrar-otel/registrar-otel/wire"
)

// peerUID is implemented on Linux only (SO_PEERCRED). Elsewhere a unix
// connection has no identity and never reaches the verbs.
func peerUID(*net.UnixConn) (uint32, error) {
	return 0, errors.New("wire: peer credentials are supported on Linux only")
}

// fileGID is the group id of fi; unknown (-1) off Linux.
func fileGID(fs.FileInfo) int { return -1 }
