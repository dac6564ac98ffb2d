package callers

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// fuzzPolicies reads a policy set from spec: one entry a line, the first
// byte's low three bits the policy (0 to 7; policy 0 is named name), its
// top bit whether the rest of the line is a prefix or an identity.
func fuzzPolicies(name, spec string) []Policy {
	ps := make([]Policy, 8)
	for i := range ps {
		ps[i].Name = "p" + strconv.Itoa(i)
	}
	ps[0].Name = name
	for _, line := range strings.Split(spec, "\n") {
		if line == "" {
			continue
		}
		p := &ps[line[0]&7]
		if line[0]&0x80 != 0 {
			p.IdentityPrefixes = append(p.IdentityPrefixes, line[1:])
		} else {
			p.Identities = append(p.Identities, line[1:])
		}
	}
	return ps
}

// FuzzMatch: New never panics; it refuses exactly what the plain rules
// refuse, and what it accepts matches as the linear scan does, for the
// fuzzed identity and for every named key, with and without it appended.
func FuzzMatch(f *testing.F) {
	f.Add("control-plane", "\x00unix-peer:uid=0\n\x80registrar-client:uri:spiffe://example.org/control-plane/\n\x81registrar-client:uri:spiffe://example.org/", "registrar-client:uri:spiffe://example.org/control-plane/h1")
	f.Add("a", "\x00abc\n\x81ab\n\x82abd\n\x83a\n\x01ab", "abc")
	f.Add("a", "\x00x\n\x01x", "x")          // a duplicate identity
	f.Add("a", "\x80x\n\x81x", "xy")         // a duplicate prefix
	f.Add("default", "\x00x", "x")           // the reserved name
	f.Add("Agents", "\x00x", "x")            // not a DNS label
	f.Add("", "\x00", "")                    // empty name, empty identity
	f.Add("a", "\x00a\tb\n\x80\xff", "a\tb") // bytes outside printable ASCII
	f.Add("a", "\x80"+strings.Repeat("z", MaxIdentityBytes+1), "z")
	f.Add("a", "\x00aa\n\x80a\n\x81aa\n\x82aaa", "aa")
	f.Fuzz(func(t *testing.T, name, spec, id string) {
		ps := fuzzPolicies(name, spec)
		m, err := New(ps)
		want := naiveErrors(ps)
		if err != nil {
			if m != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("New = %v, %v; want nil and ErrInvalid", m, err)
			}
			got := unjoin(err)
			if len(got) != len(want) {
				t.Fatalf("New refused %v, the rules %v", got, want)
			}
			for i := range got {
				if !sameError(got[i], want[i]) {
					t.Fatalf("error %d = %#v, the rules' %#v", i, got[i], want[i])
				}
				_ = got[i].Error()
			}
			return
		}
		if len(want) > 0 {
			t.Fatalf("New accepted what the rules refuse: %v", want)
		}
		ids := []string{id}
		for _, p := range ps {
			for _, k := range append(append([]string(nil), p.Identities...), p.IdentityPrefixes...) {
				ids = append(ids, k, k+id, id+k, k[:len(k)-1])
			}
		}
		for _, x := range ids {
			got, ok := m.Match(x)
			if w := naiveMatch(ps, x); got != w || ok != (w >= 0) {
				t.Fatalf("Match(%q) = %d, %v; the linear scan says %d", x, got, ok, w)
			}
		}
	})
}
