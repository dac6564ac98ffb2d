package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeUnit writes a unit file (or a drop-in, for a name with a "/") into
// dir and returns its path.
func writeUnit(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, []byte(body), 0o644)
	return path
}

// useUnitDirs points config check at dirs for the test's duration.
func useUnitDirs(t *testing.T, dirs ...string) {
	t.Helper()
	saved := unitDirs
	unitDirs = dirs
	t.Cleanup(func() { unitDirs = saved })
}

// The unit is read as systemd would: the first directory holding it wins,
// its drop-ins (from every directory, one of a higher directory hiding the
// same name below) apply over it in name order, the last assignment of a
// directive counts, an empty one resets a list, a backslash continues a
// line, and comments are skipped.
func TestFindUnitReadsTheUnitSystemdWouldLoad(t *testing.T) {
	etc, lib := t.TempDir(), t.TempDir()
	writeUnit(t, lib, serviceUnitName, "[Service]\nUser=packaged\n")
	if u, err := findUnit([]string{etc, lib}, serviceUnitName); err != nil || u == nil || u.value("Service", "User") != "packaged" || u.Path != filepath.Join(lib, serviceUnitName) {
		t.Fatalf("the package's unit alone: %+v, %v; want User=packaged from %s", u, err, lib)
	}
	own := writeUnit(t, etc, serviceUnitName, `# the administrator's copy
[Unit]
User=not-a-service-directive
[Service]
User=first
; a comment
User=copied
SupplementaryGroups=a \
  b
StateDirectory=registrar-otel registrar-otel/audit
StateDirectoryMode=0700
`)
	writeUnit(t, lib, serviceUnitName+".d/10-user.conf", "[Service]\nUser=hidden\n")
	writeUnit(t, etc, serviceUnitName+".d/10-user.conf", "[Service]\nUser=override\nSupplementaryGroups=c\n")
	writeUnit(t, lib, serviceUnitName+".d/20-groups.conf", "[Service]\nSupplementaryGroups=\nSupplementaryGroups=d\n")
	u, err := findUnit([]string{etc, lib}, serviceUnitName)
	if err != nil || u == nil {
		t.Fatalf("findUnit: %v, %v", u, err)
	}
	if u.Path != own {
		t.Errorf("Path %s, want the administrator's %s", u.Path, own)
	}
	if want := []string{filepath.Join(etc, serviceUnitName+".d/10-user.conf"), filepath.Join(lib, serviceUnitName+".d/20-groups.conf")}; !slices.Equal(u.DropIns, want) {
		t.Errorf("DropIns %v, want %v", u.DropIns, want)
	}
	if got := u.value("Service", "User"); got != "override" {
		t.Errorf("User= %q, want the drop-in's override", got)
	}
	if got := u.list("Service", "SupplementaryGroups"); !slices.Equal(got, []string{"d"}) {
		t.Errorf("SupplementaryGroups= %v, want [d] (reset by the empty assignment)", got)
	}
	dirs := u.managedDirs()
	if m, ok := dirs["/var/lib/registrar-otel/audit"]; !ok || m.Mode != 0o700 || m.Directive != "StateDirectory=" || len(dirs) != 2 {
		t.Errorf("managedDirs %v, want the two state directories, mode 0700", dirs)
	}

	// A continued line joins its parts.
	writeUnit(t, etc, serviceUnitName+".d/30-groups.conf", "[Service]\nSupplementaryGroups=e \\\n  f\n")
	u, _ = findUnit([]string{etc, lib}, serviceUnitName)
	if got := u.list("Service", "SupplementaryGroups"); !slices.Equal(got, []string{"d", "e", "f"}) {
		t.Errorf("SupplementaryGroups= %v, want [d e f]", got)
	}

	// Masked (a link to /dev/null) in the highest directory: no unit.
	os.Remove(own)
	if err := os.Symlink(os.DevNull, own); err != nil {
		t.Fatal(err)
	}
	if u, err := findUnit([]string{etc, lib}, serviceUnitName); u != nil || err != nil {
		t.Errorf("masked unit: %+v, %v; want none", u, err)
	}
	if u, err := findUnit([]string{t.TempDir()}, serviceUnitName); u != nil || err != nil {
		t.Errorf("no unit: %+v, %v; want none", u, err)
	}
}

func TestSocketUnitListensOnItsListenStream(t *testing.T) {
	dir := t.TempDir()
	writeUnit(t, dir, socketUnitName, "[Socket]\nListenStream=/run/registrar-otel/registrar.sock\nSocketMode=0660\n")
	u, err := findUnit([]string{dir}, socketUnitName)
	if err != nil || u == nil {
		t.Fatal(u, err)
	}
	if !u.listensOn("/run/registrar-otel//registrar.sock") || u.listensOn("/run/other.sock") {
		t.Errorf("listensOn: want the ListenStream= path only")
	}
}
