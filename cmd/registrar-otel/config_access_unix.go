//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// The access a path is judged for, as access(2) spells it.
const (
	mayRead   = 0x4 // R_OK
	mayWrite  = 0x2 // W_OK
	maySearch = 0x1 // X_OK: search a directory
)

// access reports whether the judged user may access path as want asks
// (mayRead|mayWrite|maySearch), reaching it through every directory above
// it; when not, the second result says what stops it. For the user
// running the check the kernel answers (access(2): ACLs and capabilities
// included); for another user the owner, group and mode bits of each
// directory on the way and of path decide, as the kernel decides for a
// user without capabilities (an ACL granting more is not seen). Root may
// do anything.
func (j *judgedFor) access(path string, want uint32) (bool, string) {
	if j.self {
		if err := syscall.Access(path, want); err != nil {
			return false, fmt.Sprintf("access(2) for uid %d: %v", j.UID, err)
		}
		return true, ""
	}
	if j.root() {
		return true, ""
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return true, "" // what cannot be resolved is reported by its own check
	}
	resolved, _ = filepath.Abs(resolved)
	var above []string
	for d := filepath.Dir(resolved); ; d = filepath.Dir(d) {
		above = append(above, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range slices.Backward(above) {
		fi, err := os.Stat(d)
		if err != nil {
			return true, ""
		}
		if !j.permits(fi, maySearch) {
			return false, fmt.Sprintf("it cannot search %s (%s)", d, ownerMode(fi))
		}
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return true, ""
	}
	if !j.permits(fi, want) {
		return false, fmt.Sprintf("%s is %s", path, ownerMode(fi))
	}
	return true, ""
}

// permits applies the mode bits of fi's class for the judged user: the
// owner's when it owns fi, the group's when it is in fi's group, the
// others' otherwise.
func (j *judgedFor) permits(fi fs.FileInfo, want uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := uint32(fi.Mode().Perm())
	switch {
	case st.Uid == j.UID:
		perm >>= 6
	case slices.Contains(j.gids, st.Gid):
		perm >>= 3
	}
	return perm&want == want
}

// ownerMode describes fi's owner, group and mode for a message.
func ownerMode(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("owner uid %d, group gid %d, mode %#o", st.Uid, st.Gid, fi.Mode().Perm())
	}
	return fmt.Sprintf("mode %#o", fi.Mode().Perm())
}
