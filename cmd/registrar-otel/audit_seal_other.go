//go:build !unix

package main

import "io/fs"

// fileGroup returns -1 (chown's "unchanged"): no gid here.
func fileGroup(fs.FileInfo) int { return -1 }
