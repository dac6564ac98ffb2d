package audit

import (
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/registrar-otel/registrar-otel/internal/privdir"
)

// The directory anomalies of ownership and mode (issue 27): whoever may
// write the record directory or one of its files may delete and forge
// evidence, and a forged file is otherwise well-formed.
const (
	// AnomalyWrongOwner: the record directory or an entry of it is owned by
	// neither root nor the store's owner (see Scan).
	AnomalyWrongOwner StoreAnomalyKind = "wrong_owner"
	// AnomalyUnsafeMode: the record directory or an entry of it (a symlink
	// excepted, whose mode means nothing) is group- or world-writable.
	AnomalyUnsafeMode StoreAnomalyKind = "unsafe_mode"
)

// DirFile is StoreAnomaly.File for an anomaly of the record directory
// itself rather than of one of its entries.
const DirFile = "."

// storeOwner is the uid the store's files must belong to (root aside):
// the scanning process's own uid (euid), or, when the scan runs as root (which
// can read any store and cannot tell which uid is the daemon's), the
// directory's owner — the daemon's uid, since serve refuses at start a
// directory owned by anyone else.
func storeOwner(euid int, dirOwner uint32) uint32 {
	if euid != 0 {
		return uint32(euid)
	}
	return dirOwner
}

// ownership applies the owner and mode rules to the record directory (dirFi,
// its lstat) and to every entry of it, read or skipped, as judged by a
// scan run with effective uid euid, and returns one anomaly per broken
// rule, naming the path. Off unix the owner is unknown
// and only the mode rule is applied.
func ownership(dir string, dirFi fs.FileInfo, entries []fs.DirEntry, euid int) []StoreAnomaly {
	var out []StoreAnomaly
	dirOwner, known := privdir.FileOwner(dirFi)
	owner := storeOwner(euid, dirOwner)
	check := func(name, path string, fi fs.FileInfo) {
		if uid, ok := privdir.FileOwner(fi); ok && known && uid != 0 && uid != owner {
			out = append(out, StoreAnomaly{Kind: AnomalyWrongOwner, File: name,
				Detail: fmt.Sprintf("%s is owned by uid %d, not by root or the store's owner (uid %d): that uid may have written or replaced it", path, uid, owner)})
		}
		if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 {
			out = append(out, StoreAnomaly{Kind: AnomalyUnsafeMode, File: name,
				Detail: fmt.Sprintf("%s has mode %#o (group- or world-writable): any uid of that group or every local uid may have changed it", path, fi.Mode().Perm())})
		}
	}
	check(DirFile, dir, dirFi)
	for _, e := range entries {
		fi, err := e.Info() // an lstat, as ReadDir's entries are
		if err != nil {
			continue // removed since the listing (a trim by the daemon)
		}
		check(e.Name(), filepath.Join(dir, e.Name()), fi)
	}
	return out
}
