//go:build unix && !linux

package coalesce

import "syscall"

// oNoFollow: a checkpoint file is never reached through a symlink.
const oNoFollow = syscall.O_NOFOLLOW
