//go:build unix

package main

import "syscall"

// writable reports whether this process may create entries in dir.
func writable(dir string) bool {
	return syscall.Access(dir, 0x2|0x1) == nil // W_OK|X_OK
}
