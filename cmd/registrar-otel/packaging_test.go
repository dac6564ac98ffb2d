package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPackagedConfigurationPassesConfigCheck: the conffile the package
// installs at /etc/registrar-otel/registrar.toml is valid and has the
// production paths of the service.
func TestPackagedConfigurationPassesConfigCheck(t *testing.T) {
	path := filepath.Join("..", "..", "packaging", "registrar.toml")
	var out, errOut bytes.Buffer
	if code := runConfigCheck([]string{"--config", path}, &out, &errOut); code != exitOK {
		t.Fatalf("config check %s: exit %d\n%s%s", path, code, out.String(), errOut.String())
	}
	wantContains(t, "config check's output", out.String(),
		"/run/registrar-otel/registrar.sock",
		"state_dir                   /var/lib/registrar-otel\n",
		"/var/lib/registrar-otel/audit")
}

// TestVersionFileIsTheNewestChangelogRelease: one version number.
func TestVersionFileIsTheNewestChangelogRelease(t *testing.T) {
	v, err := os.ReadFile(filepath.Join("..", "..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$`).FindSubmatch(cl)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading (## [X.Y.Z] - YYYY-MM-DD)")
	}
	if got := strings.TrimSpace(string(v)); got != string(m[1]) {
		t.Errorf("VERSION is %q, CHANGELOG.md's newest release is %q", got, m[1])
	}
}
