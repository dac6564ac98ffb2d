package audit

import "context"

// Test seams: fault injection and a small file cap, reachable only from
// this package's tests. Production code has no skip or fault mode.

// File is the write-path file interface, for test doubles.
type File = file

// TestHooks configures openWithHooks.
type TestHooks struct {
	WrapFile     func(File) File
	Rename       func(oldpath, newpath string) error
	Remove       func(name string) error
	MinFileBytes uint64
}

// OpenWithHooks opens a store with test seams installed.
func OpenWithHooks(opts Options, th TestHooks) (*Store, error) {
	return open(opts, hooks{wrapFile: th.WrapFile, rename: th.Rename, remove: th.Remove, minFileBytes: th.MinFileBytes})
}

// Size returns the store's notion of the active file's size.
func (s *Store) Size() uint64 {
	var size uint64
	s.group.Idle(func() { size = s.size })
	return size
}

// Encode serializes an already bounded, valid record without re-applying
// the bound (the reader's canonical form).
func Encode(r *Record) []byte { return appendRecord(nil, r) }

// ScanAsEUID is Scan judging ownership as if run by uid.
func ScanAsEUID(ctx context.Context, opts ScanOptions, uid int) (*Report, error) {
	return scan(ctx, opts, func(sc *scanner) { sc.euid = func() int { return uid } })
}

// SetStatfs replaces the probe's statfs (free bytes of the file system
// holding a path), for tests of the arithmetic at chosen sizes.
func SetStatfs(p *CapacityProbe, f func(path string) (uint64, error)) { p.statfs = f }

// IdentityCheck runs the write path's identity comparison alone (two lstat
// calls), for its benchmark; no append may run meanwhile.
func (s *Store) IdentityCheck() (changed bool, err error) {
	_, changed, err = s.identityChanged()
	return changed, err
}
