package config

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// What a caller policy's callers may do and hold: the rows of its
// authorization keys (authorizationKeys, part of policyKeys) and the rules
// that relate them to the rest of the configuration. A scope's patterns
// are the callers package's (callers.CompileScope refuses those that can
// match nothing); here a pattern is also held to what the file configures
// (a component scope must name a configured component) and "{identity}" to
// the identities the policy applies to (they must be able to name a host).
// None of these keys can be set from the environment: what a caller may do
// is stated in the file, beside the identities it applies to.

// The spellings of the identities the server gives (server/identity.go,
// server/certidentity.go), which the rules below reason about.
const (
	unixIdentityPrefix = "unix-peer:uid="
	certIdentityPrefix = "registrar-client:"
	dnsIdentityPrefix  = certIdentityPrefix + "dns:"
	uriIdentityPrefix  = certIdentityPrefix + "uri:"
)

// scopeKey is one of the four pattern keys of a policy's scope.
type scopeKey struct {
	name  string
	field func(*callers.ScopeSpec) *[]string
	doc   string
}

// scopeKeys are the pattern keys in documentation order (callers'
// Dimension order).
var scopeKeys = [...]scopeKey{
	{keyScopeServices, func(s *callers.ScopeSpec) *[]string { return &s.Services },
		"the service_name patterns its callers may mint and deregister"},
	{keyScopeComponents, func(s *callers.ScopeSpec) *[]string { return &s.Components },
		"the component patterns its callers may mint and deregister, each matching a configured component"},
	{keyScopeHosts, func(s *callers.ScopeSpec) *[]string { return &s.Hosts },
		`the host patterns its callers may mint and deregister for; "{identity}" is the host the caller's identity names`},
	{keyScopeVerbs, func(s *callers.ScopeSpec) *[]string { return &s.Verbs },
		"the verbs its callers may call: patterns over mint and deregister"},
}

// The documentation's default columns of the authorization keys: what
// config check shows for a key left out.
const (
	showAny  = "any"
	showNone = "none"
)

// Rules of the authorization keys.
const (
	ruleFileOnly = "cannot be set from the environment: what a policy's callers may do is set in the configuration file, beside the identities it applies to"
	ruleOwner    = `must be "self" (the registrations the caller itself first minted), "policy" (those of any identity of the policy) or "any"`

	ruleZeroMaxRegistrations = "must be greater than 0; leave it out for no ceiling (a zero ceiling would refuse every first mint of the policy's callers)"
)

// authorizationKeys are the keys of a policy table that say what its
// callers may do and hold.
var authorizationKeys = append(scopePolicyKeys(),
	policyKey{name: keyScopeOwner, typ: "string", def: vocab.OwnerSelf.String(),
		doc: "whose registrations its callers may remint or deregister: self, policy or any",
		decode: func(d *decoder, key string, v any, p *CallerPolicy) bool {
			o, ok := d.owner(key, v)
			if ok {
				p.Owner = o
			}
			return ok
		}},
	policyKey{name: keyMaxRegistrations, typ: "u32", def: showNone,
		doc: "how many live registrations its identities may hold together",
		decode: func(d *decoder, key string, v any, p *CallerPolicy) bool {
			if !d.fileOnly(key, v) {
				return false
			}
			n, ok := d.u32(key, v)
			switch {
			case !ok:
				return false
			case n == 0:
				d.failHidden(key, v, ruleZeroMaxRegistrations)
				return false
			}
			p.MaxRegistrations = n
			return true
		}},
)

// scopePolicyKeys are the rows of the four pattern keys.
func scopePolicyKeys() []policyKey {
	out := make([]policyKey, len(scopeKeys))
	for i, k := range scopeKeys {
		out[i] = policyKey{name: k.name, typ: "array of strings", def: showAny, doc: k.doc,
			decode: func(d *decoder, key string, v any, p *CallerPolicy) bool {
				l, ok := d.strings(key, v)
				if ok {
					*k.field(&p.Scope) = l
				}
				return ok
			}}
	}
	return out
}

// fileOnly refuses a value that came from the environment, for a key
// whose value only the file may state; it reports whether v may be
// decoded.
func (d *decoder) fileOnly(key string, v any) bool {
	if _, ok := v.(envValue); ok {
		d.fail(key, v, ruleFileOnly)
		return false
	}
	return true
}

// owner decodes scope_owner: one of the three spellings vocab.ParseOwner
// takes, from the file.
func (d *decoder) owner(key string, v any) (vocab.Owner, bool) {
	if !d.fileOnly(key, v) {
		return 0, false
	}
	s, ok := v.(string)
	if !ok {
		d.fail(key, v, ruleOwner)
		return 0, false
	}
	o, err := vocab.ParseOwner(s)
	if err != nil {
		d.fail(key, v, ruleOwner)
		return 0, false
	}
	return o, true
}

// checkScope is Validate's rule of a policy's authorization keys: a scope
// callers.CompileScope accepts, "{identity}" only in a policy whose
// identities can name a host, every component pattern matching a
// configured component, and a valid owner (or the zero value, which reads
// as self). A pattern CompileScope refuses is not judged again.
func checkScope(p CallerPolicy, components map[string]vocab.Multiplicity, add func(*KeyError)) {
	_, err := callers.CompileScope(p.Name, p.Scope)
	refused := map[string]bool{}
	for _, e := range Errors(err) {
		ke := scopeError(p.Name, e)
		refused[ke.Key] = true
		add(ke)
	}
	judged := func(k string, i int) (string, bool) {
		list := policyKeyPath(p.Name, k)
		elem := list + "[" + strconv.Itoa(i) + "]"
		return elem, !refused[list] && !refused[elem]
	}

	for i, h := range p.Scope.Hosts {
		if key, ok := judged(keyScopeHosts, i); ok && h == callers.IdentityPattern && !canNameHost(p) {
			add(&KeyError{Key: key, Value: h, hideValue: true,
				Rule: "must not be " + callers.IdentityPattern + " in a policy none of whose identities and prefixes can name a host: only a " +
					dnsIdentityPrefix + " or " + uriIdentityPrefix + " identity names one (a " + unixIdentityPrefix +
					" identity names none), so every call of the policy would be out of scope on host"})
		}
	}

	names := slices.Sorted(maps.Keys(components))
	for i, pat := range p.Scope.Components {
		key, ok := judged(keyScopeComponents, i)
		if !ok || matchesComponent(p.Name, pat, names) {
			continue
		}
		rule := "matches no configured component"
		if !strings.ContainsAny(pat, "*?") {
			rule = "names no configured component"
		}
		if len(names) == 0 {
			rule += ": the configuration has none"
		} else {
			rule += ": the components are " + strings.Join(names, ", ")
		}
		add(&KeyError{Key: key, Value: pat, Rule: rule})
	}

	if o := p.Owner; o != 0 && !o.Valid() {
		add(&KeyError{Key: policyKeyPath(p.Name, keyScopeOwner), Value: o.String(), Rule: ruleOwner})
	}
}

// matchesComponent reports whether scope_components pattern pat (one
// CompileScope accepts) matches one of the component names, by the
// callers package's own matching.
func matchesComponent(policy, pat string, names []string) bool {
	s, err := callers.CompileScope(policy, callers.ScopeSpec{Components: []string{pat}})
	if err != nil {
		return true // refused on its own, and reported so
	}
	for _, name := range names {
		if s.Check("", false, vocab.Mint, "", name, "") == 0 {
			return true
		}
	}
	return false
}

// canNameHost reports whether some identity p applies to can name a host
// (callers.IdentityHost): one of its exact identities does, or one of its
// prefixes can start a dns or uri certificate identity.
func canNameHost(p CallerPolicy) bool {
	for _, id := range p.Identities {
		if _, ok := callers.IdentityHost(id); ok {
			return true
		}
	}
	for _, pre := range p.IdentityPrefixes {
		for _, kind := range []string{dnsIdentityPrefix, uriIdentityPrefix} {
			if strings.HasPrefix(kind, pre) || strings.HasPrefix(pre, kind) {
				return true
			}
		}
	}
	return false
}

// scopeError is the KeyError of an error of callers.CompileScope: the key
// of the list, with the pattern's index for a pattern.
func scopeError(policy string, err error) *KeyError {
	var (
		pe *callers.PatternError
		se *callers.ScopeKeyError
	)
	switch {
	case errors.As(err, &pe):
		// A rule that states the value already ("must be at most 127
		// bytes, got 130") is not followed by it again.
		return &KeyError{Key: policyKeyPath(pe.Policy, pe.Key) + "[" + strconv.Itoa(pe.Index) + "]", Value: pe.Pattern, Rule: pe.Rule,
			hideValue: strings.Contains(pe.Rule, "got ")}
	case errors.As(err, &se):
		return &KeyError{Key: policyKeyPath(se.Policy, se.Key), Rule: se.Rule}
	}
	return &KeyError{Key: policyKeyPath(policy), Rule: err.Error()} // not reached: CompileScope returns only the two
}
