package main

import (
	"fmt"
	"syscall"
)

// prSetDumpable is PR_SET_DUMPABLE of <linux/prctl.h>; the syscall package
// has SYS_PRCTL but not the option's number.
const prSetDumpable = 4

// hardenProcess makes the serving process unreadable by its own uid: not
// dumpable, so /proc/PID/environ, /proc/PID/mem and ptrace need
// CAP_SYS_PTRACE (the kernel then owns those files by root), and with a
// core size limit of 0, so a crash writes no core file holding the OpenBao
// token. Without it any process of the daemon's uid — a local caller of
// the socket, before the socket group — could read the token out of the
// environment or the heap (issue 27). It is process-wide and lasts for the
// process's life; an execve of a set-uid binary would reset it, and serve
// execs nothing.
func hardenProcess() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_CORE, 0): %w", err)
	}
	return nil
}
