package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.err golden files from the current messages")

// errorLines renders err the way `config check` does: one error per line.
func errorLines(err error) string {
	var b strings.Builder
	for _, e := range Errors(err) {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// sameErrors fails unless err's errors, in order, read want.
func sameErrors(t *testing.T, err error, want []string) {
	t.Helper()
	var got []string
	for _, e := range Errors(err) {
		got = append(got, e.Error())
	}
	if !slices.Equal(got, want) {
		t.Errorf("Validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func fixtures(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no fixtures match testdata/%s", pattern)
	}
	return files
}

func TestValidFixturesLoadWithoutError(t *testing.T) {
	for _, path := range fixtures(t, "valid_*.toml") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, err := Load(path, nil, nil)
			if err != nil {
				t.Fatalf("Load(%q) failed:\n%s", path, errorLines(err))
			}
			if cfg.Source != path {
				t.Errorf("Source = %q, want %q", cfg.Source, path)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("loaded config does not validate:\n%s", errorLines(err))
			}
		})
	}
}

// TestInvalidFixturesReportExactMessages compares every error of each
// invalid_<reason>.toml with its golden testdata/invalid_<reason>.err, one
// message per line. Regenerate with `go test ./config -run InvalidFixtures -update`
// and review the diff.
func TestInvalidFixturesReportExactMessages(t *testing.T) {
	for _, path := range fixtures(t, "invalid_*.toml") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, err := Load(path, nil, nil)
			if err == nil {
				t.Fatalf("Load(%q) succeeded, want an error", path)
			}
			for _, e := range Errors(err) {
				var ke *KeyError
				var se *SyntaxError
				if !errors.As(e, &ke) && !errors.As(e, &se) {
					t.Errorf("error %q is %T, want *KeyError or *SyntaxError", e, e)
				}
			}
			got := errorLines(err)
			golden := strings.TrimSuffix(path, ".toml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden file (run with -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("errors of %s:\ngot:\n%swant:\n%s", path, got, want)
			}
		})
	}
}

// TestEveryGoldenHasAFixture keeps testdata tidy: a .err file without its
// .toml would never be checked.
func TestEveryGoldenHasAFixture(t *testing.T) {
	for _, golden := range fixtures(t, "*.err") {
		if _, err := os.Stat(strings.TrimSuffix(golden, ".err") + ".toml"); err != nil {
			t.Errorf("%s has no fixture: %v", golden, err)
		}
	}
}

// TestShippedExamplesValidate loads every TOML example shipped under docs/.
func TestShippedExamplesValidate(t *testing.T) {
	var examples []string
	err := filepath.WalkDir(filepath.Join("..", "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".toml") {
			examples = append(examples, path)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(examples) == 0 {
		t.Skip("no TOML example under docs/ yet")
	}
	for _, path := range examples {
		t.Run(path, func(t *testing.T) {
			if _, err := Load(path, nil, nil); err != nil {
				t.Errorf("shipped example %s does not load:\n%s", path, errorLines(err))
			}
		})
	}
}
