//go:build !unix

package privdir

import "io/fs"

// Off unix there is no O_NOFOLLOW; the callers that need it (audit, the
// embedded backend) refuse to run there before calling Open.
const (
	oNoFollow = 0
	oNonBlock = 0
)

// fileOwner is unknown off unix.
func fileOwner(fs.FileInfo) (uint32, bool) { return 0, false }
