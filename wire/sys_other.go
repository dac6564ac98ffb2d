//go:build !unix

package wire

import "io/fs"

// fileOwner is unknown off unix.
func fileOwner(fs.FileInfo) (uint32, bool) { return 0, false }
