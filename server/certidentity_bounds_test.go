package server

import (
	"strings"
	"testing"
)

// TestDNSNamesAtTheirBoundsAndEdgeCharacters holds the edges of the DNS SAN
// rule: a name of exactly 253 bytes (and a label of exactly 63) is an
// identity, one byte more is refused; the first and last letter and digit
// of each range are allowed, the bytes just outside each range are not.
func TestDNSNamesAtTheirBoundsAndEdgeCharacters(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61) // 63*3 + 61 + 3 dots
	if len(name253) != 253 {
		t.Fatalf("test bug: name253 is %d bytes", len(name253))
	}
	for _, tc := range []struct {
		name, in, want, problem string
	}{
		{name: "253 bytes", in: name253, want: name253},
		{name: "253 bytes and a trailing dot", in: name253 + ".", want: name253},
		{name: "254 bytes", in: name253 + "b", problem: "longer than 253 bytes"},
		{name: "a label of 63 bytes", in: label63 + ".example", want: label63 + ".example"},
		{name: "a label of 64 bytes", in: label63 + "a.example", problem: "label longer than 63 bytes"},
		{name: "the first and last of each range", in: "az.AZ.09.-_", want: "az.az.09.-_"},
		{name: "a digit-only name", in: "0123456789", want: "0123456789"},
		{name: "just before 'a'", in: "ctl`.example", problem: "a character other than"},
		{name: "just after 'z'", in: "ctl{.example", problem: "a character other than"},
		{name: "just before 'A'", in: "ctl@.example", problem: "a character other than"},
		{name: "just after 'Z'", in: "ctl[.example", problem: "a character other than"},
		{name: "just before '0'", in: "ctl/.example", problem: "a character other than"},
		{name: "just after '9'", in: "ctl:.example", problem: "a character other than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := canonicalDNSName(tc.in)
			switch {
			case tc.problem == "" && (problem != "" || got != tc.want):
				t.Errorf("canonicalDNSName(%q) = %q, %q; want %q accepted", tc.in, got, problem, tc.want)
			case tc.problem != "" && !strings.Contains(problem, tc.problem):
				t.Errorf("canonicalDNSName(%q) = %q, %q; want refused as %q", tc.in, got, problem, tc.problem)
			}
		})
	}
}
