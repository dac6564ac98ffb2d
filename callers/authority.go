package callers

import (
	"errors"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Rules is what one caller policy's callers may do: the scope of the calls
// they may make, whose registrations they may remint or deregister, and
// how many live registrations they may hold together.
type Rules struct {
	// Scope is the policy's scope_* keys; the zero ScopeSpec permits every
	// call.
	Scope ScopeSpec
	// Owner is scope_owner; 0 means vocab.OwnerSelf, the default.
	Owner vocab.Owner
	// MaxRegistrations is max_registrations; 0 means no ceiling.
	MaxRegistrations uint32
}

// Operator is the policy index Authority.Policy gives an operator's
// identity that no policy names exactly: unrestricted.
const Operator = -1

// Authority says what each caller may do: the policy its identity takes
// (or none: no_policy), the scope of that policy, and whose registrations
// it may act on. It is immutable once NewAuthority returns it, and safe for
// concurrent use; its lookups allocate nothing.
//
// The operators (root and the daemon's own uid on the unix socket, as the
// daemon names them) are unrestricted, unless a policy names one of their
// identities exactly (identities = ["unix-peer:uid=0"]): a prefix, even the
// catch-all "", never restricts an operator, so a policy written for the
// socket group (identity_prefixes = ["unix-peer:"]) cannot lock out root.
// The limiter's sizing follows the Matcher's rule alone: a prefix does size
// an operator's buckets.
type Authority struct {
	m      *Matcher
	scopes []*Scope
	rules  []Rules
	// needsHost reports, by policy, that its scope_hosts holds
	// IdentityPattern, so a check derives the caller's host.
	needsHost []bool
	// operators are the operators' identities and the policy each takes:
	// Operator, or the policy that names it exactly.
	operators []operator
}

type operator struct {
	identity string
	policy   int
}

// NewAuthority builds the Authority of ps (who each policy covers) and
// rules (what it may do): rules[i] is ps[i]'s, and len(rules) must equal
// len(ps). operators are the operators' identities. The errors are New's
// and CompileScope's, joined; each matches errors.Is(err, ErrInvalid). On
// error the Authority is nil.
func NewAuthority(ps []Policy, rules []Rules, operators []string) (*Authority, error) {
	if len(rules) != len(ps) {
		return nil, errors.New("callers: NewAuthority: one Rules per policy")
	}
	m, err := New(ps)
	errs := []error{err}
	a := &Authority{m: m, scopes: make([]*Scope, len(ps)), rules: make([]Rules, len(ps)), needsHost: make([]bool, len(ps))}
	for i, r := range rules {
		s, err := CompileScope(ps[i].Name, r.Scope)
		errs = append(errs, err)
		if r.Owner == 0 {
			r.Owner = vocab.OwnerSelf
		} else if !r.Owner.Valid() {
			errs = append(errs, &ScopeKeyError{Policy: ps[i].Name, Key: "scope_owner", Rule: "must be self, policy or any"})
		}
		a.scopes[i], a.rules[i] = s, r
		a.needsHost[i] = s != nil && s.identity
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, id := range operators {
		op := operator{identity: id, policy: Operator}
		for i, p := range ps {
			for _, named := range p.Identities {
				if named == id {
					op.policy = i
				}
			}
		}
		a.operators = append(a.operators, op)
	}
	return a, nil
}

// Policy returns the index of identity's policy and true: Operator for an
// operator no policy names exactly, else the Matcher's policy. It returns
// false when identity is no operator's and matches no policy: the call is
// refused no_policy.
func (a *Authority) Policy(identity string) (int, bool) {
	for _, op := range a.operators {
		if op.identity == identity {
			return op.policy, true
		}
	}
	return a.m.Match(identity)
}

// OutOfScope returns 0 when policy's scope covers the call identity makes,
// else the first scope (vocab.Scope's order) that does not. policy is
// Policy's index; an operator's call is always in scope, and an index
// that is neither Operator nor a policy's is out of every scope.
func (a *Authority) OutOfScope(policy int, identity string, verb vocab.Verb, service, component, host string) vocab.Scope {
	switch {
	case policy == Operator:
		return 0
	case policy < 0 || policy >= len(a.scopes):
		return vocab.ScopeVerb // no policy of this Authority's: nothing is in scope
	}
	var idHost string
	var hasHost bool
	if a.needsHost[policy] {
		idHost, hasHost = IdentityHost(identity)
	}
	return a.scopes[policy].Check(idHost, hasHost, verb, service, component, host)
}

// MayAct reports whether identity, of policy, may remint or deregister a
// registration first minted by owner: its own always; those of its policy
// under scope_owner "policy"; any under "any", and any for an operator. A
// registration with no recorded owner (minted before owners were
// recorded) is the operators' alone.
func (a *Authority) MayAct(policy int, identity, owner string) bool {
	switch {
	case policy == Operator:
		return true
	case policy < 0 || policy >= len(a.rules):
		return false // no policy of this Authority's
	case owner == "":
		return false
	case owner == identity:
		return true
	}
	switch a.rules[policy].Owner {
	case vocab.OwnerAny:
		return true
	case vocab.OwnerPolicy:
		p, ok := a.Policy(owner)
		return ok && p == policy
	}
	return false
}

// MaxRegistrations is policy's max_registrations, 0 for none (and for an
// operator).
func (a *Authority) MaxRegistrations(policy int) uint32 {
	if policy < 0 || policy >= len(a.rules) {
		return 0
	}
	return a.rules[policy].MaxRegistrations
}

// Name is policy's name: DefaultName for Operator, which no policy names.
func (a *Authority) Name(policy int) string { return a.m.Name(policy) }
