package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWireExamplesAreTheGoldens: every example answer on the protocol
// page (a JSON line with registrar_health) is byte for byte one of the
// wire package's response goldens, which the wire tests check against the
// live encoder; so an example cannot omit a member every live answer
// carries (audit_capacity, for one).
func TestWireExamplesAreTheGoldens(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "wire", "testdata", "response_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no response goldens: %v", err)
	}
	goldens := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		goldens[strings.TrimSpace(string(b))] = true
	}
	for _, lang := range langs {
		p := parsePage(t, lang+"/wire.md")
		n := 0
		for _, line := range strings.Split(p.raw, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"registrar_health"`) {
				continue
			}
			n++
			if !goldens[line] {
				t.Errorf("%s/wire.md: an example answer that no live answer matches (see wire/testdata/response_*.json): %s", lang, line)
			}
		}
		if n == 0 {
			t.Errorf("%s/wire.md: no example answers found", lang)
		}
	}
}
