package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/registrar-otel/registrar-otel/internal/buildinfo"
)

var versionUsage = usageSpec{
	name:     "version",
	synopsis: "[--json]",
	what: `Prints the release version, the commit it was built from and the Go toolchain
that compiled it: the same values as the registrar_build_info metric and the
service.version resource attribute. "dev" is a build not stamped by make build.`,
	examples: []string{"registrar-otel version", "registrar-otel version --json"},
}

// versionJSON is the version --json schema.
type versionJSON struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go_version"`
}

// runVersion implements "registrar-otel version [--json]" and --version.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version")
	asJSON := fs.Bool("json", false, "print one JSON object: version, revision, go_version")
	if code, ok := parseFlags(fs, versionUsage, args, stdout, stderr); !ok {
		return code
	}
	return printVersion(stdout, *asJSON)
}

func printVersion(w io.Writer, asJSON bool) int {
	v := versionJSON{buildinfo.GetVersion(), buildinfo.GetRevision(), buildinfo.GoVersion()}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return exitOK
	}
	fmt.Fprintf(w, "registrar-otel %s\nrevision: %s\ngo: %s\n", v.Version, v.Revision, v.GoVersion)
	return exitOK
}
