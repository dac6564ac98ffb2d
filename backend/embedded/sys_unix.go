//go:build unix

package embedded

import "syscall"

// Open flags that keep the backend from following a symlink or blocking on
// a FIFO planted where the database file is expected.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)

// errPlatform is nil where the backend's guarantees can be kept.
var errPlatform error
