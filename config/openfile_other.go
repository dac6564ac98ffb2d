//go:build !unix

package config

import "io/fs"

// Off unix there is no O_NOFOLLOW nor O_NONBLOCK for files, and the owner
// is unknown: the type and mode checks of openChecked are what remains.
const (
	oNoFollow = 0
	oNonBlock = 0
)

// fileOwner is unknown off unix.
func fileOwner(fs.FileInfo) (uint32, bool) { return 0, false }
