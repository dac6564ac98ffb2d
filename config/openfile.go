package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// MaxConfigFileBytes bounds the configuration file: the complete example is
// about 4 KiB, so a file larger than this is not a configuration.
const MaxConfigFileBytes = 1 << 20

// fileProblem is why openChecked refused a file, in the words that follow
// its path in a message ("is a symlink").
type fileProblem struct {
	// kind says which rule was broken.
	kind problemKind
	// text is the rule's wording, e.g. "is a named pipe (FIFO), not a
	// regular file".
	text string
	// mode is the file's permission bits (kindWritable, kindReadable).
	mode fs.FileMode
	// err is the failing system call's error (kindIO).
	err error
}

type problemKind int

const (
	kindIO         problemKind = iota + 1 // open, fstat or read failed
	kindSymlink                           // the path is a symlink (O_NOFOLLOW)
	kindNotRegular                        // a FIFO, a device, a directory, a socket
	kindForeign                           // owned by neither root nor this user
	kindWritable                          // group- or world-writable
	kindReadable                          // group- or world-readable (secrets only)
	kindTooLarge                          // more than the limit
)

// openChecked reads the file at path the one safe way: opened once without
// following a symlink and without blocking (a FIFO planted at the path is
// opened at once and refused, rather than hanging the reader), checked by
// fstat on that descriptor — a regular file, owned by root or the user
// uid (this process's effective uid, unless a check judges for another),
// writable by its owner only and, when secret, readable by its owner only
// — and read from the same descriptor, at most limit bytes. So the file
// checked is the file read: there is no second open by path to race.
func openChecked(path string, limit int64, secret bool, uid uint32) ([]byte, *fileProblem) {
	f, err := os.OpenFile(path, os.O_RDONLY|privdir.OpenFlags, 0)
	if err != nil {
		if isSymlinkErr(path, err) {
			return nil, &fileProblem{kind: kindSymlink, text: "is a symlink; name the file itself, so that the file checked is the file read"}
		}
		return nil, &fileProblem{kind: kindIO, text: pathErrText(err), err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &fileProblem{kind: kindIO, text: pathErrText(err), err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, &fileProblem{kind: kindNotRegular, text: "is " + privdir.FileKind(st.Mode()) + ", not a regular file"}
	}
	if owner, ok := privdir.FileOwner(st); ok {
		if owner != 0 && owner != uid {
			return nil, &fileProblem{kind: kindForeign,
				text: fmt.Sprintf("is owned by uid %d, neither root nor this user (uid %d): its owner could change it; chown it to root", owner, uid)}
		}
	}
	perm := st.Mode().Perm()
	if secret && perm&0o077 != 0 {
		return nil, &fileProblem{kind: kindReadable, mode: perm,
			text: fmt.Sprintf("must be readable by its owner only (chmod 0600), but has mode %#o", perm)}
	}
	if perm&0o022 != 0 {
		return nil, &fileProblem{kind: kindWritable, mode: perm, text: fmt.Sprintf("is group- or world-writable (mode %04o)", perm)}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fileProblem{kind: kindIO, text: "cannot be read: " + pathErrText(err), err: err}
	}
	if int64(len(data)) > limit {
		return nil, &fileProblem{kind: kindTooLarge, text: fmt.Sprintf("is larger than %d bytes", limit)}
	}
	return data, nil
}

// euid is this process's effective uid, the user the file rules protect
// unless a check judges for another (LoadFor, CheckFilesFor).
func euid() uint32 { return uint32(os.Geteuid()) }

// isSymlinkErr tells an O_NOFOLLOW refusal (ELOOP) from the other errors of
// open; the Lstat confirms it, since ELOOP also means a loop of links in a
// parent directory.
func isSymlinkErr(path string, err error) bool {
	if !errors.Is(err, syscall.ELOOP) {
		return false
	}
	li, lerr := os.Lstat(path)
	return lerr == nil && li.Mode()&fs.ModeSymlink != 0
}
