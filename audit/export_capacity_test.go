package audit

// SetStatfs replaces the probe's statfs (free bytes of the file system
// holding a path), for tests of the arithmetic at chosen sizes.
func SetStatfs(p *CapacityProbe, f func(path string) (uint64, error)) { p.statfs = f }

// IdentityCheck runs the write path's identity comparison alone (two lstat
// calls), for its benchmark; no append may run meanwhile.
func (s *Store) IdentityCheck() (changed bool, err error) {
	_, changed, err = s.identityChanged()
	return changed, err
}
