package config

import (
	"strings"
	"testing"
)

// TestRedactURLRedactsAFragmentWithoutAQuery holds that a fragment is
// redacted on its own, not only behind a query: an access token in a
// fragment (…#access_token=…) is as secret as one in a query.
func TestRedactURLRedactsAFragmentWithoutAQuery(t *testing.T) {
	for in, want := range map[string]string{
		"https://host:4318/otlp#access_token=s3cret": "https://host:4318/otlp?REDACTED",
		"host/x#s3cret":           "host/x?REDACTED",
		"https://u:p@host#s3cret": "https://REDACTED@host?REDACTED",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RedactText("export to https://collector:4318/v1#token=s3cret failed"); strings.Contains(got, "s3cret") {
		t.Errorf("RedactText kept a fragment: %s", got)
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
