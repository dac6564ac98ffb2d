package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gotoml "github.com/pelletier/go-toml/v2"
)

// A name of the portable characters is spelled as is; one with any other
// character, just outside each range, is quoted.
func TestEnvNameQuotesAllButThePortableCharacters(t *testing.T) {
	if got := envName("AZaz09_"); got != "AZaz09_" {
		t.Errorf("envName(AZaz09_) = %s, want it as is", got)
	}
	for _, name := range []string{"A@", "A[", "A`", "A{", "A/", "A:"} {
		if got := envName(name); got != strconv.Quote(name) {
			t.Errorf("envName(%s) = %s, want it quoted", name, got)
		}
	}
}

// A key of the bare characters is bare; one with a character just outside
// their ranges is not.
func TestBareKeysAreThoseOfTheBareCharacters(t *testing.T) {
	if !isBareKey("azAZ09_-") {
		t.Error("azAZ09_- is not bare")
	}
	for _, k := range []string{"a`", "a{", "a@", "a[", "a/", "a:"} {
		if isBareKey(k) {
			t.Errorf("%s is bare", k)
		}
	}
}

// A value of maxQuoted bytes is quoted whole; a longer one is cut at a
// rune's start at or before maxQuoted, and one with no rune start there is
// cut to nothing, never before its start.
func TestQuoteCutsOnlyPastTheBoundAndAtARuneStart(t *testing.T) {
	whole := strings.Repeat("a", maxQuoted)
	if got := quote(whole); got != strconv.Quote(whole) {
		t.Errorf("quote of %d bytes = %s, want it whole", maxQuoted, got)
	}
	straddling := strings.Repeat("a", maxQuoted-1) + "é" + "b" // é at maxQuoted-1 and maxQuoted
	if got, want := quote(straddling), strconv.Quote(strings.Repeat("a", maxQuoted-1))+"… (202 bytes)"; got != want {
		t.Errorf("quote of a rune straddling the bound = %s, want %s", got, want)
	}
	noStart := strings.Repeat("\x80", maxQuoted+1)
	if got, want := quote(noStart), `""… (201 bytes)`; got != want {
		t.Errorf("quote of continuation bytes only = %s, want %s", got, want)
	}
}

// A syntax error without a line names the file alone.
func TestASyntaxErrorWithoutALineNamesTheFileAlone(t *testing.T) {
	if got, want := (&SyntaxError{File: "r.toml", Msg: "bad"}).Error(), "r.toml: invalid TOML: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// An unsafe file's rule, when it is not the mode, is said alone.
func TestAnUnsafeFilesRuleIsSaidAloneWhenNotTheMode(t *testing.T) {
	e := &UnsafeFileError{Path: "/etc/r.toml", Why: "is a symlink; want a regular file", Mode: 0o666}
	if got, want := e.Error(), "/etc/r.toml: unsafe configuration file: it is a symlink; want a regular file"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// A writable file is named by its mode, through the symlink to it when it
// was reached by one.
func TestAWritableFileIsNamedThroughItsSymlink(t *testing.T) {
	for _, c := range []struct {
		e    UnsafeFileError
		want string
	}{
		{UnsafeFileError{Path: "/etc/r.toml", Mode: 0o666}, "/etc/r.toml: unsafe configuration file: it is group- or world-writable (mode 0666)"},
		{UnsafeFileError{Path: "/etc/r.toml", Target: "/srv/r.toml", Mode: 0o666}, "/etc/r.toml: unsafe configuration file: it is a symlink to /srv/r.toml, which is group- or world-writable (mode 0666)"},
	} {
		if got := c.e.Error(); !strings.HasPrefix(got, c.want) {
			t.Errorf("Error() = %q, want it to start %q", got, c.want)
		}
	}
}

// A secret id may live exactly as long as the wrapping that delivers it,
// not a second less.
func TestASecretIDMayLiveAsLongAsItsWrapping(t *testing.T) {
	for ttl, refused := range map[int]bool{600: false, 599: true} {
		doc := "[registrar]\nbackend = \"openbao\"\nmax_wrap_ttl_seconds = 600\n[openbao]\nsecret_id_ttl_seconds = " + strconv.Itoa(ttl) + "\n"
		_, err := loadBytes("test.toml", []byte(doc), nil, nil)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if got := strings.Contains(msg, "must be at least registrar.max_wrap_ttl_seconds"); got != refused {
			t.Errorf("secret_id_ttl_seconds %d with max_wrap_ttl_seconds 600: refused %v, want %v (%s)", ttl, got, refused, msg)
		}
	}
}

// errorLine finds a redefinition on the last line of a document without a
// final newline, and on a document of one line.
func TestErrorLineFindsTheLastLineWithoutANewline(t *testing.T) {
	for doc, want := range map[string]int{
		"a = 1\nb = 2\na = 3":   3,
		"a = 1\nb = 2\na = 3\n": 3,
		"t = {b = 1, b = 2}":    1,
	} {
		var m map[string]any
		err := gotoml.Unmarshal([]byte(doc), &m)
		if err == nil {
			t.Fatalf("%q parsed", doc)
		}
		if got := errorLine([]byte(doc), err.Error()); got != want {
			t.Errorf("errorLine(%q, %q) = %d, want %d", doc, err, got, want)
		}
	}
}

// An API path is '/'-separated segments of [A-Za-z0-9._-], each checked
// to its last character.
func TestAnAPIPathIsSegmentsOfItsCharacters(t *testing.T) {
	for s, want := range map[string]bool{
		"secret/registrar-otel": true, "azAZ09._-": true, "kv/z": true,
		"kv/a{": false, "kv/a b": false, "kv/ab~": false, "": false, "kv//a": false, "kv/..": false,
	} {
		if got := isAPIPath(s); got != want {
			t.Errorf("isAPIPath(%q) = %v, want %v", s, got, want)
		}
	}
}

// An unknown variable is warned of with the "__" spelling it likely
// meant, or else the variable of the known key its own key is nearest.
func TestAnUnknownVariableIsWarnedOfWithWhatItLikelyMeant(t *testing.T) {
	for v, want := range map[string]string{
		"REGISTRAR_OTEL_REGISTRAR_BACKEND=embedded":  "did_you_mean=REGISTRAR_OTEL_REGISTRAR__BACKEND",
		"REGISTRAR_OTEL_REGISTRAR__BACKEDN=embedded": "did_you_mean=REGISTRAR_OTEL_REGISTRAR__BACKEND",
	} {
		var logs strings.Builder
		if _, err := loadBytes("test.toml", nil, []string{v}, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if !strings.Contains(logs.String(), want) {
			t.Errorf("%s: logged %q, want %s", v, logs.String(), want)
		}
	}
}

// A token's source is named as the operator set it.
func TestATokenSourceIsNamedAsSet(t *testing.T) {
	for s, want := range map[TokenSource]string{
		{Credential: "bao-token"}:               `systemd credential "bao-token"`,
		{File: "/etc/registrar-otel/bao-token"}: `openbao.token_file "/etc/registrar-otel/bao-token"`,
		{EnvVar: "BAO_TOKEN"}:                   "environment variable BAO_TOKEN",
	} {
		if got := s.String(); got != want {
			t.Errorf("%+v.String() = %s, want %s", s, got, want)
		}
	}
}

// A token is printable ASCII without spaces, '!' to '~' included.
func TestATokenIsPrintableASCIIWithoutSpaces(t *testing.T) {
	for s, want := range map[string]bool{"!": true, "s.abc~": true, "~": true, "": false, "a b": false, "a\x7f": false, "a\x1f": false} {
		if got := isToken(s); got != want {
			t.Errorf("isToken(%q) = %v, want %v", s, got, want)
		}
	}
}

// A file of exactly its bound is read; one byte more is too large.
func TestAFileOfExactlyItsBoundIsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	for size, tooLarge := range map[int]bool{16: false, 17: true} {
		if err := os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o600); err != nil {
			t.Fatal(err)
		}
		data, p := openChecked(path, 16, false, euid())
		if got := p != nil && p.kind == kindTooLarge; got != tooLarge || (!tooLarge && (p != nil || len(data) != size)) {
			t.Errorf("%d bytes with a bound of 16: %d bytes read, problem %+v; want too large %v", size, len(data), p, tooLarge)
		}
	}
}
