package callers

import (
	"errors"
	"strconv"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Policy is one caller policy as the configuration names it: the
// identities it applies to. What it sizes is the caller's business; the
// Matcher only finds it.
type Policy struct {
	// Name names the policy in metrics, logs and records: a DNS label, not
	// DefaultName.
	Name string
	// Identities are the exact identities the policy applies to.
	Identities []string
	// IdentityPrefixes are the identity prefixes it applies to: an identity
	// no policy names exactly takes the policy with the longest prefix it
	// starts with.
	IdentityPrefixes []string
}

// Matcher finds the policy of an identity. It is immutable once New
// returns it, and safe for concurrent use. A nil *Matcher is a Matcher
// with no policy: every identity takes the default.
type Matcher struct {
	names []string
	trie  *radix
}

// New builds the Matcher of ps: policy i of the Matcher is ps[i]. It
// refuses, joined with errors.Join, every invalid name (*NameError),
// identity or prefix (*IdentityError), and every identity or prefix named
// twice (*DuplicateError); each matches errors.Is(err, ErrInvalid). On
// error the Matcher is nil. No policy at all is valid: every identity then
// takes the default. New keeps no reference to ps's slices.
func New(ps []Policy) (*Matcher, error) {
	m := &Matcher{names: make([]string, len(ps)), trie: newRadix()}
	var errs []error
	seen := make(map[string]bool, len(ps))
	for i, p := range ps {
		m.names[i] = p.Name
		if rule := nameRule(p.Name); rule != "" {
			errs = append(errs, &NameError{Name: p.Name, Rule: rule})
		} else if seen[p.Name] {
			errs = append(errs, &NameError{Name: p.Name, Rule: "names two policies"})
		}
		seen[p.Name] = true
		for _, set := range []struct {
			keys   []string
			prefix bool
		}{{p.Identities, false}, {p.IdentityPrefixes, true}} {
			for j, id := range set.keys {
				if rule := identityRule(id, set.prefix); rule != "" {
					errs = append(errs, &IdentityError{Policy: p.Name, Identity: id, Prefix: set.prefix, Index: j, Rule: rule})
					continue
				}
				if other, ok := m.trie.insert(id, set.prefix, int32(i)); !ok {
					errs = append(errs, &DuplicateError{Identity: id, Prefix: set.prefix, First: ps[other].Name, Second: p.Name, Index: j})
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// nameRule is the rule name breaks, or "".
func nameRule(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > MaxNameBytes:
		return "must be at most " + strconv.Itoa(MaxNameBytes) + " bytes, got " + strconv.Itoa(len(name))
	case name == DefaultName:
		return `must not be "` + DefaultName + `": that name is the [registrar] table's sizes`
	case !vocab.IsDNSLabel(name):
		return "must be a DNS label (a-z, 0-9 and '-', not starting or ending with '-'): it labels metrics and records"
	}
	return ""
}

// identityRule is the rule id breaks, or "". The empty prefix is the
// catch-all (identity_prefixes = [""]): every identity starts with it, so
// it matches each identity no other policy names.
func identityRule(id string, prefix bool) string {
	switch {
	case id == "" && !prefix:
		return "must not be empty: an empty prefix (identity_prefixes = [\"\"]) is the way to match every identity"
	case len(id) > MaxIdentityBytes:
		return "must be at most " + strconv.Itoa(MaxIdentityBytes) + " bytes, the longest identity the server gives"
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return "must be printable ASCII (bytes 0x20 to 0x7e) like every identity the server gives, byte " +
				strconv.Itoa(i) + " is 0x" + strconv.FormatUint(uint64(c), 16)
		}
	}
	return ""
}

// Match returns the index of identity's policy and true: the policy that
// names identity exactly, else the one with the longest prefix identity
// starts with. It returns -1 and false when no policy matches: the
// identity takes the default sizes. It allocates nothing.
func (m *Matcher) Match(identity string) (index int, ok bool) {
	if m == nil {
		return -1, false
	}
	i := m.trie.lookup(identity)
	return int(i), i >= 0
}

// Len is the number of policies.
func (m *Matcher) Len() int {
	if m == nil {
		return 0
	}
	return len(m.names)
}

// Name returns the name of policy i for 0 <= i < Len(), and DefaultName
// for any other i: Name(-1), Match's index of no policy, is the default's.
func (m *Matcher) Name(i int) string {
	if i < 0 || i >= m.Len() {
		return DefaultName
	}
	return m.names[i]
}
