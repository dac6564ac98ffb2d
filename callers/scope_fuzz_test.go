package callers

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// FuzzGlob: glob, and a pattern cut by anchor, answer as path.Match does, for the pattern and value as
// fuzzed when path.Match is a reference for them (a pattern of
// [a-z0-9-*?], a value of ASCII without '/'), and always for both mapped
// onto small alphabets, where partial matches and going back are common.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"edge-*", "edge-eu1"}, {"*-canary", "web-canary-2"}, {"*aab", "aaaab"}, {"a*a*a*b", "aaaaaaaaaaaa"},
		{"search-*-api", "search-eu-west-api"}, {"?*?", "x"}, {"**", ""}, {"gw-?", "gw-12"}, {"", "a"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, value string) {
		if validPattern(pattern) && pathMatchValue(value) {
			want, err := path.Match(pattern, value)
			if err != nil {
				t.Fatalf("path.Match(%q, %q): %v", pattern, value, err)
			}
			checkGlob(t, pattern, value, want)
		}
		p, v := mapOnto(pattern, "ab*?-"), mapOnto(value, "ab-")
		want, _ := path.Match(p, v)
		checkGlob(t, p, v, want)
	})
}

// checkGlob checks that glob, and the pattern cut by anchor, answer want.
func checkGlob(t *testing.T, pattern, value string, want bool) {
	t.Helper()
	if got := glob(pattern, value); got != want {
		t.Fatalf("glob(%q, %q) = %v, path.Match says %v", pattern, value, got, want)
	}
	if g := anchor(pattern); g.match(value) != want {
		t.Fatalf("anchor(%q) = %+v matches %q: %v, path.Match says %v", pattern, g, value, !want, want)
	}
}

// validPattern reports whether p is made of [a-z0-9-*?].
func validPattern(p string) bool {
	for i := 0; i < len(p); i++ {
		if c := p[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '*' || c == '?') {
			return false
		}
	}
	return true
}

// pathMatchValue reports whether path.Match reads v byte by byte as a
// single path element: ASCII, no '/'.
func pathMatchValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] >= 0x80 || v[i] == '/' {
			return false
		}
	}
	return true
}

// mapOnto maps each byte of s onto alphabet.
func mapOnto(s, alphabet string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = alphabet[int(c)%len(alphabet)]
	}
	return string(b)
}

// FuzzIdentityHost: IdentityHost answers as a reference written with
// strings.Split does, its host is a DNS label, and for a URI identity
// net/url reads the way the server writes it (no query, fragment, user
// or opaque part, and spelt back the same), the host is url's last
// non-empty path segment.
func FuzzIdentityHost(f *testing.F) {
	for _, id := range []string{
		"registrar-client:dns:web-1.example.org", "registrar-client:dns:web-1", "registrar-client:dns:",
		"registrar-client:uri:spiffe://example.org/host/web-17", "registrar-client:uri:spiffe://example.org/host/web-17//",
		"registrar-client:uri:spiffe://example.org", "registrar-client:uri:spiffe://example.org/",
		"registrar-client:uri:spiffe://[2001:db8::1]/edge-3", "registrar-client:uri:spiffe://example.org/a%20b",
		"registrar-client:uri:spiffe://example.org/a?b", "registrar-client:uri:example.org/web-17",
		"unix-peer:uid=1000", "",
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, identity string) {
		host, ok := IdentityHost(identity)
		wantHost, wantOK := referenceIdentityHost(identity)
		if host != wantHost || ok != wantOK {
			t.Fatalf("IdentityHost(%q) = %q, %v; the reference says %q, %v", identity, host, ok, wantHost, wantOK)
		}
		if ok != vocab.IsDNSLabel(host) || !ok && host != "" {
			t.Fatalf("IdentityHost(%q) = %q, %v; want a DNS label and true, or \"\" and false", identity, host, ok)
		}
		uri, isURI := strings.CutPrefix(identity, "registrar-client:uri:")
		u, err := url.Parse(uri)
		if !isURI || err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
			u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.String() != uri {
			return
		}
		var last string
		for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
			if seg != "" {
				last = seg
			}
		}
		if vocab.IsDNSLabel(last) != ok || ok && last != host {
			t.Fatalf("IdentityHost(%q) = %q, %v; net/url's last path segment is %q", identity, host, ok, last)
		}
	})
}

// referenceIdentityHost is IdentityHost as its documentation states it,
// written with strings.Split where IdentityHost cuts.
func referenceIdentityHost(identity string) (string, bool) {
	parts := strings.SplitN(identity, ":", 3)
	if len(parts) != 3 || parts[0] != "registrar-client" {
		return "", false
	}
	var host string
	switch parts[1] {
	case "dns":
		host = strings.Split(parts[2], ".")[0]
	case "uri":
		i := strings.Index(parts[2], "://")
		if i < 0 {
			return "", false
		}
		segs := strings.Split(parts[2][i+len("://"):], "/") // the authority, then the path's segments
		for j := len(segs) - 1; j > 0 && host == ""; j-- {
			host = segs[j]
		}
	}
	if !vocab.IsDNSLabel(host) {
		return "", false
	}
	return host, true
}

// fuzzScope reads a ScopeSpec from spec: one pattern a line, the first
// byte's low two bits the key (services, components, hosts, verbs); a
// line of that byte alone with its top bit set makes the key an empty
// list when nothing was given for it yet.
func fuzzScope(spec string) ScopeSpec {
	var s ScopeSpec
	for line := range strings.SplitSeq(spec, "\n") {
		if line == "" {
			continue
		}
		key := s.key(vocab.Scope(line[0]&3) + 1)
		switch {
		case line[0]&0x80 != 0 && len(line) == 1:
			if *key == nil {
				*key = []string{}
			}
		default:
			*key = append(*key, line[1:])
		}
	}
	return s
}

// FuzzCompileScope: CompileScope never panics; it refuses with only
// *PatternError and *ScopeKeyError, each naming a pattern the spec holds;
// a scope it accepts checks as the naive model does, each of its label
// patterns matching the shortest label shortestLabel promises; and a
// label pattern it refuses for that rule matches no DNS label fuzzed.
func FuzzCompileScope(f *testing.F) {
	f.Add("edge", "\x00review\n\x00edge-*\n\x01review\n\x01edge-proxy\n\x02{identity}\n\x02gw-?\n\x03mint", "edge-eu1", "web-17")
	f.Add("edge", "\x00\n\x01{identity}\n\x02x{identity}\n\x03mnt\n\x03*", "mint", "x")
	f.Add("edge", "\x80\n\x81\n\x02-a\n\x02a-\n\x02*-", "a", "a")
	f.Add("edge", "\x00"+strings.Repeat("a", 64)+"\n\x02*-"+strings.Repeat("a", 62), strings.Repeat("a", 63), "b")
	f.Add("edge", "\x00a\n\x00a\n\x02{identity}\n\x02{identity}", "a", "")
	f.Add("edge", "\x00Edge\n\x01a.b\n\x02[ab]\n\x03M*", "edge", "a")
	f.Add("edge", "\x02*-*\n\x02?\n\x00**", "a-a", "a")
	f.Add("edge", "\x03deregister\n\x03m*\n\x00*-canary\n\x00search-*-api", "search-eu-api", "web-17")
	f.Fuzz(func(t *testing.T, policy, text, value, identityHost string) {
		spec := fuzzScope(text)
		s, err := CompileScope(policy, spec)
		if err != nil {
			if s != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("CompileScope = %v, %v; want nil and ErrInvalid", s, err)
			}
			for _, e := range unjoin(err) {
				_ = e.Error()
				var pe *PatternError
				var ke *ScopeKeyError
				switch {
				case errors.As(e, &pe):
					checkRefusedPattern(t, spec, pe, value)
				case errors.As(e, &ke):
				default:
					t.Fatalf("CompileScope returned %T %v", e, e)
				}
			}
			return
		}
		identity := "registrar-client:dns:" + identityHost
		values := []string{value, identityHost}
		for d := vocab.ScopeService; d <= vocab.ScopeHost; d++ {
			for _, p := range *spec.key(d) {
				if p == IdentityPattern {
					continue
				}
				w := witness(p)
				if len(w) != shortestLabel(p) || !vocab.IsDNSLabel(w) || !glob(p, w) {
					t.Fatalf("pattern %q: its shortest label %q (%d bytes, shortestLabel %d) does not match", p, w, len(w), shortestLabel(p))
				}
				values = append(values, w)
			}
		}
		for _, v := range values {
			if !pathMatchValue(v) {
				continue
			}
			idHost, hasHost := IdentityHost(identity)
			for _, verb := range []vocab.Verb{vocab.Mint, vocab.Deregister} {
				for _, call := range [][3]string{{v, v, v}, {v, "x", "y"}, {"x", v, "y"}, {"x", "y", v}} {
					got := s.Check(idHost, hasHost, verb, call[0], call[1], call[2])
					if want := naiveCheck(spec, identity, verb, call[0], call[1], call[2]); got != want {
						t.Fatalf("Check(%q, %v, %q) = %v, the model says %v\nspec %+v", idHost, verb, call, got, want, spec)
					}
				}
			}
		}
	})
}

// checkRefusedPattern checks what a refusal of a pattern says of it: it is
// the pattern the spec holds at that index, and one refused as matching no
// DNS label (or no verb) does not match value.
func checkRefusedPattern(t *testing.T, spec ScopeSpec, e *PatternError, value string) {
	t.Helper()
	var pats []string
	for _, d := range keyOrder {
		if scopeKeys[d] == e.Key {
			pats = *spec.key(d)
		}
	}
	if e.Index < 0 || e.Index >= len(pats) || pats[e.Index] != e.Pattern {
		t.Fatalf("%v: no such pattern in %+v", e, spec)
	}
	matchesNothing := strings.HasPrefix(e.Rule, "starts with '-'") || strings.HasPrefix(e.Rule, "ends with '-'") ||
		strings.HasPrefix(e.Rule, "matches no DNS label")
	if matchesNothing && vocab.IsDNSLabel(value) && glob(e.Pattern, value) {
		t.Fatalf("%v; but it matches the DNS label %q", e, value)
	}
	if strings.HasPrefix(e.Rule, "matches neither") && (glob(e.Pattern, "mint") || glob(e.Pattern, "deregister")) {
		t.Fatalf("%v; but it matches a verb", e)
	}
}

// witness is the shortest DNS label a pattern CompileScope accepts
// matches: 'a' for each '?' and for a '*' that must keep a '-' from being
// first or last, nothing for any other '*'.
func witness(p string) string {
	w := strings.ReplaceAll(strings.ReplaceAll(p, "*", ""), "?", "a")
	if w == "" || w[0] == '-' {
		w = "a" + w
	}
	if w[len(w)-1] == '-' {
		w += "a"
	}
	return w
}
