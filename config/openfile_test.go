package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimalDoc = "[registrar.components.review]\nmultiplicity = \"many-per-host\"\n"

// writeFile writes content to a fresh directory's name with exactly mode.
func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	return writeAt(t, filepath.Join(t.TempDir(), name), content, mode)
}

// writeAt writes content to path with exactly mode (chmod: the umask does
// not apply) and returns path.
func writeAt(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAConfigFileOthersCanWriteIsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o640, true}, {0o644, true}, {0o400, true},
		{0o666, false}, {0o620, false}, {0o602, false}, {0o660, false},
	} {
		path := writeAt(t, filepath.Join(dir, "m"+tc.mode.String()+".toml"), minimalDoc, tc.mode)
		_, err := Load(path, nil, nil)
		if tc.ok {
			if err != nil {
				t.Errorf("mode %04o: %v, want it loaded", tc.mode, err)
			}
			continue
		}
		var ue *UnsafeFileError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnsafeFile) {
			t.Errorf("mode %04o: got %v, want an *UnsafeFileError", tc.mode, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, "(mode "+strings.TrimPrefix(modeString(tc.mode), "")+")") {
			t.Errorf("mode %04o: message %q does not name the file and its mode", tc.mode, msg)
		}
	}
}

func modeString(m os.FileMode) string {
	const digits = "01234567"
	p := m.Perm()
	return string([]byte{'0', digits[p>>6&7], digits[p>>3&7], digits[p&7]})
}

// A symlink is refused whatever its target: the target could be swapped
// between a check by path and the read (issue 27, item 6: a link to
// another uid's file set burst 4294967295).
func TestASymlinkConfigFileIsRefusedWhateverItsTarget(t *testing.T) {
	dir := t.TempDir()
	unsafe := writeAt(t, filepath.Join(dir, "unsafe.toml"), minimalDoc, 0o666)
	safe := writeAt(t, filepath.Join(dir, "safe.toml"), minimalDoc, 0o600)
	for _, target := range []string{unsafe, safe} {
		link := filepath.Join(dir, "link-"+filepath.Base(target))
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		_, err := Load(link, nil, nil)
		if !errors.Is(err, ErrUnsafeFile) || !strings.HasPrefix(err.Error(), link+": unsafe configuration file: it is a symlink") {
			t.Errorf("symlink to %s: got %v, want an unsafe-file error naming the link as a symlink", target, err)
		}
	}
	if _, err := Load(safe, nil, nil); err != nil {
		t.Errorf("the 0600 file itself: %v, want it loaded", err)
	}
}
