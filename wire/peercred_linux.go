//go:build linux

package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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

// unmappedUID reports whether uid, as SO_PEERCRED or stat reported it, is
// not a uid at all but the kernel's overflow uid (65534 unless
// /proc/sys/kernel/overflowuid says otherwise) standing for a uid that is
// not mapped into this process's user namespace. Inside such a namespace
// every unmapped server reads as that one uid, the real daemon's and a
// stranger's alike, so the client cannot tell who the server is. When
// the kernel's files cannot be read, a uid equal to the overflow uid is
// taken as unmapped: the check fails closed.
func unmappedUID(uid uint32) bool {
	ns := userNamespace()
	return uid == ns.overflow && !ns.maps(uid)
}

// userNS is what unmappedUID needs of this process's user namespace.
type userNS struct {
	overflow uint32
	uidMap   []byte // /proc/self/uid_map; nil when it could not be read
}

// userNamespace reads the overflow uid and this process's uid map once:
// a process's user namespace changes only by unshare or setns, which
// this client never calls.
var userNamespace = sync.OnceValue(func() userNS { return readUserNS(os.ReadFile) })

// readUserNS reads the kernel's overflow uid and this process's uid map
// with readFile (os.ReadFile; a test's files): 65534 when the overflow uid
// cannot be read or parsed, a nil map when the map cannot be read.
func readUserNS(readFile func(name string) ([]byte, error)) userNS {
	ns := userNS{overflow: 65534}
	if b, err := readFile("/proc/sys/kernel/overflowuid"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32); err == nil {
			ns.overflow = uint32(v)
		}
	}
	if b, err := readFile("/proc/self/uid_map"); err == nil {
		ns.uidMap = b
	}
	return ns
}

// maps reports whether uid is inside one of the uid map's ranges (each
// line "inside outside count"). An unreadable or malformed map maps
// nothing.
func (ns userNS) maps(uid uint32) bool {
	sc := bufio.NewScanner(bytes.NewReader(ns.uidMap))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			return false
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 33)
		if err1 != nil || err2 != nil {
			return false
		}
		if uint64(uid) >= inside && uint64(uid)-inside < count {
			return true
		}
	}
	return false
}
