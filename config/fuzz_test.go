package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// checkLoadResult asserts the loader's invariants on any input: a loaded
// Config validates, and every error is one line that either starts with the
// key it names (a *KeyError) or, for a file that is not TOML, with the file
// and a line number (a *SyntaxError).
func checkLoadResult(t *testing.T, cfg Config, err error, keyPrefixes ...string) {
	t.Helper()
	if err == nil {
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("Load succeeded with a config that does not validate:\n%s", errorLines(verr))
		}
		return
	}
	for _, e := range Errors(err) {
		msg := e.Error()
		if strings.ContainsAny(msg, "\r\n") {
			t.Errorf("error message spans lines: %q", msg)
		}
		switch e := e.(type) {
		case *KeyError:
			named := false
			for _, p := range keyPrefixes {
				named = named || strings.HasPrefix(e.Key, p)
			}
			if !named || !strings.HasPrefix(msg, e.Key+" ") {
				t.Errorf("error %q names key %q, want a key starting with one of %q, first in the message", msg, e.Key, keyPrefixes)
			}
		case *SyntaxError:
			if e.File != "fuzz.toml" || e.Line < 1 || !strings.HasPrefix(msg, "fuzz.toml:"+strconv.Itoa(e.Line)+":") {
				t.Errorf("syntax error %q does not name the file and a line (%+v)", msg, e)
			}
		default:
			t.Errorf("error %q is a %T, want *KeyError or *SyntaxError", msg, e)
		}
	}
}

// FuzzLoad feeds arbitrary bytes to the loader as a TOML file. Seeded with
// every fixture; run with `go test -run=^$ -fuzz=FuzzLoad -fuzztime=30s ./config/`.
func FuzzLoad(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.toml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("[registrar]\nsocket_path = \"a\"\nsocket_path = \"b\"\n"))
	f.Add([]byte("registrar.components.x.multiplicity = 'one-per-host'\n\"\" = 1\n[[telemetry]]\n"))
	f.Add([]byte("[registrar]\nrate_limit_admission_burst = 0x10\naudit_max_file_bytes = 0o777777\n"))
	f.Add([]byte("[registrar.callers.a]\nidentities = ['x']\n[registrar.callers.b]\nidentity_prefixes = ['x', '']\nshadow.rate_limit_admission_burst = 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := loadBytes("fuzz.toml", data, nil, nil)
		checkLoadResult(t, cfg, err, "registrar", "telemetry", "openbao")
	})
}

// FuzzLoadEnv feeds one arbitrary REGISTRAR_OTEL_ variable to the loader on
// top of the full fixture.
func FuzzLoadEnv(f *testing.F) {
	for _, seed := range [][2]string{
		{"REGISTRAR__RATE_LIMIT_ADMISSION_BURST", "600"},
		{"REGISTRAR__RATE_LIMIT_ADMISSION_BURST", "-3"},
		{"REGISTRAR__COMPONENTS__EDGE__MULTIPLICITY", "one-per-host"},
		{"TELEMETRY__TRACE_SAMPLE_PER_MILLION", "500000"},
		{"TELEMETRY__TRACE_SAMPLE_RATIO", "0.5"},
		{"REGISTRAR__CALLERS__AGENTS__RATE_LIMIT_ADMISSION_BURST", "8"},
		{"REGISTRAR__CALLERS__AGENTS__SHADOW__RATE_LIMIT_ADMISSION_BURST", "0"},
		{"REGISTRAR__CALLERS__AGENTS__IDENTITIES", "unix-peer:uid=0"},
		{"REGISTRAR__CALLERS__NEW__RATE_LIMIT_ADMISSION_BURST", "8"},
		{"REGISTRAR____X", "1"},
		{"REGISTRAR", "x"},
	} {
		f.Add(seed[0], seed[1])
	}
	data, err := os.ReadFile(filepath.Join("testdata", "valid_full.toml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		if strings.ContainsAny(name, "=\x00") {
			t.Skip("not an environment variable name")
		}
		cfg, err := loadBytes("fuzz.toml", data, []string{EnvPrefix + name + "=" + value}, nil)
		checkLoadResult(t, cfg, err, "registrar", "telemetry", "openbao", EnvPrefix, `"`+EnvPrefix)
	})
}
