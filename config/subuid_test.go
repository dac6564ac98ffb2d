package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func subuidConfig(path string) *Config {
	c := Default()
	c.Registrar.SubuidFile = path
	return &c
}

func writeSubuid(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "subuid")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadSubuidsReadsTheNamedFile(t *testing.T) {
	path := writeSubuid(t, "# test\n1000:100000:65536\n")
	m, err := subuidConfig(path).LoadSubuids()
	if err != nil {
		t.Fatalf("LoadSubuids: %v", err)
	}
	if owner, ok := m.Owner(165535); !ok || owner != 1000 {
		t.Errorf("Owner(165535) = %d, %v; want 1000, true", owner, ok)
	}
}

func TestLoadSubuidsOffAndMissing(t *testing.T) {
	if m, err := subuidConfig("").LoadSubuids(); m != nil || err != nil {
		t.Errorf(`subuid_file "": LoadSubuids = %v, %v; want nil, nil (off)`, m, err)
	}
	if Default().Registrar.SubuidFile != DefaultSubuidFile || DefaultSubuidFile != "/etc/subuid" {
		t.Errorf("the default is %q, want /etc/subuid", Default().Registrar.SubuidFile)
	}
	missing := filepath.Join(t.TempDir(), "subuid")
	_, err := subuidConfig(missing).LoadSubuids()
	want := `registrar.subuid_file cannot be read: no such file or directory, got "` + missing + `"`
	if err == nil || err.Error() != want {
		t.Errorf("a missing named file: LoadSubuids error = %v, want %s", err, want)
	}
	if _, ok := errors.AsType[*KeyError](err); !ok {
		t.Errorf("a missing named file: %T is not a *KeyError", err)
	}
	// At the default path a missing file is a host without ranges.
	m, err := loadSubuids(missing, true)
	if err != nil || m == nil || m.Len() != 0 {
		t.Errorf("a missing default file: LoadSubuids = %v, %v; want no ranges and no error", m, err)
	}
	if _, err := loadSubuids(t.TempDir(), true); err == nil {
		t.Error("a directory at the default path was read as no ranges")
	}
}

func TestLoadSubuidsNamesTheKeyTheLinesAndThePath(t *testing.T) {
	// The example of docs/*/configuration.md#subordinate-uids. Whether
	// alice and bob are accounts here does not matter: an overlap is one
	// either way.
	path := writeSubuid(t, "# hosts\nalice:100000:65536\nbob:0x186a0:1\n\nbob:165530:16\n")
	_, err := subuidConfig(path).LoadSubuids()
	want := `registrar.subuid_file must be a subordinate uid file (name:start:count lines, no two ranges overlapping): ` +
		`line 3: has the start "0x186a0", want a decimal uid (no sign, space or leading zero); ` +
		`line 5: the range 165530-165545 of bob overlaps the range 100000-165535 of alice on line 2, got "` + path + `"`
	if err == nil || err.Error() != want {
		t.Errorf("LoadSubuids error =\n%v\nwant\n%s", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error spans lines: %q", err)
	}
}

func TestLoadSubuidsReportsAnUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	_, err := subuidConfig(dir).LoadSubuids()
	want := `registrar.subuid_file cannot be read: is a directory, got "` + dir + `"`
	if err == nil || err.Error() != want {
		t.Errorf("LoadSubuids(a directory) error = %v, want %s", err, want)
	}
}

func TestCheckFilesReportsTheSubuidFileForEveryBackend(t *testing.T) {
	path := writeSubuid(t, "alice:1\n")
	c := subuidConfig(path)
	_, err := c.CheckFiles(nil)
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "registrar.subuid_file" || !strings.Contains(ke.Rule, "line 1: has 2 colon-separated fields") {
		t.Errorf("CheckFiles (embedded) = %v, want the subuid file's error under its key", err)
	}
	c.Registrar.Backend = BackendOpenBao
	c.OpenBao.TokenFile = filepath.Join(t.TempDir(), "no-token")
	_, err = c.CheckFiles(nil)
	got := Errors(err)
	if len(got) != 2 || !strings.HasPrefix(got[0].Error(), "registrar.subuid_file ") || !strings.HasPrefix(got[1].Error(), "openbao.token_file ") {
		t.Errorf("CheckFiles (openbao) = %q, want the subuid file's error, then the token's", got)
	}
	if _, err := subuidConfig(writeSubuid(t, "")).CheckFiles(nil); err != nil {
		t.Errorf("CheckFiles with an empty subuid file = %v, want nil", err)
	}
}
