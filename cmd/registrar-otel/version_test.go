package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/buildinfo"
)

func TestGoldenVersionJSON(t *testing.T) {
	v, r := buildinfo.Version, buildinfo.Revision
	t.Cleanup(func() { buildinfo.Version, buildinfo.Revision = v, r })
	buildinfo.Version, buildinfo.Revision = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		args []string
		file string
	}{{[]string{"version", "--json"}, "version.json"}, {[]string{"version"}, "version.txt"}} {
		code, out, _ := runDispatch(tc.args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d", tc.args, code)
		}
		golden(t, tc.file, []byte(strings.ReplaceAll(out, runtime.Version(), "GOVERSION")))
	}
}
