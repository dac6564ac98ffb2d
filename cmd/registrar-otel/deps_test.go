package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// modulePath is this module's import path prefix.
const modulePath = "github.com/registrar-otel/registrar-otel"

// forbiddenDeps returns the packages of deps that the daemon binary must not
// link: the standard library's testing packages, and this module's test
// support (everything under internal/testing/, and any package of the module
// whose name ends in "test", such as backend/backendtest). The model is
// Tailscale's tstest/deptest: the rule lives in one test, not in reviewers'
// memories.
func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, p := range deps {
		switch {
		case p == "testing", strings.HasPrefix(p, "testing/"):
			bad = append(bad, p)
		case strings.HasPrefix(p, modulePath+"/"):
			rel := strings.TrimPrefix(p, modulePath+"/")
			last := rel[strings.LastIndexByte(rel, '/')+1:]
			if strings.HasPrefix(rel, "internal/testing/") || strings.HasSuffix(last, "test") {
				bad = append(bad, p)
			}
		}
	}
	return bad
}

func TestForbiddenDepsRule(t *testing.T) {
	deps := []string{
		"fmt", "testing", "testing/synctest", "net/http/httptest",
		modulePath + "/registrar",
		modulePath + "/internal/logthrottle",
		modulePath + "/internal/testing/pkitest",
		modulePath + "/internal/testing/cputime",
		modulePath + "/backend/backendtest",
	}
	got := forbiddenDeps(deps)
	want := []string{
		"testing", "testing/synctest",
		modulePath + "/internal/testing/pkitest",
		modulePath + "/internal/testing/cputime",
		modulePath + "/backend/backendtest",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("forbiddenDeps = %q, want %q", got, want)
	}
}

// TestBinaryLinksNoTestSupport lists the import graph of the daemon binary
// (as `go build` sees it, test files excluded) and fails on any test-support
// package in it.
func TestBinaryLinksNoTestSupport(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; the import graph cannot be listed")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, modulePath+"/registrar") {
		t.Fatalf("go list -deps did not list %s/registrar; the listing is not the binary's graph:\n%s", modulePath, out)
	}
	if bad := forbiddenDeps(deps); len(bad) > 0 {
		t.Fatalf("the registrar-otel binary links test support: %q\n"+
			"production code must not import testing or internal/testing/...; move the helper to internal/ (production) or keep it in a _test.go file", bad)
	}
}

// faultFiles are the daemon's fault seams, compiled only with the build tag
// registrar_faults (the e2e tests' second binary), and their no-op twin.
const (
	faultTag      = "registrar_faults"
	faultsOnFile  = "fault_on.go"
	faultsOffFile = "fault_off.go"
	// faultMarkers are strings only the seams' code holds: the variable it
	// reads and the states it announces.
	faultMarkerEnv    = "REGISTRAR_FAULT_TICK_STALL"
	faultMarkerStatus = "fault: tick stalled"
)

// daemonGoFiles lists the daemon package's Go files under tags.
func daemonGoFiles(t *testing.T, tags string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", tags, "-f", "{{join .GoFiles \" \"}}", modulePath+"/daemon").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// TestDefaultBuildHasNoFaultSeams: the fault seams of the test build are
// not compiled into the default (production) build, and the binary holds
// none of their strings; the test build does hold them, so the check can
// fail.
func TestDefaultBuildHasNoFaultSeams(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	def, tagged := daemonGoFiles(t, ""), daemonGoFiles(t, faultTag)
	if slices.Contains(def, faultsOnFile) || !slices.Contains(def, faultsOffFile) {
		t.Errorf("the default build compiles %q; want %s and not %s", def, faultsOffFile, faultsOnFile)
	}
	if !slices.Contains(tagged, faultsOnFile) || slices.Contains(tagged, faultsOffFile) {
		t.Errorf("-tags %s compiles %q; want %s and not %s", faultTag, tagged, faultsOnFile, faultsOffFile)
	}

	for _, tc := range []struct {
		name  string
		build func(*testing.T) string
		want  bool
	}{
		{"the default binary", buildBinary, false},
		{"the -tags " + faultTag + " binary", buildFaultsBinary, true},
	} {
		raw, err := os.ReadFile(tc.build(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{faultMarkerEnv, faultMarkerStatus} {
			if got := bytes.Contains(raw, []byte(m)); got != tc.want {
				t.Errorf("%s holds %q: %v, want %v", tc.name, m, got, tc.want)
			}
		}
	}
}
