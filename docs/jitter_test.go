package docs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/loadgen"
)

// TestTheLoadDriversJitterIsStatedAsItIs: the operations page states the
// load driver's retry jitter as the driver has it (loadgen.MaxRetryJitter),
// in both of the places it says it, in both languages.
func TestTheLoadDriversJitterIsStatedAsItIs(t *testing.T) {
	ms := loadgen.MaxRetryJitter.Milliseconds()
	want := map[string]string{
		"en": fmt.Sprintf("plus a random 0 to %d ms", ms),
		"ko": fmt.Sprintf("`retry_after`에 0~%d ms의 무작위 값", ms),
	}
	for _, lang := range langs {
		p := parsePage(t, lang+"/operations.md")
		text := strings.Join(strings.Fields(p.raw), " ") // lines wrap anywhere
		if n := strings.Count(text, want[lang]); n != 2 {
			t.Errorf("%s/operations.md states %q %d times, want 2 (the jitter section and load wave)", lang, want[lang], n)
		}
	}
}
