//go:build unix && !linux

package main

import (
	"fmt"
	"syscall"
)

// hardenProcess sets a core size limit of 0; there is no PR_SET_DUMPABLE
// off Linux (see harden_linux.go for why).
func hardenProcess() error {
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_CORE, 0): %w", err)
	}
	return nil
}
