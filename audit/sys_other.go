//go:build !unix

package audit

import (
	"errors"
	"io/fs"
)

const (
	oNoFollow = 0
	oNonBlock = 0
)

// errPlatform refuses to run where O_NOFOLLOW is unavailable: the store
// must never follow a symlink.
var errPlatform = errors.New("audit: the record store needs a unix platform (O_NOFOLLOW)")

func linkCount(fs.FileInfo) (uint64, bool) { return 0, false }

func statfsFree(string) (uint64, error) { return 0, errPlatform }
