package callers

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
)

// keyShape is how random identities and prefixes look: over a small
// alphabet they overlap, split and nest often; over two letters and long,
// they share long edges (the trie's long-label compare); over thirty
// letters, a node has many children (its wide-node search).
type keyShape struct {
	alphabet string
	maxLen   int
}

var keyShapes = []keyShape{{"abc", 7}, {"ab", 24}, {"abcdefghijklmnopqrstuvwxyz0123", 3}}

// randomKey is a random string of the shape, at least minLen long.
func (k keyShape) randomKey(r *rand.Rand, minLen int) string {
	b := make([]byte, minLen+r.IntN(k.maxLen))
	for i := range b {
		b[i] = k.alphabet[r.IntN(len(k.alphabet))]
	}
	return string(b)
}

// randomPolicies is up to 24 policies of up to 5 identities and 5
// prefixes each, no identity or prefix named twice.
func randomPolicies(r *rand.Rand, k keyShape) []Policy {
	ps := make([]Policy, r.IntN(25))
	used := map[string]bool{}
	for i := range ps {
		ps[i].Name = "p" + strconv.Itoa(i)
		for range r.IntN(6) {
			if id := k.randomKey(r, 1); !used["e"+id] {
				used["e"+id] = true
				ps[i].Identities = append(ps[i].Identities, id)
			}
		}
		for range r.IntN(6) {
			if id := k.randomKey(r, 1); !used["p"+id] {
				used["p"+id] = true
				ps[i].IdentityPrefixes = append(ps[i].IdentityPrefixes, id)
			}
		}
	}
	return ps
}

// TestMatchAgreesWithTheNaiveModel: on 1,000 random policy sets of each
// key shape, every random identity, every named identity and prefix, each
// of those with a random suffix and each one byte short, takes the policy
// the linear scan gives.
func TestMatchAgreesWithTheNaiveModel(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 1))
	for round := range 1000 * len(keyShapes) {
		shape := keyShapes[round%len(keyShapes)]
		ps := randomPolicies(r, shape)
		m, err := New(ps)
		if err != nil {
			t.Fatalf("round %d: New refused policies with no duplicate: %v", round, err)
		}
		var ids []string
		for range 40 {
			ids = append(ids, shape.randomKey(r, 0))
		}
		for _, p := range ps {
			for _, k := range append(append([]string(nil), p.Identities...), p.IdentityPrefixes...) {
				ids = append(ids, k, k+shape.randomKey(r, 1), k[:len(k)-1])
			}
		}
		for _, id := range ids {
			got, ok := m.Match(id)
			want := naiveMatch(ps, id)
			if got != want || ok != (want >= 0) {
				t.Fatalf("round %d: Match(%q) = %d, %v; the model says %d\npolicies: %+v", round, id, got, ok, want, ps)
			}
		}
	}
}

// TestNewRefusesWhatTheModelRefuses: random policy sets with duplicates
// and bad entries mixed in are refused with exactly the model's errors.
func TestNewRefusesWhatTheModelRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 2))
	refused := 0
	for round := range 2000 {
		shape := keyShapes[round%len(keyShapes)]
		ps := randomPolicies(r, shape)
		if len(ps) == 0 {
			continue
		}
		// Name something again, or break something.
		for range 1 + r.IntN(3) {
			p := &ps[r.IntN(len(ps))]
			switch r.IntN(5) {
			case 0:
				p.Identities = append(p.Identities, shape.randomKey(r, 1))
			case 1:
				p.IdentityPrefixes = append(p.IdentityPrefixes, shape.randomKey(r, 1))
			case 2:
				p.Identities = append(p.Identities, "")
			case 3:
				p.Name = ps[r.IntN(len(ps))].Name
			case 4:
				p.IdentityPrefixes = append(p.IdentityPrefixes, "a\x00")
			}
		}
		want := naiveErrors(ps)
		m, err := New(ps)
		if len(want) == 0 {
			if err != nil {
				t.Fatalf("round %d: New = %v, the model refuses nothing", round, err)
			}
			continue
		}
		refused++
		if m != nil || !errors.Is(err, ErrInvalid) {
			t.Fatalf("round %d: New = %v, %v; want nil and ErrInvalid", round, m, err)
		}
		got := unjoin(err)
		if len(got) != len(want) {
			t.Fatalf("round %d: New returned %v, the model %v", round, got, want)
		}
		for i := range got {
			if !sameError(got[i], want[i]) {
				t.Fatalf("round %d: error %d = %#v, the model's %#v", round, i, got[i], want[i])
			}
		}
	}
	if refused < 1000 {
		t.Errorf("only %d of 2000 rounds were refused; the generator breaks too little", refused)
	}
}
