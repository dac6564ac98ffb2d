package main

import (
	"bytes"
	"fmt"
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

// TestTheInstallPagesConfigCheckPassesAsRoot: the install page's third
// command, config check of the installed configuration run as root (issue
// 37, finding 6), passes on a host with the package's units and
// configuration installed, judging for the unit's user. This host need not
// have the package's user: a user or group of the units this host lacks
// stands for nobody or nogroup here (where the package is installed, its
// own are used, for its directories are theirs); the rest of the units is
// the shipped one.
func TestTheInstallPagesConfigCheckPassesAsRoot(t *testing.T) {
	needRoot(t, "config check as root, judging for the unit's user")
	units := t.TempDir()
	useUnitDirs(t, units)
	for _, name := range []string{serviceUnitName, socketUnitName} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "packaging", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		writeUnit(t, units, name, standInUsers(string(raw)))
	}
	dir := shortTempDirAll(t)
	cfg := filepath.Join(dir, "registrar.toml")
	raw, err := os.ReadFile(filepath.Join("..", "..", "packaging", "registrar.toml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, raw, 0o640) // root:registrar-otel 0640, as the postinst leaves it
	if err := os.Chown(cfg, 0, 65534); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runConfigCheck([]string{"--config", cfg}, &out, &errOut); code != exitOK {
		t.Fatalf("config check --config %s as root: exit %d\n%s%s", cfg, code, out.String(), errOut.String())
	}
	unit, err := findUnit(unitDirs, serviceUnitName)
	if err != nil {
		t.Fatal(err)
	}
	u, err := lookupUser(unit.value("Service", "User"))
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, "config check's output", out.String(), fmt.Sprintf("judged for: %s (uid %s), the User= of %s\n", u.Username, u.Uid, unit.Path))
}

// standInUsers replaces, in a unit, a user or group this host lacks (the
// package's, where it is not installed) with nobody or nogroup.
func standInUsers(unit string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(unit, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case ok && k == "User":
			if _, err := lookupUser(v); err != nil {
				line = "User=nobody\n"
			}
		case ok && (k == "Group" || k == "SupplementaryGroups" || k == "SocketGroup" || k == "SocketUser"):
			var words []string
			for _, w := range strings.Fields(v) {
				if _, err := lookupGID(w); err != nil {
					w = "nogroup"
				}
				words = append(words, w)
			}
			line = k + "=" + strings.Join(words, " ") + "\n"
		}
		b.WriteString(line)
	}
	return b.String()
}
