// Package buildinfo carries what a build knows about itself: the version and
// revision stamped by `make build` through -ldflags -X, and the Go toolchain
// that compiled it. The `version` command, registrar_build_info and the
// service.version resource attribute all read it from here, so they agree.
//
// An unstamped build (a plain `go build ./cmd/registrar-otel`) falls back to
// what the Go toolchain embedded (runtime/debug.ReadBuildInfo): the main
// module's version ("(devel)" in an untagged checkout), and the
// vcs.revision and vcs.modified settings; a build without VCS information
// (-buildvcs=false, or outside a repository) reports revision "unknown".
//
// The variables are set once at link time and only read afterwards; reading
// them is safe for concurrent use.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version as stamped by the Makefile (the VERSION
// file); empty in an unstamped build. Read it with GetVersion.
var Version = ""

// Revision is the full commit hash of the build when stamped; empty in an
// unstamped build. Read it with GetRevision.
var Revision = ""

// GoVersion is the Go toolchain that compiled the binary.
func GoVersion() string { return runtime.Version() }

// GetVersion returns Version, or the main module's version exactly as the
// toolchain recorded it (a tag such as v0.9.0, "(devel)" for a build inside
// an untagged checkout), or "dev" when the binary carries no build info.
func GetVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(Version, bi)
}

// GetRevision returns Revision, or the toolchain's vcs.revision setting
// (with " (modified)" when vcs.modified is true: the working tree had
// uncommitted changes), or "unknown".
func GetRevision() string {
	bi, _ := debug.ReadBuildInfo()
	return revisionOf(Revision, bi)
}

func versionOf(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi != nil && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

func revisionOf(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return "unknown"
	}
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case modified:
		return rev + " (modified)"
	}
	return rev
}
