package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// A sealing key file serve would refuse to start with (a key it cannot
// trust: readable by others, damaged, not a regular file, a symlink),
// config check refuses under registrar.state_dir in serve's words; a good
// one is reported as the store being sealed.
func TestConfigCheckRefusesASealingKeyServeWouldRefuse(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T, key string)
		want  string
	}{
		{"readable by others", func(t *testing.T, key string) {
			if err := os.Chmod(key, 0o640); err != nil {
				t.Fatal(err)
			}
		}, "has mode 0640"},
		{"damaged", func(t *testing.T, key string) {
			if err := os.Truncate(key, 10); err != nil {
				t.Fatal(err)
			}
		}, "holds 10 bytes"},
		{"a directory", func(t *testing.T, key string) {
			if err := os.Remove(key); err != nil {
				t.Fatal(err)
			}
			mkdir(t, key, 0o700)
		}, "is not a regular file"},
		{"a symlink", func(t *testing.T, key string) {
			moved := filepath.Join(filepath.Dir(filepath.Dir(key)), "moved.key")
			if err := os.Rename(key, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, key); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := shortTempDir(t)
			_, state, _ := daemonPaths(dir)
			path := writeConfig(t, dir, serveDoc(dir, "", ""), 0o600)
			if code := runAuditSeal([]string{"init", "--config", path}, io.Discard, io.Discard); code != exitOK {
				t.Fatalf("audit seal init: exit %d", code)
			}
			key := filepath.Join(state, audit.SealKeyFileName)
			code, res := checkJSON(t, "--config", path)
			if code != exitOK || !hasPath(res, "registrar.state_dir", key, pathOK, "the store is sealed") {
				t.Fatalf("config check of a good key: exit %d, errors:\n%s\npaths %+v\nwant 0 and the key reported", code, findingsText(res.Errors), res.Paths)
			}
			c.spoil(t, key)
			code, res = checkJSON(t, "--config", path)
			if code != configCheckInvalid || errorsWith(res, "registrar.state_dir", c.want) != 1 {
				t.Errorf("config check: exit %d, errors:\n%s\nwant 2 and a registrar.state_dir error saying %q", code, findingsText(res.Errors), c.want)
			}
			var out, errb bytes.Buffer
			if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "audit sealing key") || !strings.Contains(errb.String(), c.want) {
				t.Errorf("serve: exit %d, stderr:\n%s\nwant %d naming the sealing key: %s", code, errb.String(), exitUsage, c.want)
			}
		})
	}
}

// hasPath says whether res holds a path finding of key and path in state
// whose detail contains part.
func hasPath(res checkResult, key, path, state, part string) bool {
	for _, p := range res.Paths {
		if p.Key == key && p.Path == path && p.State == state && strings.Contains(p.Detail, part) {
			return true
		}
	}
	return false
}
