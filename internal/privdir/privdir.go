// Package privdir creates and checks a private directory: one that nobody
// but this user (or root) can change, so the files the daemon keeps in it
// (the audit records, the embedded state database, the unix socket) cannot
// be swapped, linked or read by another local user.
//
// The rules, in the order they are checked:
//
//   - a missing directory is created with its parents and restated 0700 by
//     chmod, so the umask does not matter;
//   - the path must not be a symlink (Symlink), and must be a directory
//     (NotDir);
//   - Open only: opened without following a symlink, the directory must be
//     the one checked (Changed);
//   - it must be neither group- nor world-writable (Writable);
//   - with Options.Owner, it must be owned by this user or root (Foreign);
//     CheckFor and CheckAncestorsFor judge for another user instead, the
//     one a configuration check run as root answers for;
//   - with Options.Ancestors, every directory above it, both along the path
//     as given and along the path its symlinks resolve to, must be owned
//     by this user or root and be neither group- nor world-writable unless
//     it is sticky, like /tmp (Ancestor): whoever may rename entries of an
//     ancestor can swap the whole directory for one of their own.
//
// A broken rule is an *UnsafeError (matching ErrUnsafe) carrying the
// Problem and its figures; a failing system call is a *StepError naming the
// Step. Both exist so that each caller keeps its own error type and words:
// audit turns an *UnsafeError into an *audit.UnsafeStoreError, the embedded
// backend into an *embedded.UnsafeStateError, wire into ErrUnsafeDir, and
// `registrar-otel config check` words its read-only findings (Check) the
// same way.
package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrUnsafe matches every *UnsafeError.
var ErrUnsafe = errors.New("privdir: unsafe directory")

// Problem is the rule an existing directory breaks.
type Problem int

// The rules of a private directory.
const (
	// Symlink: the path is a symbolic link.
	Symlink Problem = iota + 1
	// NotDir: the path is not a directory.
	NotDir
	// Changed: the directory opened is not the one checked (it was
	// replaced in between).
	Changed
	// Writable: the directory is group- or world-writable.
	Writable
	// Foreign: the directory is owned by neither this user nor root.
	Foreign
	// Ancestor: a directory above it is owned by neither this user nor
	// root, or is group- or world-writable without the sticky bit.
	Ancestor
)

// UnsafeError reports a directory that breaks a rule. It matches ErrUnsafe.
type UnsafeError struct {
	// Path is the refused directory, as given.
	Path string
	// Problem is the rule it breaks.
	Problem Problem
	// Mode is the directory's permission bits (Writable).
	Mode fs.FileMode
	// Owner is the directory's owner and User this process's effective
	// uid (Foreign; for Ancestor, the ancestor's owner).
	Owner, User uint32
	// Above is the unsafe ancestor (Ancestor); Mode and Owner are its.
	Above string
}

// Detail says what is wrong in the words the callers show an operator,
// e.g. "is a symlink" or "has mode 0775 (group- or world-writable; want
// 0700)".
func (e *UnsafeError) Detail() string {
	switch e.Problem {
	case Symlink:
		return "is a symlink"
	case NotDir:
		return "is not a directory"
	case Changed:
		return "changed while being opened"
	case Writable:
		return fmt.Sprintf("has mode %#o (group- or world-writable; want 0700)", e.Mode)
	case Foreign:
		return fmt.Sprintf("is owned by uid %d, not by this user (%d) or root", e.Owner, e.User)
	case Ancestor:
		if e.Owner != e.User && e.Owner != 0 {
			return fmt.Sprintf("lies under %s, which is owned by uid %d, not by this user (%d) or root", e.Above, e.Owner, e.User)
		}
		return fmt.Sprintf("lies under %s, which has mode %#o (group- or world-writable and not sticky)", e.Above, e.Mode)
	}
	return fmt.Sprintf("breaks rule %d", int(e.Problem))
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("privdir: refusing %s: %s", e.Path, e.Detail())
}

// Is makes an *UnsafeError match ErrUnsafe.
func (e *UnsafeError) Is(target error) bool { return target == ErrUnsafe }

// Step is the system call a *StepError comes from.
type Step int

// The steps of Ensure and Open.
const (
	// StepCreate: creating the missing directory (os.MkdirAll).
	StepCreate Step = iota + 1
	// StepStat: os.Lstat of the path, before or after creating it.
	StepStat
	// StepOpen: opening the directory without following a symlink (Open).
	StepOpen
	// StepFstat: stat of the open directory (Open).
	StepFstat
	// StepChmod: restating 0700 on a directory just created.
	StepChmod
)

// StepError reports a failing system call. Its text is Err's alone, so a
// caller wraps it with its own words ("audit: creating record directory:
// %w") and the text an operator reads stays the caller's.
type StepError struct {
	// Step is the call that failed.
	Step Step
	// Path is the directory, as given.
	Path string
	// Err is the call's error (usually an *fs.PathError).
	Err error
}

func (e *StepError) Error() string { return e.Err.Error() }

func (e *StepError) Unwrap() error { return e.Err }

// Options are the rules beyond the ones every private directory keeps.
type Options struct {
	// Owner adds the owner rule (Foreign): a directory that holds a
	// listening socket must not be another user's, who could replace the
	// socket between bind and chmod. Off unix the owner is unknown and the
	// rule is not applied.
	Owner bool
	// Ancestors adds the ancestor rule (Ancestor): the audit records, the
	// state database and the socket are only as safe as the directories
	// above them. Off unix it is not applied.
	Ancestors bool
}

// Check applies the rules to fi, the os.Lstat of path, without changing
// anything: the read-only form for a configuration check. It returns nil
// when fi passes.
func Check(path string, fi fs.FileInfo, o Options) *UnsafeError {
	return CheckFor(path, fi, o, euid())
}

// CheckFor is Check judged for the user uid instead of this process's
// effective uid: the owner rule accepts a directory of uid or root. It is
// for a configuration check run by one user (root) on behalf of the user
// the daemon will run as, who is the one the rules protect. The returned
// error's User is uid.
func CheckFor(path string, fi fs.FileInfo, o Options, uid uint32) *UnsafeError {
	if e := checkType(path, fi); e != nil {
		return e
	}
	return checkPerm(path, fi, o, uid)
}

func checkType(path string, fi fs.FileInfo) *UnsafeError {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &UnsafeError{Path: path, Problem: Symlink}
	case !fi.IsDir():
		return &UnsafeError{Path: path, Problem: NotDir}
	}
	return nil
}

// CheckAncestors applies the ancestor rule alone, read-only, to every
// directory above path: the form for a configuration check (Check is the
// rest). It returns nil when every ancestor passes, an *UnsafeError
// (Ancestor) naming the first that does not, or a *StepError when one
// cannot be stat'ed. Off unix it checks nothing.
func CheckAncestors(path string) error { return checkAncestors(path, euid()) }

// CheckAncestorsFor is CheckAncestors judged for the user uid (see
// CheckFor): an ancestor must be owned by uid or root.
func CheckAncestorsFor(path string, uid uint32) error { return checkAncestors(path, uid) }

// euid is this process's effective uid, the user the rules protect unless
// a check names another.
func euid() uint32 { return uint32(os.Geteuid()) }

// OpenFlags are the flags every safe open of a configuration, token or
// private directory adds to its access mode: O_NOFOLLOW, so a symlink
// planted at the path is refused, and O_NONBLOCK, so a FIFO planted there is
// opened at once (and refused by its fstat) rather than hanging the reader.
// Off unix they are 0.
const OpenFlags = oNoFollow | oNonBlock

// FileOwner returns the uid owning fi (an os.Stat, os.Lstat or fstat), and
// false off unix, where the owner is unknown.
func FileOwner(fi fs.FileInfo) (uint32, bool) { return fileOwner(fi) }

// checkAncestors applies the ancestor rule for uid to every directory
// above path: along the path as given (each stat'ed through its symlinks,
// so /var/run is judged by /run) and along the path the parent resolves
// to.
func checkAncestors(path string, uid uint32) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return &StepError{StepStat, path, err}
	}
	parent := filepath.Dir(abs)
	chains := []string{parent}
	if resolved, err := filepath.EvalSymlinks(parent); err != nil {
		return &StepError{StepStat, path, err}
	} else if resolved != parent {
		chains = append(chains, resolved)
	}
	for _, dir := range chains {
		for {
			fi, err := os.Stat(dir)
			if err != nil {
				return &StepError{StepStat, path, err}
			}
			if owner, ok := fileOwner(fi); ok {
				perm := fi.Mode().Perm()
				if owner != uid && owner != 0 {
					return &UnsafeError{Path: path, Problem: Ancestor, Above: dir, Mode: perm, Owner: owner, User: uid}
				}
				if perm&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
					return &UnsafeError{Path: path, Problem: Ancestor, Above: dir, Mode: perm, Owner: owner, User: uid}
				}
			}
			up := filepath.Dir(dir)
			if up == dir {
				break
			}
			dir = up
		}
	}
	return nil
}

// checkPerm applies the mode rule, and the owner rule for uid.
func checkPerm(path string, fi fs.FileInfo, o Options, uid uint32) *UnsafeError {
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return &UnsafeError{Path: path, Problem: Writable, Mode: perm}
	}
	if !o.Owner {
		return nil
	}
	if owner, ok := fileOwner(fi); ok {
		if owner != uid && owner != 0 {
			return &UnsafeError{Path: path, Problem: Foreign, Owner: owner, User: uid}
		}
	}
	return nil
}

// Ensure creates path 0700 if it is missing and checks it either way, by
// path: for a directory that is only named later (the socket's, which
// net.Listen binds in by name). It returns the directory's os.Lstat.
func Ensure(path string, o Options) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, &StepError{StepCreate, path, err}
		}
		if err := os.Chmod(path, 0o700); err != nil {
			return nil, &StepError{StepChmod, path, err}
		}
		fi, err = os.Lstat(path)
	}
	if err != nil {
		return nil, &StepError{StepStat, path, err}
	}
	if e := Check(path, fi, o); e != nil {
		return nil, e
	}
	if o.Ancestors {
		if err := checkAncestors(path, euid()); err != nil {
			return nil, err
		}
	}
	return fi, nil
}

// Open creates path 0700 if it is missing, checks it, and returns it open
// (read-only, for directory fsyncs and *at calls) with its fstat. The
// directory is opened without following a symlink and checked to be the
// one stat'ed by path, then the mode (and owner) rules are applied to the
// open descriptor, so a directory swapped in between is refused rather
// than used. On error nothing is left open.
func Open(path string, o Options) (*os.File, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	created := false
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, nil, &StepError{StepCreate, path, err}
		}
		created = true
		fi, err = os.Lstat(path)
	}
	if err != nil {
		return nil, nil, &StepError{StepStat, path, err}
	}
	if e := checkType(path, fi); e != nil {
		return nil, nil, e
	}
	d, err := os.OpenFile(path, os.O_RDONLY|OpenFlags, 0)
	if err != nil {
		return nil, nil, &StepError{StepOpen, path, err}
	}
	st, err := opened(d, path, fi, created, o)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, st, nil
}

// Recheck applies the mode and owner rules again to the directory open as
// d (Open's), by fstat on the descriptor, for a check while the directory
// is in use: a chmod 0777 or chown after start is found without trusting
// the path. The ancestor rule is Open's only (it walks paths). It returns
// nil when the directory still passes; a failing fstat is a *StepError.
func Recheck(d *os.File, path string, o Options) error {
	st, err := d.Stat()
	if err != nil {
		return &StepError{StepFstat, path, err}
	}
	if e := checkPerm(path, st, o, euid()); e != nil {
		return e
	}
	return nil
}

// opened checks the directory Open opened as d.
func opened(d *os.File, path string, fi fs.FileInfo, created bool, o Options) (fs.FileInfo, error) {
	st, err := d.Stat()
	if err != nil {
		return nil, &StepError{StepFstat, path, err}
	}
	if !st.IsDir() || !os.SameFile(fi, st) {
		return nil, &UnsafeError{Path: path, Problem: Changed}
	}
	if created {
		// Restate the mode: MkdirAll's is filtered by the umask.
		if err := d.Chmod(0o700); err != nil {
			return nil, &StepError{StepChmod, path, err}
		}
		if st, err = d.Stat(); err != nil {
			return nil, &StepError{StepFstat, path, err}
		}
	}
	if e := checkPerm(path, st, o, euid()); e != nil {
		return nil, e
	}
	if o.Ancestors {
		if err := checkAncestors(path, euid()); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// FileKind names the type of a file that is not regular, for a message:
// "a directory", "a named pipe (FIFO)", "a symbolic link" and so on.
func FileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "of type " + m.Type().String()
}
