package docs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
)

var keyRow = regexp.MustCompile("(?m)^\\| `((?:registrar|telemetry|openbao)\\.[^`]+)` \\|.*\\| `(live|restart)` \\|$")

// TestReloadColumnMatchesTheCode: the reload column of the key tables says,
// for every key in both languages, what config.ReloadClass says: `live`
// (a reload applies it) or `restart`.
func TestReloadColumnMatchesTheCode(t *testing.T) {
	for _, p := range pagesNamed(t, "configuration.md") {
		got := map[string]string{}
		for _, m := range keyRow.FindAllStringSubmatch(p.raw, -1) {
			got[m[1]] = m[2]
		}
		for _, k := range config.Keys() {
			class, ok := got[k]
			switch {
			case !ok:
				t.Errorf("%s: no reload column for `%s`", p.path, k)
			case class != config.ReloadClass(k):
				t.Errorf("%s: `%s` is %q in the reload column, the code says %q", p.path, k, class, config.ReloadClass(k))
			}
		}
	}
}

// TestChangingLimitsIsLinkedFromTheThrottleRunbook: the operations page's
// incident section exists in both languages and the admission-throttle
// runbook points at it.
func TestChangingLimitsIsLinkedFromTheThrottleRunbook(t *testing.T) {
	for _, lang := range langs {
		ops := loadPage(t, lang, "operations.md")
		if !strings.Contains(ops.raw, "{#changing-limits}") {
			t.Errorf("%s has no {#changing-limits} section", ops.path)
		}
		m := loadPage(t, lang, "metrics.md")
		i := strings.Index(m.raw, "{#registraradmissionthrottlespike}")
		if i < 0 {
			t.Fatalf("%s has no admission-throttle runbook", m.path)
		}
		runbook := m.raw[i:]
		if j := strings.Index(runbook[1:], "\n## "); j >= 0 {
			runbook = runbook[:j+1]
		}
		if !strings.Contains(runbook, "operations.md#changing-limits") {
			t.Errorf("%s: the RegistrarAdmissionThrottleSpike runbook does not link operations.md#changing-limits", m.path)
		}
	}
}
