package audit

// SetStatfs replaces the probe's statfs (free bytes of the file system
// holding a path), for tests of the arithmetic at chosen sizes.
func SetStatfs(p *CapacityProbe, f func(path string) (uint64, error)) { p.statfs = f }
