// Package buildinfo carries what a build knows about itself: the version and
// revision stamped by `make build` through -ldflags -X, and the Go toolchain
// that compiled it. The `version` command, registrar_build_info and the
// service.version resource attribute all read it from here, so they agree.
//
// The variables are set once at link time and only read afterwards; reading
// them is safe for concurrent use.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version, `git describe --tags --always --dirty` of
// the build when stamped by the Makefile; "dev" for an unstamped build.
var Version = "dev"

// Revision is the full commit hash of the build when stamped; for an
// unstamped build it falls back to the VCS revision the Go toolchain
// recorded, or "unknown".
var Revision = ""

// GoVersion is the Go toolchain that compiled the binary.
func GoVersion() string { return runtime.Version() }

// GetRevision returns Revision, or the toolchain's vcs.revision setting when
// the build was not stamped, or "unknown".
func GetRevision() string {
	if Revision != "" {
		return Revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
