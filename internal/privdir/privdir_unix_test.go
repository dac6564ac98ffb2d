//go:build unix

package privdir

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The umask filters MkdirAll's 0700; the chmod that follows restates it.
// (The umask is process-wide: this test is not parallel, nor is any other
// test of the package.)
func TestACreatedDirectoryIs0700WhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o377)
	defer syscall.Umask(old)
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if _, err := op.open(dir, Options{}); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("mode %s under umask 0377, want 0700", fi.Mode())
			}
		})
	}
}
