//go:build linux

package wire

import (
	"fmt"
	"io/fs"
	"net"
	"syscall"
)

// PeerUID reads the user id of the process at the other end of c with
// SO_PEERCRED: for the server, the caller's; for the client, the
// server's. The kernel records the credentials at connect (and listen)
// time; the pid and gid are ignored on purpose.
func PeerUID(c *net.UnixConn) (uint32, error) {
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

// peerCredentials reports that PeerUID works here.
const peerCredentials = true

// FileOwner is the user id that owns fi (from os.Stat or os.Lstat), and
// false when the platform does not say.
func FileOwner(fi fs.FileInfo) (uint32, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid, true
	}
	return 0, false
}
