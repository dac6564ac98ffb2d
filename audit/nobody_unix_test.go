//go:build unix

package audit_test

import "syscall"

// nobody runs a child process as uid/gid 65534.
func nobody() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}
