package main

import (
	"os"
	"path/filepath"
)

// describePath spells a path for a message: absolute, and, when it was
// given relative, saying so and against which directory, since the
// embedded defaults (var/run, var/lib, var/audit) are relative to the
// working directory and mean nothing from another one. fromDefault says
// the path is the embedded default rather than one the operator gave.
func describePath(p string, fromDefault bool) string {
	if filepath.IsAbs(p) {
		if fromDefault {
			return p + " (the default)"
		}
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		if fromDefault {
			return p + " (the default, relative to the working directory)"
		}
		return p + " (relative to the working directory)"
	}
	abs := filepath.Join(wd, p)
	if fromDefault {
		return abs + " (the default " + p + ", relative to the working directory " + wd + ")"
	}
	return abs + " (" + p + ", relative to the working directory " + wd + ")"
}
