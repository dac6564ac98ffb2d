//go:build !unix

package main

// hardenProcess has nothing to set off unix.
func hardenProcess() error { return nil }
