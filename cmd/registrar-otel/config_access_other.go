//go:build !unix

package main

const (
	mayRead   = 0x4
	mayWrite  = 0x2
	maySearch = 0x1
)

// access is unknown off unix: everything is allowed.
func (j *judgedFor) access(string, uint32) (bool, string) { return true, "" }
