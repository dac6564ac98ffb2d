package callers

import (
	"errors"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestGlobMatchesAsWritten(t *testing.T) {
	for _, tc := range []struct {
		pattern, value string
		want           bool
	}{
		{"review", "review", true},
		{"review", "reviews", false},
		{"review", "revie", false},
		{"*", "", true},
		{"*", "edge-eu", true},
		{"?", "", false},
		{"?", "a", true},
		{"?", "ab", false},
		{"??", "ab", true},
		{"edge-*", "edge-", true},
		{"edge-*", "edge-eu1", true},
		{"edge-*", "edge", false},
		{"*-canary", "web-canary", true},
		{"*-canary", "web-canary-2", false},
		{"a*b", "ab", true},
		{"a*b", "abab", true}, // '*' takes "ba"
		{"a*b", "abac", false},
		{"*a*b", "xxaxxbxxb", true},
		{"*ab", "aab", true},    // the first 'a' is the star's, found by going back
		{"*aab", "aaab", true},  // back more than one byte
		{"*aab", "aaaab", true}, // and again
		{"*aab", "aaaa", false},
		{"a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"search-*-api", "search-eu-west-api", true}, // the '-' after '*' first matches too early
		{"search-*-api", "search--api", true},
		{"search-*-api", "search-api", false},
		{"*-canary", "web-frontend-eu-west-1-canary", true}, // going back after 20 bytes
		{"*-canary", "web-frontend-eu-west-1-canar", false},
		{"**", "x", true},
		{"*?*", "", false},
		{"*?*", "x", true},
		{"?*?", "x", false},
		{"gw-?", "gw-1", true},
		{"gw-?", "gw-12", false},
		{"", "", true},
		{"", "a", false},
	} {
		if got := glob(tc.pattern, tc.value); got != tc.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tc.pattern, tc.value, got, tc.want)
		}
		if g := anchor(tc.pattern); g.match(tc.value) != tc.want {
			t.Errorf("anchor(%q) = %+v matches %q: %v, want %v", tc.pattern, g, tc.value, !tc.want, tc.want)
		}
	}
}

// TestGlobAgreesWithPathMatchOnEveryShortCase: glob, and every pattern
// cut by anchor, answer as path.Match does for every pattern of up to 4
// bytes over "ab*?-" against every value of up to 5 bytes over "ab-"
// (FuzzGlob goes further).
func TestGlobAgreesWithPathMatchOnEveryShortCase(t *testing.T) {
	patterns := allStrings("ab*?-", 4)
	values := allStrings("ab-", 5)
	for _, p := range patterns {
		for _, v := range values {
			want, err := path.Match(p, v)
			if err != nil {
				t.Fatalf("path.Match(%q, %q): %v", p, v, err)
			}
			checkGlob(t, p, v, want)
		}
	}
}

// allStrings is every string over alphabet of at most n bytes.
func allStrings(alphabet string, n int) []string {
	out, level := []string{""}, []string{""}
	for range n {
		var next []string
		for _, s := range level {
			for i := 0; i < len(alphabet); i++ {
				next = append(next, s+alphabet[i:i+1])
			}
		}
		out, level = append(out, next...), next
	}
	return out
}

func TestIdentityHost(t *testing.T) {
	for _, tc := range []struct {
		identity, want string
	}{
		{"registrar-client:dns:web-1.example.org", "web-1"},
		{"registrar-client:dns:web-1", "web-1"},
		{"registrar-client:dns:", ""},
		{"registrar-client:dns:.example.org", ""},
		{"registrar-client:dns:web_1.example.org", ""},
		{"registrar-client:dns:-web.example.org", ""},
		{"registrar-client:dns:" + strings.Repeat("a", 63) + ".example.org", strings.Repeat("a", 63)},
		{"registrar-client:dns:" + strings.Repeat("a", 64) + ".example.org", ""},
		{"registrar-client:uri:spiffe://example.org/host/web-17", "web-17"},
		{"registrar-client:uri:spiffe://example.org/web-17", "web-17"},
		{"registrar-client:uri:spiffe://example.org/host/web-17/", "web-17"},
		{"registrar-client:uri:spiffe://example.org/host/web-17//", "web-17"},
		{"registrar-client:uri:spiffe://example.org//web-17", "web-17"},
		{"registrar-client:uri:spiffe://[2001:db8::1]/edge-3", "edge-3"},
		{"registrar-client:uri:spiffe://192.0.2.1/edge-3", "edge-3"},
		{"registrar-client:uri:spiffe://example.org", ""},   // no path
		{"registrar-client:uri:spiffe://example.org/", ""},  // no segment
		{"registrar-client:uri:spiffe://example.org//", ""}, // only slashes
		{"registrar-client:uri:spiffe://example.org/host/Web-17", ""},
		{"registrar-client:uri:spiffe://example.org/host/web%2017", ""},
		{"registrar-client:uri:spiffe://example.org/host/web-17.example", ""},
		{"registrar-client:uri:spiffe://example.org/host/web-17-", ""},
		{"registrar-client:uri:example.org/web-17", ""}, // no "://"
		{"registrar-client:uri:", ""},
		{"registrar-client:DNS:web-1", ""},
		{"registrar-client:web-1", ""},
		{"unix-peer:uid=1000", ""},
		{"web-1", ""},
		{"", ""},
	} {
		host, ok := IdentityHost(tc.identity)
		if host != tc.want || ok != (tc.want != "") {
			t.Errorf("IdentityHost(%q) = %q, %v; want %q, %v", tc.identity, host, ok, tc.want, tc.want != "")
		}
	}
}

func TestCompileScopeRefusesPatternsThatMatchNothing(t *testing.T) {
	rule := func(key string, i int, p, rule string) error {
		return &PatternError{Policy: "edge", Key: key, Index: i, Pattern: p, Rule: rule}
	}
	const (
		badByte  = ": a pattern is made of a-z, 0-9, '-', '*' and '?'"
		notHosts = "may not hold {identity}: it names a host, so only scope_hosts takes it"
		notAlone = "must be {identity} alone: it is a whole pattern, not part of one"
		empty    = "must not be empty: an empty pattern matches nothing"
		tooLong  = "matches no DNS label: the shortest value it matches that does not start or end with '-' is 64 bytes, over 63"
	)
	a63 := strings.Repeat("a", 63)
	for _, tc := range []struct {
		name string
		spec ScopeSpec
		want []error
		msgs []string
	}{
		{"an empty pattern", ScopeSpec{Services: []string{""}},
			[]error{rule("scope_services", 0, "", empty)},
			[]string{`callers: policy "edge": scope_services[0] "" must not be empty: an empty pattern matches nothing`}},
		{"an empty verb pattern", ScopeSpec{Verbs: []string{"mint", ""}},
			[]error{rule("scope_verbs", 1, "", empty)}, nil},
		{"{identity} in services", ScopeSpec{Services: []string{IdentityPattern}},
			[]error{rule("scope_services", 0, IdentityPattern, notHosts)},
			[]string{`callers: policy "edge": scope_services[0] "{identity}" may not hold {identity}: it names a host, so only scope_hosts takes it`}},
		{"{identity} in components", ScopeSpec{Components: []string{"x", IdentityPattern}},
			[]error{rule("scope_components", 1, IdentityPattern, notHosts)}, nil},
		{"{identity} in verbs", ScopeSpec{Verbs: []string{IdentityPattern}},
			[]error{rule("scope_verbs", 0, IdentityPattern, notHosts)}, nil},
		{"{identity} inside a service pattern", ScopeSpec{Services: []string{"x{identity}"}},
			[]error{rule("scope_services", 0, "x{identity}", notHosts)}, nil},
		{"{identity} with a suffix", ScopeSpec{Hosts: []string{"{identity}-2"}},
			[]error{rule("scope_hosts", 0, "{identity}-2", notAlone)},
			[]string{`callers: policy "edge": scope_hosts[0] "{identity}-2" must be {identity} alone: it is a whole pattern, not part of one`}},
		{"{identity} with a prefix", ScopeSpec{Hosts: []string{"*{identity}"}},
			[]error{rule("scope_hosts", 0, "*{identity}", notAlone)}, nil},
		{"another brace", ScopeSpec{Hosts: []string{"{host}"}},
			[]error{rule("scope_hosts", 0, "{host}", `holds "{" at byte 0`+badByte)}, nil},
		{"upper case", ScopeSpec{Services: []string{"Edge-*"}},
			[]error{rule("scope_services", 0, "Edge-*", `holds "E" at byte 0`+badByte)},
			[]string{`callers: policy "edge": scope_services[0] "Edge-*" holds "E" at byte 0: a pattern is made of a-z, 0-9, '-', '*' and '?'`}},
		{"a dot", ScopeSpec{Hosts: []string{"web.example"}},
			[]error{rule("scope_hosts", 0, "web.example", `holds "." at byte 3`+badByte)}, nil},
		{"a character class", ScopeSpec{Components: []string{"gw-[12]"}},
			[]error{rule("scope_components", 0, "gw-[12]", `holds "[" at byte 3`+badByte)}, nil},
		{"an escape", ScopeSpec{Components: []string{`a\*`}},
			[]error{rule("scope_components", 0, `a\*`, `holds "\\" at byte 1`+badByte)}, nil},
		{"a control byte", ScopeSpec{Services: []string{"a\n"}},
			[]error{rule("scope_services", 0, "a\n", `holds "\n" at byte 1`+badByte)}, nil},
		{"a byte above ASCII", ScopeSpec{Services: []string{"é"}},
			[]error{rule("scope_services", 0, "é", `holds "\xc3" at byte 0`+badByte)}, nil},
		{"upper case in a verb", ScopeSpec{Verbs: []string{"Mint"}},
			[]error{rule("scope_verbs", 0, "Mint", `holds "M" at byte 0`+badByte)}, nil},
		{"a leading '-'", ScopeSpec{Services: []string{"-edge"}},
			[]error{rule("scope_services", 0, "-edge", "starts with '-', so it matches no DNS label")},
			[]string{`callers: policy "edge": scope_services[0] "-edge" starts with '-', so it matches no DNS label`}},
		{"a lone '-'", ScopeSpec{Hosts: []string{"-"}},
			[]error{rule("scope_hosts", 0, "-", "starts with '-', so it matches no DNS label")}, nil},
		{"a trailing '-'", ScopeSpec{Components: []string{"edge-"}},
			[]error{rule("scope_components", 0, "edge-", "ends with '-', so it matches no DNS label")}, nil},
		{"a trailing '-' after a star", ScopeSpec{Hosts: []string{"*-"}},
			[]error{rule("scope_hosts", 0, "*-", "ends with '-', so it matches no DNS label")}, nil},
		{"64 fixed bytes", ScopeSpec{Services: []string{a63 + "a"}},
			[]error{rule("scope_services", 0, a63+"a", tooLong)},
			[]string{`callers: policy "edge": scope_services[0] "` + strings.Repeat("a", 64) + `" ` + tooLong}},
		{"64 bytes of '?' and stars", ScopeSpec{Services: []string{"*" + strings.Repeat("?*", 64)}},
			[]error{rule("scope_services", 0, "*"+strings.Repeat("?*", 64), "must be at most 127 bytes, got 129")}, nil},
		{"63 fixed bytes and a star before a '-'", ScopeSpec{Hosts: []string{"*-" + strings.Repeat("a", 62)}},
			[]error{rule("scope_hosts", 0, "*-"+strings.Repeat("a", 62), tooLong)}, nil},
		{"63 fixed bytes and a star after a '-'", ScopeSpec{Hosts: []string{strings.Repeat("a", 62) + "-*"}},
			[]error{rule("scope_hosts", 0, strings.Repeat("a", 62)+"-*", tooLong)}, nil},
		{"62 fixed bytes between two stars by a '-'", ScopeSpec{Hosts: []string{"*-" + strings.Repeat("?", 60) + "-*"}},
			[]error{rule("scope_hosts", 0, "*-"+strings.Repeat("?", 60)+"-*", tooLong)}, nil},
		{"128 bytes", ScopeSpec{Services: []string{strings.Repeat("*", 128)}},
			[]error{rule("scope_services", 0, strings.Repeat("*", 128), "must be at most 127 bytes, got 128")}, nil},
		{"a verb pattern that matches no verb", ScopeSpec{Verbs: []string{"mnt"}},
			[]error{rule("scope_verbs", 0, "mnt", `matches neither "mint" nor "deregister"`)},
			[]string{`callers: policy "edge": scope_verbs[0] "mnt" matches neither "mint" nor "deregister"`}},
		{"a verb pattern of the wrong length", ScopeSpec{Verbs: []string{"mint?"}},
			[]error{rule("scope_verbs", 0, "mint?", `matches neither "mint" nor "deregister"`)}, nil},
		{"a verb pattern with a trailing '-'", ScopeSpec{Verbs: []string{"*-"}},
			[]error{rule("scope_verbs", 0, "*-", `matches neither "mint" nor "deregister"`)}, nil},
		{"a duplicate", ScopeSpec{Services: []string{"a", "b", "a"}},
			[]error{rule("scope_services", 2, "a", "repeats scope_services[0]")},
			[]string{`callers: policy "edge": scope_services[2] "a" repeats scope_services[0]`}},
		{"{identity} twice", ScopeSpec{Hosts: []string{IdentityPattern, "gw-?", IdentityPattern}},
			[]error{rule("scope_hosts", 2, IdentityPattern, "repeats scope_hosts[0]")}, nil},
		{"a duplicate verb", ScopeSpec{Verbs: []string{"mint", "mint"}},
			[]error{rule("scope_verbs", 1, "mint", "repeats scope_verbs[0]")}, nil},
		{"an empty list", ScopeSpec{Services: []string{}},
			[]error{&ScopeKeyError{Policy: "edge", Key: "scope_services", Rule: "is empty, which matches nothing: leave the key out for any value"}},
			[]string{`callers: policy "edge": scope_services is empty, which matches nothing: leave the key out for any value`}},
		{"an empty verb list", ScopeSpec{Verbs: []string{}},
			[]error{&ScopeKeyError{Policy: "edge", Key: "scope_verbs", Rule: "is empty, which matches nothing: leave the key out for any value"}}, nil},
		{"65 patterns", ScopeSpec{Hosts: manyPatterns(65)},
			[]error{&ScopeKeyError{Policy: "edge", Key: "scope_hosts", Rule: "holds 65 patterns, more than 64"}},
			[]string{`callers: policy "edge": scope_hosts holds 65 patterns, more than 64`}},
		{"every error at once, in key order", ScopeSpec{
			Verbs:      []string{"x"},
			Hosts:      []string{"-a", IdentityPattern, "b-"},
			Components: []string{},
			Services:   []string{"ok", "", "OK"},
		}, []error{
			rule("scope_services", 1, "", empty),
			rule("scope_services", 2, "OK", `holds "O" at byte 0`+badByte),
			&ScopeKeyError{Policy: "edge", Key: "scope_components", Rule: "is empty, which matches nothing: leave the key out for any value"},
			rule("scope_hosts", 0, "-a", "starts with '-', so it matches no DNS label"),
			rule("scope_hosts", 2, "b-", "ends with '-', so it matches no DNS label"),
			rule("scope_verbs", 0, "x", `matches neither "mint" nor "deregister"`),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := CompileScope("edge", tc.spec)
			if s != nil {
				t.Errorf("CompileScope returned a Scope with the error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("CompileScope = %v, want an error matching ErrInvalid", err)
			}
			got := unjoin(err)
			if len(got) != len(tc.want) {
				t.Fatalf("CompileScope returned %d errors %v, want %d: %v", len(got), got, len(tc.want), tc.want)
			}
			for i := range got {
				if !errors.Is(got[i], ErrInvalid) {
					t.Errorf("error %d (%v) does not match ErrInvalid", i, got[i])
				}
				if !sameScopeError(got[i], tc.want[i]) {
					t.Errorf("error %d = %#v, want %#v", i, got[i], tc.want[i])
				}
				if i < len(tc.msgs) && got[i].Error() != tc.msgs[i] {
					t.Errorf("error %d says\n%s\nwant\n%s", i, got[i], tc.msgs[i])
				}
			}
		})
	}
}

// manyPatterns is n distinct host patterns.
func manyPatterns(n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "h" + strconv.Itoa(i)
	}
	return ps
}

func sameScopeError(got, want error) bool {
	switch w := want.(type) {
	case *PatternError:
		g, ok := got.(*PatternError)
		return ok && *g == *w
	case *ScopeKeyError:
		g, ok := got.(*ScopeKeyError)
		return ok && *g == *w
	}
	return false
}

// TestCompileScopeAcceptsPatternsAtTheBounds: one byte short of each
// refusal above.
func TestCompileScopeAcceptsPatternsAtTheBounds(t *testing.T) {
	a63 := strings.Repeat("a", 63)
	starred := "*" + strings.Repeat("a*", 63) // 127 bytes
	for _, spec := range []ScopeSpec{
		{Services: []string{a63}},
		{Services: []string{starred}},
		{Services: []string{strings.Repeat("?", 63)}},
		{Hosts: []string{"*-" + strings.Repeat("a", 61)}},
		{Hosts: []string{strings.Repeat("a", 61) + "-*"}},
		{Hosts: []string{"*-" + strings.Repeat("?", 59) + "-*"}},
		{Hosts: manyPatterns(MaxScopePatterns)},
		{Components: []string{"*", "?", "a", "0", "a-b", "a--b", "*-*", "**"}},
		{Hosts: []string{IdentityPattern}},
		{Verbs: []string{"mint", "deregister"}},
		{Verbs: []string{"*"}},
		{Verbs: []string{"m*", "*r"}},
	} {
		s, err := CompileScope("edge", spec)
		if err != nil || s == nil {
			t.Errorf("CompileScope(%+v) = %v, %v; want a Scope", spec, s, err)
		}
	}
	s, err := CompileScope("edge", ScopeSpec{Services: []string{starred}})
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Check("", false, vocab.Mint, a63, "x", "y"); d != vocab.Scope(0) {
		t.Errorf("Check of a 63-byte service against %q = %v, want none", starred, d)
	}
}

// TestAVerbPatternMustMatchAVerb: a verb pattern is judged against the
// two verbs, not by the DNS label rules.
func TestAVerbPatternMustMatchAVerb(t *testing.T) {
	for p, want := range map[string]vocab.Scope{"d*-*": vocab.ScopeVerb, "*t": vocab.Scope(0), "m?nt": vocab.Scope(0), "*": vocab.Scope(0)} {
		s, err := CompileScope("edge", ScopeSpec{Verbs: []string{p}})
		if (err != nil) != (want == vocab.ScopeVerb) {
			t.Errorf("CompileScope(verbs %q) = %v, want refused %v", p, err, want == vocab.ScopeVerb)
		}
		if err == nil && s.Check("", false, vocab.Mint, "a", "b", "c") != vocab.Scope(0) {
			t.Errorf("verbs %q: mint is out of scope", p)
		}
	}
	for _, verbs := range [][]string{{"mint", "deregister"}, {"deregister", "mint"}, {"m*", "d*"}} {
		s, err := CompileScope("edge", ScopeSpec{Verbs: verbs})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []vocab.Verb{vocab.Mint, vocab.Deregister} {
			if d := s.Check("", false, v, "a", "b", "c"); d != vocab.Scope(0) {
				t.Errorf("verbs %q: Check(%v) = %v, want none", verbs, v, d)
			}
		}
	}
}

// scopeForTests is the scope of the package documentation's example,
// and a host pattern beside {identity}.
var scopeForTests = ScopeSpec{
	Services:   []string{"review", "edge-*"},
	Components: []string{"review", "edge-proxy"},
	Hosts:      []string{IdentityPattern, "gw-?"},
	Verbs:      []string{"mint"},
}

// TestCheckTriesVerbThenServiceThenComponentThenHost walks the order on
// calls out of scope on one dimension and on several.
func TestCheckTriesVerbThenServiceThenComponentThenHost(t *testing.T) {
	s, err := CompileScope("edge", scopeForTests)
	if err != nil {
		t.Fatal(err)
	}
	const id = "registrar-client:uri:spiffe://example.org/host/web-17"
	for _, tc := range []struct {
		identity                 string
		verb                     vocab.Verb
		service, component, host string
		want                     vocab.Scope
	}{
		{id, vocab.Mint, "review", "review", "web-17", vocab.Scope(0)},
		{id, vocab.Mint, "edge-eu1", "edge-proxy", "gw-1", vocab.Scope(0)},
		{id, vocab.Mint, "edge-", "review", "web-17", vocab.Scope(0)}, // values are matched as given
		{id, vocab.Deregister, "review", "review", "web-17", vocab.ScopeVerb},
		{id, vocab.Deregister, "billing", "agent", "web-18", vocab.ScopeVerb},
		{id, vocab.Verb(7), "review", "review", "web-17", vocab.ScopeVerb},
		{id, vocab.Mint, "billing", "agent", "web-18", vocab.ScopeService},
		{id, vocab.Mint, "edge", "review", "web-17", vocab.ScopeService},
		{id, vocab.Mint, "edge-eu1", "agent", "web-18", vocab.ScopeComponent},
		{id, vocab.Mint, "edge-eu1", "edge-proxy-2", "web-17", vocab.ScopeComponent},
		{id, vocab.Mint, "edge-eu1", "edge-proxy", "web-18", vocab.ScopeHost},
		{id, vocab.Mint, "edge-eu1", "edge-proxy", "gw-12", vocab.ScopeHost},
		{id, vocab.Mint, "review", "review", "host", vocab.ScopeHost}, // a segment other than the last
		{"registrar-client:dns:web-17.example.org", vocab.Mint, "review", "review", "web-17", vocab.Scope(0)},
		{"unix-peer:uid=1000", vocab.Mint, "review", "review", "web-17", vocab.ScopeHost}, // no host: no {identity}
		{"unix-peer:uid=1000", vocab.Mint, "review", "review", "gw-3", vocab.Scope(0)},
		{"unix-peer:uid=1000", vocab.Mint, "review", "review", "", vocab.ScopeHost},
	} {
		idHost, ok := IdentityHost(tc.identity)
		if got := s.Check(idHost, ok, tc.verb, tc.service, tc.component, tc.host); got != tc.want {
			t.Errorf("Check(%s, %v, %q, %q, %q) = %v, want %v", tc.identity, tc.verb, tc.service, tc.component, tc.host, got, tc.want)
		}
		if got := naiveCheck(scopeForTests, tc.identity, tc.verb, tc.service, tc.component, tc.host); got != tc.want {
			t.Errorf("the model: %v, want %v (the model is wrong)", got, tc.want)
		}
	}
}

// TestAKeyLeftOutPermitsEveryValue: with one key set, the other three
// permit anything, even values that are no DNS label and an invalid verb.
func TestAKeyLeftOutPermitsEveryValue(t *testing.T) {
	for _, tc := range []struct {
		spec ScopeSpec
		in   vocab.Scope // the one dimension checked
	}{
		{ScopeSpec{Services: []string{"review"}}, vocab.ScopeService},
		{ScopeSpec{Components: []string{"review"}}, vocab.ScopeComponent},
		{ScopeSpec{Hosts: []string{"review"}}, vocab.ScopeHost},
	} {
		s, err := CompileScope("edge", tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range [][3]string{{"review", "review", "review"}, {"review", "Any Thing", ""}, {"", "review", "x/y"}, {"-", "", "review"}} {
			want := tc.in
			if call[tc.in-vocab.ScopeService] == "review" {
				want = vocab.Scope(0)
			}
			if got := s.Check("review", true, vocab.Verb(9), call[0], call[1], call[2]); got != want {
				t.Errorf("only %s set: Check(%q) = %v, want %v", scopeKeys[tc.in], call, got, want)
			}
		}
	}
	s, err := CompileScope("edge", ScopeSpec{Verbs: []string{"mint"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Check("", false, vocab.Mint, "Any Thing", "", "x/y"); got != vocab.Scope(0) {
		t.Errorf("only scope_verbs set: Check(mint) = %v, want none", got)
	}
	if got := s.Check("", false, vocab.Deregister, "review", "review", "review"); got != vocab.ScopeVerb {
		t.Errorf("only scope_verbs set: Check(deregister) = %v, want verb", got)
	}
}

func TestANilScopeAndAnEmptySpecPermitEverything(t *testing.T) {
	empty, err := CompileScope("edge", ScopeSpec{})
	if err != nil || empty == nil {
		t.Fatalf("CompileScope(ScopeSpec{}) = %v, %v; want a Scope", empty, err)
	}
	for _, s := range []*Scope{nil, empty} {
		for _, v := range []vocab.Verb{vocab.Mint, vocab.Deregister, vocab.Verb(5)} {
			if d := s.Check("", false, v, "", "Any Thing", "x/y"); d != vocab.Scope(0) {
				t.Errorf("%p: Check(%v) = %v, want none", s, v, d)
			}
		}
		if got, want := s.Effective(), [4]string{"services: any", "components: any", "hosts: any", "verbs: any"}; got != want {
			t.Errorf("%p: Effective = %q, want %q", s, got, want)
		}
		if spec := s.Spec(); spec.Services != nil || spec.Components != nil || spec.Hosts != nil || spec.Verbs != nil {
			t.Errorf("%p: Spec = %+v, want no key set", s, spec)
		}
	}
}

func TestEffectivePrintsEachKeyInTheConfigurationsOrder(t *testing.T) {
	s, err := CompileScope("edge", ScopeSpec{Services: []string{"review", "edge-*"}, Hosts: []string{IdentityPattern}, Verbs: []string{"mint"}})
	if err != nil {
		t.Fatal(err)
	}
	want := [4]string{"services: review, edge-*", "components: any", "hosts: {identity}", "verbs: mint"}
	if got := s.Effective(); got != want {
		t.Errorf("Effective = %q, want %q", got, want)
	}
	for i, d := range keyOrder {
		if !strings.HasPrefix(want[i], d.String()) {
			t.Errorf("line %d %q is not scope %v's", i, want[i], d)
		}
	}
}

// TestCompileScopeKeepsNoReferenceToTheCallersSlices: changing the slices
// given, or those Spec returns, changes nothing of the Scope.
func TestCompileScopeKeepsNoReferenceToTheCallersSlices(t *testing.T) {
	spec := ScopeSpec{Services: []string{"review"}, Components: []string{"a"}, Hosts: []string{"h"}, Verbs: []string{"mint"}}
	s, err := CompileScope("edge", spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Services[0], spec.Components[0], spec.Hosts[0], spec.Verbs[0] = "x", "x", "x", "*"
	got := s.Spec()
	got.Services[0] = "y"
	if d := s.Check("", false, vocab.Mint, "review", "a", "h"); d != vocab.Scope(0) {
		t.Errorf("after the caller's change, Check = %v, want none", d)
	}
	if d := s.Check("", false, vocab.Deregister, "review", "a", "h"); d != vocab.ScopeVerb {
		t.Errorf("after the caller's change, Check(deregister) = %v, want verb", d)
	}
	if e := s.Effective(); e[0] != "services: review" || e[3] != "verbs: mint" {
		t.Errorf("after the caller's change, Effective = %q", e)
	}
}

func TestScopeErrorsAreOnlyInvalid(t *testing.T) {
	for _, e := range []error{&PatternError{}, &ScopeKeyError{}} {
		if errors.Is(e, errors.New("other")) {
			t.Errorf("%T matches an unrelated error", e)
		}
	}
}

// TestEveryAcceptedPatternMatchesADNSLabel: for every short pattern over
// "ab*?-", CompileScope accepts it exactly when some DNS label matches,
// found by brute force; shortestLabel is the length of the shortest one.
// The 63-byte bound is covered by the tables above.
func TestEveryAcceptedPatternMatchesADNSLabel(t *testing.T) {
	labels := map[int][]string{}
	for _, v := range allStrings("ab-", 7) {
		if vocab.IsDNSLabel(v) {
			labels[len(v)] = append(labels[len(v)], v)
		}
	}
	for _, p := range allStrings("ab*?-", 5)[1:] {
		shortest := 0
		for n := 1; n <= 7 && shortest == 0; n++ {
			for _, v := range labels[n] {
				if glob(p, v) {
					shortest = n
					break
				}
			}
		}
		_, err := CompileScope("edge", ScopeSpec{Hosts: []string{p}})
		if (err == nil) != (shortest > 0) {
			t.Fatalf("CompileScope(hosts %q) = %v, but the shortest label it matches is %d bytes (0: none)", p, err, shortest)
		}
		if err == nil && shortestLabel(p) != shortest {
			t.Fatalf("shortestLabel(%q) = %d, brute force says %d", p, shortestLabel(p), shortest)
		}
	}
}

// TestCheckIsSafeForConcurrentUse: run with -race.
func TestCheckIsSafeForConcurrentUse(t *testing.T) {
	s, err := CompileScope("edge", scopeForTests)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if d := s.Check("web-17", true, vocab.Mint, "edge-eu1", "review", "web-17"); d != vocab.Scope(0) {
					t.Errorf("Check = %v, want none", d)
					return
				}
				_ = s.Effective()
			}
		})
	}
	wg.Wait()
}

// naiveCheck is Check as the documentation states it, with path.Match
// for the globs (the same answers for patterns of [a-z0-9-*?] over values
// of ASCII without '/'), for an identity rather than its host.
func naiveCheck(spec ScopeSpec, identity string, verb vocab.Verb, service, component, host string) vocab.Scope {
	idHost, hasHost := IdentityHost(identity)
	in := func(pats []string, v string) bool {
		if pats == nil {
			return true
		}
		for _, p := range pats {
			if p == IdentityPattern {
				if hasHost && v == idHost {
					return true
				}
			} else if ok, _ := path.Match(p, v); ok {
				return true
			}
		}
		return false
	}
	switch {
	case spec.Verbs != nil && (!verb.Valid() || !in(spec.Verbs, verb.String())):
		return vocab.ScopeVerb
	case !in(spec.Services, service):
		return vocab.ScopeService
	case !in(spec.Components, component):
		return vocab.ScopeComponent
	case !in(spec.Hosts, host):
		return vocab.ScopeHost
	}
	return vocab.Scope(0)
}

// A verb outside the two is out of any scope_verbs, whatever its value, and
// never read past the table of verbs.
func TestAVerbOutsideTheTwoIsOutOfScopeVerbs(t *testing.T) {
	s, err := CompileScope("edge", ScopeSpec{Verbs: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []vocab.Verb{vocab.NumVerbs, vocab.NumVerbs + 1, 255} {
		if got := s.Check("", false, v, "a", "b", "c"); got != vocab.ScopeVerb {
			t.Errorf("Check(verb %d) = %v, want verb", v, got)
		}
	}
}
