package callers

import (
	"errors"
	"strings"
	"testing"
)

// TestMatchTakesExactThenLongestPrefixThenDefault walks the rule on one
// policy set, case by case.
func TestMatchTakesExactThenLongestPrefixThenDefault(t *testing.T) {
	m, err := New([]Policy{
		{Name: "control-plane", Identities: []string{"unix-peer:uid=0"}, IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/control-plane/"}},
		{Name: "agents", IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/", "registrar-client:dns:"}},
		{Name: "one-agent", Identities: []string{"registrar-client:uri:spiffe://example.org/control-plane/"}, IdentityPrefixes: []string{"unix-peer:uid=0"}},
		{Name: "short", IdentityPrefixes: []string{"u"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want string
	}{
		{"unix-peer:uid=0", "control-plane"},                                           // exact beats the equal prefix of one-agent
		{"unix-peer:uid=01", "one-agent"},                                              // the longer prefix beats "u"
		{"unix-peer:uid=1000", "short"},                                                // only "u" matches
		{"unix-peer:uid=", "short"},                                                    // shorter than one-agent's prefix
		{"registrar-client:uri:spiffe://example.org/control-plane/", "one-agent"},      // exact beats the equal prefix
		{"registrar-client:uri:spiffe://example.org/control-plane/a", "control-plane"}, // the longest prefix
		{"registrar-client:uri:spiffe://example.org/control-plan", "agents"},           // one byte short of control-plane's
		{"registrar-client:uri:spiffe://example.org/", "agents"},                       // the prefix itself
		{"registrar-client:uri:spiffe://example.org", "default"},                       // one byte short of every prefix
		{"registrar-client:dns:host-1.example.org", "agents"},
		{"registrar-client:DNS:host-1.example.org", "default"}, // byte for byte: no case folding
		{"", "default"},
		{"x", "default"},
	} {
		i, ok := m.Match(tc.id)
		if got := m.Name(i); got != tc.want || ok != (tc.want != DefaultName) {
			t.Errorf("Match(%q) = %d, %v (%s), want %s", tc.id, i, ok, got, tc.want)
		}
		if !ok && i != -1 {
			t.Errorf("Match(%q) = %d, false; want -1 with false", tc.id, i)
		}
	}
}

func TestANilMatcherMatchesNothing(t *testing.T) {
	var m *Matcher
	if i, ok := m.Match("unix-peer:uid=0"); ok || i != -1 {
		t.Errorf("nil Matcher: Match = %d, %v; want -1, false", i, ok)
	}
	if m.Len() != 0 || m.Name(0) != DefaultName || m.Name(-1) != DefaultName {
		t.Errorf("nil Matcher: Len %d, Name(0) %q, Name(-1) %q; want 0, default, default", m.Len(), m.Name(0), m.Name(-1))
	}
}

func TestNoPolicyIsAMatcherWhereEveryIdentityTakesTheDefault(t *testing.T) {
	m, err := New(nil)
	if err != nil || m == nil {
		t.Fatalf("New(nil) = %v, %v; want a Matcher", m, err)
	}
	if i, ok := m.Match("unix-peer:uid=0"); ok || i != -1 || m.Len() != 0 {
		t.Errorf("Match = %d, %v, Len %d; want -1, false, 0", i, ok, m.Len())
	}
}

func TestNameAndLenFollowTheOrderGiven(t *testing.T) {
	m, err := New([]Policy{{Name: "b", Identities: []string{"x"}}, {Name: "a", Identities: []string{"y"}}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 2 || m.Name(0) != "b" || m.Name(1) != "a" || m.Name(2) != DefaultName || m.Name(-1) != DefaultName {
		t.Errorf("Len %d, names %q %q %q %q; want 2, b a default default", m.Len(), m.Name(0), m.Name(1), m.Name(2), m.Name(-1))
	}
	if i, _ := m.Match("y"); i != 1 {
		t.Errorf("Match(y) = %d, want 1", i)
	}
}

// TestNewKeepsNoReferenceToTheCallersSlices: changing the slices given to
// New changes nothing of the Matcher.
func TestNewKeepsNoReferenceToTheCallersSlices(t *testing.T) {
	ps := []Policy{{Name: "a", Identities: []string{"x"}, IdentityPrefixes: []string{"p"}}}
	m, err := New(ps)
	if err != nil {
		t.Fatal(err)
	}
	ps[0].Name, ps[0].Identities[0], ps[0].IdentityPrefixes[0] = "b", "y", "q"
	if i, ok := m.Match("x"); !ok || m.Name(i) != "a" {
		t.Errorf("after the caller's change, Match(x) = %d, %v (%s); want policy a", i, ok, m.Name(i))
	}
	if i, ok := m.Match("pz"); !ok || m.Name(i) != "a" {
		t.Errorf("after the caller's change, Match(pz) = %d, %v; want policy a", i, ok)
	}
}

func TestNewRefusesInvalidPolicies(t *testing.T) {
	long := strings.Repeat("a", MaxIdentityBytes+1)
	for _, tc := range []struct {
		name string
		ps   []Policy
		want []error // each with its fields; compared by errorsEqual
		msgs []string
	}{
		{"the same identity in two policies", []Policy{
			{Name: "a", Identities: []string{"unix-peer:uid=0"}},
			{Name: "b", Identities: []string{"unix-peer:uid=0"}},
		}, []error{&DuplicateError{Identity: "unix-peer:uid=0", First: "a", Second: "b", Index: 0}},
			[]string{`callers: the identity "unix-peer:uid=0" is named by policy "a" and by policy "b"; an identity takes one policy`}},
		{"the same prefix in two policies", []Policy{
			{Name: "a", IdentityPrefixes: []string{"registrar-client:dns:"}},
			{Name: "b", IdentityPrefixes: []string{"registrar-client:dns:"}},
		}, []error{&DuplicateError{Identity: "registrar-client:dns:", Prefix: true, First: "a", Second: "b"}},
			[]string{`callers: the identity prefix "registrar-client:dns:" is named by policy "a" and by policy "b"; an identity takes one policy`}},
		{"one identity twice in one policy", []Policy{
			{Name: "a", Identities: []string{"x", "y", "x"}},
		}, []error{&DuplicateError{Identity: "x", First: "a", Second: "a", Index: 2}},
			[]string{`callers: policy "a" names the identity "x" twice`}},
		{"a duplicate within a prefix already split", []Policy{
			{Name: "a", IdentityPrefixes: []string{"abc", "abd", "ab"}},
			{Name: "b", IdentityPrefixes: []string{"ab"}},
		}, []error{&DuplicateError{Identity: "ab", Prefix: true, First: "a", Second: "b"}}, nil},
		{"an empty name", []Policy{{Name: "", Identities: []string{"x"}}},
			[]error{&NameError{Name: "", Rule: "must not be empty"}},
			[]string{`callers: policy name "" must not be empty`}},
		{"a name with upper case", []Policy{{Name: "Agents", Identities: []string{"x"}}},
			[]error{&NameError{Name: "Agents", Rule: "must be a DNS label (a-z, 0-9 and '-', not starting or ending with '-'): it labels metrics and records"}},
			[]string{`callers: policy name "Agents" must be a DNS label (a-z, 0-9 and '-', not starting or ending with '-'): it labels metrics and records`}},
		{"a name with a dot", []Policy{{Name: "a.b", Identities: []string{"x"}}},
			[]error{&NameError{Name: "a.b", Rule: "must be a DNS label (a-z, 0-9 and '-', not starting or ending with '-'): it labels metrics and records"}}, nil},
		{"a name ending with a hyphen", []Policy{{Name: "a-", Identities: []string{"x"}}},
			[]error{&NameError{Name: "a-", Rule: "must be a DNS label (a-z, 0-9 and '-', not starting or ending with '-'): it labels metrics and records"}}, nil},
		{"a name of 64 bytes", []Policy{{Name: strings.Repeat("a", 64), Identities: []string{"x"}}},
			[]error{&NameError{Name: strings.Repeat("a", 64), Rule: "must be at most 63 bytes, got 64"}}, nil},
		{"the reserved name", []Policy{{Name: "default", Identities: []string{"x"}}},
			[]error{&NameError{Name: "default", Rule: `must not be "default": that name is the [registrar] table's sizes`}},
			[]string{`callers: policy name "default" must not be "default": that name is the [registrar] table's sizes`}},
		{"two policies of one name", []Policy{{Name: "a", Identities: []string{"x"}}, {Name: "a", Identities: []string{"y"}}},
			[]error{&NameError{Name: "a", Rule: "names two policies"}}, nil},
		{"an empty identity", []Policy{{Name: "a", Identities: []string{""}}},
			[]error{&IdentityError{Policy: "a", Identity: "", Rule: `must not be empty: an empty prefix (identity_prefixes = [""]) is the way to match every identity`}},
			[]string{`callers: policy "a": the identity "" must not be empty: an empty prefix (identity_prefixes = [""]) is the way to match every identity`}},
		{"the empty prefix twice", []Policy{{Name: "a", IdentityPrefixes: []string{""}}, {Name: "b", IdentityPrefixes: []string{""}}},
			[]error{&DuplicateError{Identity: "", Prefix: true, First: "a", Second: "b"}},
			nil},
		{"an identity over the bound", []Policy{{Name: "a", Identities: []string{long}}},
			[]error{&IdentityError{Policy: "a", Identity: long, Rule: "must be at most 512 bytes, the longest identity the server gives"}},
			[]string{`callers: policy "a": the identity "` + strings.Repeat("a", 80) + `"… (513 bytes) must be at most 512 bytes, the longest identity the server gives`}},
		{"a prefix over the bound", []Policy{{Name: "a", IdentityPrefixes: []string{long}}},
			[]error{&IdentityError{Policy: "a", Identity: long, Prefix: true, Rule: "must be at most 512 bytes, the longest identity the server gives"}}, nil},
		{"a control byte", []Policy{{Name: "a", Identities: []string{"unix-peer:uid=0\n"}}},
			[]error{&IdentityError{Policy: "a", Identity: "unix-peer:uid=0\n", Rule: "must be printable ASCII (bytes 0x20 to 0x7e) like every identity the server gives, byte 15 is 0xa"}},
			[]string{`callers: policy "a": the identity "unix-peer:uid=0\n" must be printable ASCII (bytes 0x20 to 0x7e) like every identity the server gives, byte 15 is 0xa`}},
		{"DEL", []Policy{{Name: "a", IdentityPrefixes: []string{"x\x7f"}}},
			[]error{&IdentityError{Policy: "a", Identity: "x\x7f", Prefix: true, Rule: "must be printable ASCII (bytes 0x20 to 0x7e) like every identity the server gives, byte 1 is 0x7f"}}, nil},
		{"a byte above ASCII", []Policy{{Name: "a", Identities: []string{"é"}}},
			[]error{&IdentityError{Policy: "a", Identity: "é", Rule: "must be printable ASCII (bytes 0x20 to 0x7e) like every identity the server gives, byte 0 is 0xc3"}}, nil},
		{"every error at once, in order", []Policy{
			{Name: "Bad", Identities: []string{"", "x"}},
			{Name: "b", Identities: []string{"x", ""}, IdentityPrefixes: []string{"\t"}},
		}, []error{
			&NameError{Name: "Bad", Rule: "must be a DNS label (a-z, 0-9 and '-', not starting or ending with '-'): it labels metrics and records"},
			&IdentityError{Policy: "Bad", Identity: "", Rule: emptyRule},
			&DuplicateError{Identity: "x", First: "Bad", Second: "b"},
			&IdentityError{Policy: "b", Identity: "", Index: 1, Rule: emptyRule},
			&IdentityError{Policy: "b", Identity: "\t", Prefix: true, Rule: "must be printable ASCII (bytes 0x20 to 0x7e) like every identity the server gives, byte 0 is 0x9"},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.ps)
			if m != nil {
				t.Errorf("New returned a Matcher with the error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("New = %v, want an error matching ErrInvalid", err)
			}
			got := unjoin(err)
			if len(got) != len(tc.want) {
				t.Fatalf("New returned %d errors %v, want %d: %v", len(got), got, len(tc.want), tc.want)
			}
			for i := range got {
				if !errors.Is(got[i], ErrInvalid) {
					t.Errorf("error %d (%v) does not match ErrInvalid", i, got[i])
				}
				if !sameError(got[i], tc.want[i]) {
					t.Errorf("error %d = %#v, want %#v", i, got[i], tc.want[i])
				}
				if i < len(tc.msgs) && got[i].Error() != tc.msgs[i] {
					t.Errorf("error %d says\n%s\nwant\n%s", i, got[i], tc.msgs[i])
				}
			}
		})
	}
}

// TestAnIdentityAndAnEqualPrefixAreNoDuplicate: an exact identity and a
// prefix with the same text are two rules, and exact wins.
func TestAnIdentityAndAnEqualPrefixAreNoDuplicate(t *testing.T) {
	m, err := New([]Policy{{Name: "a", IdentityPrefixes: []string{"x"}}, {Name: "b", Identities: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if i, _ := m.Match("x"); m.Name(i) != "b" {
		t.Errorf("Match(x) = %s, want b (exact)", m.Name(i))
	}
	if i, _ := m.Match("xy"); m.Name(i) != "a" {
		t.Errorf("Match(xy) = %s, want a (prefix)", m.Name(i))
	}
}

func TestErrorsAreOnlyInvalid(t *testing.T) {
	for _, e := range []error{&DuplicateError{}, &NameError{}, &IdentityError{}} {
		if errors.Is(e, errors.New("other")) {
			t.Errorf("%T matches an unrelated error", e)
		}
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func sameError(got, want error) bool {
	switch w := want.(type) {
	case *DuplicateError:
		g, ok := got.(*DuplicateError)
		return ok && *g == *w
	case *NameError:
		g, ok := got.(*NameError)
		return ok && *g == *w
	case *IdentityError:
		g, ok := got.(*IdentityError)
		return ok && *g == *w
	}
	return false
}

// TestTheBoundsAreInclusive: a name of MaxNameBytes and an identity and a
// prefix of MaxIdentityBytes are accepted; one byte more is refused
// (TestNewRefusesInvalidPolicies).
func TestTheBoundsAreInclusive(t *testing.T) {
	name := strings.Repeat("a", MaxNameBytes)
	id := strings.Repeat("x", MaxIdentityBytes)
	prefix := strings.Repeat("y", MaxIdentityBytes)
	m, err := New([]Policy{{Name: name, Identities: []string{id}, IdentityPrefixes: []string{prefix}}})
	if err != nil {
		t.Fatalf("New at the bounds: %v", err)
	}
	if i, ok := m.Match(id); !ok || m.Name(i) != name {
		t.Errorf("Match(the longest identity) = %d, %v; want policy 0", i, ok)
	}
	if i, ok := m.Match(prefix); !ok || m.Name(i) != name {
		t.Errorf("Match(the longest prefix) = %d, %v; want policy 0", i, ok)
	}
}

// emptyRule is the rule an empty exact identity breaks.
const emptyRule = `must not be empty: an empty prefix (identity_prefixes = [""]) is the way to match every identity`

// The empty prefix is the catch-all: every identity no other policy names
// (exactly, or by a longer prefix) takes it.
func TestTheEmptyPrefixMatchesEveryOtherIdentity(t *testing.T) {
	m, err := New([]Policy{
		{Name: "everyone", IdentityPrefixes: []string{""}},
		{Name: "agents", IdentityPrefixes: []string{"registrar-client:dns:"}},
		{Name: "root", Identities: []string{"unix-peer:uid=0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"":                                    "everyone",
		"unix-peer:uid=1000":                  "everyone",
		"registrar-client:uri:spiffe://x/y":   "everyone",
		"registrar-client:dns:h1.example.org": "agents",
		"unix-peer:uid=0":                     "root",
		"unix-peer:uid=01":                    "everyone",
	} {
		if i, ok := m.Match(id); !ok || m.Name(i) != want {
			t.Errorf("Match(%q) = %s, %v; want %s", id, m.Name(i), ok, want)
		}
	}
}
