//go:build unix

package audit_test

import (
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// TestScanDetailNamesTheFieldAndItsProblem holds the wording of a malformed
// line's detail in the scan report: the key and what is wrong with it when
// the reader knows both ("request_id: …"), the problem alone when there is
// no key (invalid JSON: no leading ": "), the quoted key alone when the key
// is the problem (an unknown key).
func TestScanDetailNamesTheFieldAndItsProblem(t *testing.T) {
	cases := []struct {
		name    string
		content string
		rule    audit.Rule
		check   func(detail string) bool
		want    string
	}{
		{"a key and its problem", sub(t, goodLimited, `"verb"`, `"request_id":"z","verb"`) + "\n", audit.RulePhaseInconsistency,
			func(d string) bool {
				return strings.HasPrefix(d, "request_id: ") && strings.Contains(d, "must be absent")
			},
			`"request_id: " then the phase's rule ("must be absent")`},
		{"the problem alone", "{not json}\n", audit.RuleInvalidJSON,
			func(d string) bool { return d != "" && !strings.HasPrefix(d, ":") && !strings.HasPrefix(d, " ") },
			"the JSON error, with no empty key before it"},
		{"the key alone", sub(t, goodLimited, `"count":3`, `"count":3,"extra":true`) + "\n", audit.RuleUnknownKey,
			func(d string) bool { return d == `"extra"` },
			`"extra", quoted`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := scan(t, writeStore(t, tc.content))
			if len(rep.Malformed) != 1 || rep.Malformed[0].Rule != tc.rule {
				t.Fatalf("got malformed %+v, want one line breaking %s", rep.Malformed, tc.rule)
			}
			if d := rep.Malformed[0].Detail; !tc.check(d) {
				t.Errorf("detail %q, want %s", d, tc.want)
			}
		})
	}
}
