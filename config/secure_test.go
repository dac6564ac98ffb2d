package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimalDoc = "[registrar.components.review]\nmultiplicity = \"many-per-host\"\n"

func writeWithMode(t *testing.T, dir, name string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(minimalDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // chmod: the umask does not apply
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
		path := writeWithMode(t, dir, "m"+tc.mode.String()+".toml", tc.mode)
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
	unsafe := writeWithMode(t, dir, "unsafe.toml", 0o666)
	safe := writeWithMode(t, dir, "safe.toml", 0o600)
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

func TestOTLPEndpointSecretsAreNeverEchoed(t *testing.T) {
	secrets := []string{"user", "s3cretpw", "token", "abc", "p/w", "pa?ss"}
	for _, tc := range []struct {
		name     string
		endpoint string
		fromEnv  bool
	}{
		{"user and password from the environment", "https://user:s3cretpw@h:4318", true},
		{"user and password from the file", "https://user:s3cretpw@h:4318", false},
		{"user name and a query token", "https://user:xxxxx@collector.example:4318/?token=abc", false},
		{"a query token alone", "https://collector.example:4318/?token=abc", true},
		{"an unparsable URL with a password", "https://user:s3cretpw@h:notaport", false},
		{"a password with a slash", "https://user:p/w@h:4318", true},
		{"a password with a question mark", "https://user:pa?ss@h:4318", false},
		{"no scheme", "user:s3cretpw@h:4318", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			doc := minimalDoc
			var env []string
			if tc.fromEnv {
				env = []string{"REGISTRAR_OTEL_TELEMETRY__OTLP_ENDPOINT=" + tc.endpoint}
			} else {
				doc += "[telemetry]\notlp_endpoint = " + quote(tc.endpoint) + "\n"
			}
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, env, nil)
			if err == nil {
				t.Fatal("accepted an endpoint with credentials or without a host")
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != "telemetry.otlp_endpoint" {
				t.Fatalf("got %v, want a KeyError naming telemetry.otlp_endpoint", err)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("message %q repeats %q", err, s)
				}
				if v, _ := ke.Value.(string); strings.Contains(v, s) {
					t.Errorf("KeyError.Value %q holds %q", v, s)
				}
			}
			if !strings.Contains(err.Error(), Redacted) && !strings.Contains(err.Error(), "h:") && !strings.Contains(err.Error(), "collector") {
				t.Errorf("message %q no longer says which endpoint", err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@host:4318/otlp?tenant=a#f": "https://REDACTED@host:4318/otlp?REDACTED",
		"https://host:4318/otlp":                    "https://host:4318/otlp",
		"https://user@host":                         "https://REDACTED@host",
		"https://u:p/w@host/x":                      "https://REDACTED@host/x",
		"https://u:p?w@host":                        "https://REDACTED@host",
		"host/?q=1":                                 "host/?REDACTED",
		"":                                          "",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactTextRemovesQuotedInputAndURLSecrets(t *testing.T) {
	in := `parse "https://user:pw@h:x": invalid port; header "Authorization=Bearer abc" at https://u:p@c:4318/v1?t=1`
	got := RedactText(in)
	for _, s := range []string{"user", "pw", "Bearer", "abc", "u:p", "t=1"} {
		if strings.Contains(got, s) {
			t.Errorf("RedactText kept %q: %s", s, got)
		}
	}
	if !strings.Contains(got, "invalid port") || !strings.Contains(got, "c:4318/v1") {
		t.Errorf("RedactText removed what is not a secret: %s", got)
	}
}
