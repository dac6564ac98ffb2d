package callers

import "strings"

// naiveMatch is the rule as the documentation states it, by linear scan:
// the policy naming id exactly, else the one whose prefix is the longest
// id starts with, else -1. It holds only for a policy set New accepts (no
// identity or prefix named twice).
func naiveMatch(ps []Policy, id string) int {
	for i, p := range ps {
		for _, x := range p.Identities {
			if x == id {
				return i
			}
		}
	}
	best, bestLen := -1, -1
	for i, p := range ps {
		for _, x := range p.IdentityPrefixes {
			if strings.HasPrefix(id, x) && len(x) > bestLen {
				best, bestLen = i, len(x)
			}
		}
	}
	return best
}

// naiveErrors is New's refusals by the plain rules, with a map where New
// has its trie: the errors New must return, in its order.
func naiveErrors(ps []Policy) []error {
	var errs []error
	names := map[string]bool{}
	owner := map[string]int{} // "e"+identity or "p"+prefix -> policy
	for i, p := range ps {
		if r := nameRule(p.Name); r != "" {
			errs = append(errs, &NameError{Name: p.Name, Rule: r})
		} else if names[p.Name] {
			errs = append(errs, &NameError{Name: p.Name, Rule: "names two policies"})
		}
		names[p.Name] = true
		for _, set := range []struct {
			keys   []string
			prefix bool
			tag    string
		}{{p.Identities, false, "e"}, {p.IdentityPrefixes, true, "p"}} {
			for j, id := range set.keys {
				if r := identityRule(id, set.prefix); r != "" {
					errs = append(errs, &IdentityError{Policy: p.Name, Identity: id, Prefix: set.prefix, Index: j, Rule: r})
					continue
				}
				if o, dup := owner[set.tag+id]; dup {
					errs = append(errs, &DuplicateError{Identity: id, Prefix: set.prefix, First: ps[o].Name, Second: p.Name, Index: j})
					continue
				}
				owner[set.tag+id] = i
			}
		}
	}
	return errs
}
