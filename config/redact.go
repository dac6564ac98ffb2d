package config

import (
	"regexp"
	"strings"
)

// Redacted stands in for whatever a message must not repeat.
const Redacted = "REDACTED"

// RedactURL returns s with what may carry a secret replaced by REDACTED:
// the user-info (everything up to the last '@', so a password holding '/',
// '?' or '#' is covered too) and the query and fragment. The scheme, host,
// port and path are kept so the operator still sees which endpoint is
// meant. It works on text that does not parse as a URL as well: an
// unparsable endpoint is where a mistyped password ends up.
func RedactURL(s string) string {
	prefix, rest := "", s
	if i := strings.Index(s, "://"); i >= 0 {
		prefix, rest = s[:i+3], s[i+3:]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = Redacted + "@" + rest[at+1:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i] + "?" + Redacted
	}
	return prefix + rest
}

var (
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	urlToken = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"']*`)
)

// RedactText redacts a free-form message from a library (an error text, a
// log line): every quoted segment, which is where parsers repeat their
// input (a URL, a header value), and the user-info and query of every URL
// left in it.
func RedactText(s string) string {
	s = quoted.ReplaceAllString(s, `"`+Redacted+`"`)
	return urlToken.ReplaceAllStringFunc(s, RedactURL)
}
