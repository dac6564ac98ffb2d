//go:build !unix

package embedded

import "errors"

const (
	oNoFollow = 0
	oNonBlock = 0
)

// errPlatform refuses to run where O_NOFOLLOW is unavailable: the backend
// must never follow a symlink to its database.
var errPlatform = errors.New("embedded: the state database needs a unix platform (O_NOFOLLOW)")
