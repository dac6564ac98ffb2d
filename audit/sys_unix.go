//go:build unix

package audit

import "syscall"

// Open flags that keep the store from following a symlink or blocking on a
// FIFO planted where a file is expected.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)

// errPlatform is nil where the store's guarantees can be kept.
var errPlatform error
