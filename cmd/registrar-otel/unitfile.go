package main

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The units the package installs, by the names systemd knows them by.
const (
	serviceUnitName = "registrar-otel.service"
	socketUnitName  = "registrar-otel.socket"
)

// unitDirs are where config check looks for an installed unit, highest
// precedence first, as systemd does for system units: the first directory
// holding the unit is the one systemd loads (an administrator's copy in
// /etc/systemd/system hides the package's). The in-process tests point
// them at a directory of their own (TestMain).
var unitDirs = []string{"/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// unitFile is what config check reads of an installed unit: each
// directive's assignments, in the order systemd applies them (the unit
// file, then its drop-ins). It reads only the few directives that decide
// who serve runs as and what systemd prepares for it; it is no unit
// loader (specifiers such as %i are taken literally).
type unitFile struct {
	// Path is the unit file read.
	Path string
	// DropIns are the drop-in files applied over it (NAME.d/*.conf), in
	// order.
	DropIns []string
	// assigned holds each "Section.Key" directive's values, in order.
	assigned map[string][]string
}

// findUnit reads the unit name from the first of dirs that holds it, with
// its drop-ins from all of dirs (a drop-in of a higher-precedence
// directory hides one of the same file name below it). It returns nil
// when no directory holds the unit or the unit is masked (a link to
// /dev/null): systemd then starts nothing of that name.
func findUnit(dirs []string, name string) (*unitFile, error) {
	u := &unitFile{assigned: map[string][]string{}}
	for _, dir := range dirs {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if target, err := filepath.EvalSymlinks(path); err == nil && target == os.DevNull {
			return nil, nil // masked
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		u.Path = path
		u.parse(data)
		break
	}
	if u.Path == "" {
		return nil, nil
	}
	byName := map[string]string{}
	for _, dir := range dirs {
		matches, _ := filepath.Glob(filepath.Join(dir, name+".d", "*.conf"))
		for _, m := range matches {
			if _, seen := byName[filepath.Base(m)]; !seen {
				byName[filepath.Base(m)] = m
			}
		}
	}
	for _, base := range slices.Sorted(maps.Keys(byName)) {
		data, err := os.ReadFile(byName[base])
		if err != nil {
			return nil, err
		}
		u.DropIns = append(u.DropIns, byName[base])
		u.parse(data)
	}
	return u, nil
}

// parse adds the assignments of one unit file or drop-in: "[Section]"
// lines, "Key=Value" lines (a trailing backslash continues a line),
// comments starting with # or ;.
func (u *unitFile) parse(data []byte) {
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cont strings.Builder
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cont.Len() == 0 && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont.WriteString(strings.TrimSuffix(line, `\`))
			cont.WriteByte(' ')
			continue
		}
		if cont.Len() > 0 {
			cont.WriteString(line)
			line = cont.String()
			cont.Reset()
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key := section + "." + strings.TrimSpace(k)
		u.assigned[key] = append(u.assigned[key], strings.TrimSpace(v))
	}
}

// value is the directive's last assignment in section, "" when it has
// none or the last one is empty (which resets it).
func (u *unitFile) value(section, key string) string {
	vs := u.assigned[section+"."+key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// list is a list directive's words in section: each assignment adds its
// space-separated words, an empty one resets the list.
func (u *unitFile) list(section, key string) []string {
	var out []string
	for _, v := range u.assigned[section+"."+key] {
		if v == "" {
			out = nil
			continue
		}
		for _, w := range strings.Fields(v) {
			out = append(out, strings.Trim(w, `"'`))
		}
	}
	return out
}

// managedDir is a directory systemd creates for the service before it
// starts it, and gives to the service's user (a *Directory= directive).
type managedDir struct {
	// Directive is the directive naming it, e.g. "StateDirectory=".
	Directive string
	// Mode is the mode systemd gives it (the directive's *DirectoryMode=,
	// 0755 by default).
	Mode fs.FileMode
}

// managedDirs are the directories the unit's RuntimeDirectory=,
// StateDirectory=, CacheDirectory=, LogsDirectory= and
// ConfigurationDirectory= name, by absolute path: systemd creates each at
// every start, owned by User= and Group= (changing the owner of one that
// exists with another), with its *DirectoryMode=.
func (u *unitFile) managedDirs() map[string]managedDir {
	out := map[string]managedDir{}
	for _, d := range []struct{ directive, base string }{
		{"RuntimeDirectory", "/run"},
		{"StateDirectory", "/var/lib"},
		{"CacheDirectory", "/var/cache"},
		{"LogsDirectory", "/var/log"},
		{"ConfigurationDirectory", "/etc"},
	} {
		mode := fs.FileMode(0o755)
		if v := u.value("Service", d.directive+"Mode"); v != "" {
			if m, err := strconv.ParseUint(v, 8, 32); err == nil {
				mode = fs.FileMode(m) & fs.ModePerm
			}
		}
		for _, w := range u.list("Service", d.directive) {
			name, _, _ := strings.Cut(w, ":") // "name:symlink" (systemd 250)
			out[filepath.Join(d.base, name)] = managedDir{d.directive + "=", mode}
		}
	}
	return out
}

// listensOn reports whether the socket unit listens on the unix socket
// path (a ListenStream= of it): systemd then binds it and hands it over,
// and serve binds nothing there.
func (u *unitFile) listensOn(path string) bool {
	want := filepath.Clean(path)
	for _, v := range u.list("Socket", "ListenStream") {
		if filepath.IsAbs(v) && filepath.Clean(v) == want {
			return true
		}
	}
	return false
}
