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
