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

// Caller policies: [registrar.callers.<name>] tables, each naming the
// identities it applies to, any of the four bucket sizes, what its callers
// may do (the scope_* keys, scope_owner) and how many registrations they
// may hold (max_registrations), with an optional
// [registrar.callers.<name>.shadow] subtable of candidate sizes. The keys
// a policy table and a shadow table take are declared once, in policyKeys
// and shadowKeys below (the four sizes in sizeKeys); decoding, Validate,
// Keys and Table (the documentation's rows), Diff and config check's
// listing derive from them. Which policy an identity takes is the callers
// package's rule, and Validate checks the names, identities and prefixes
// by building its Matcher; a scope's patterns by compiling it with
// callers.CompileScope: one rule, in one place (scope.go holds the
// checks that relate a scope to the rest of the configuration).

// CallerPolicy is one [registrar.callers.<name>] table.
type CallerPolicy struct {
	// Name is the table's name: a DNS label, not "default"
	// (callers.DefaultName, the [registrar] table's sizes).
	Name string
	// Identities are the exact identities the policy applies to, and
	// IdentityPrefixes the identity prefixes: an identity takes the policy
	// naming it exactly, else the one with the longest prefix it starts
	// with, else the default. Neither can be set from the environment.
	Identities, IdentityPrefixes []string
	// Sizes are the policy's enforced sizes: each key the table does not
	// set holds the [registrar] key's value.
	Sizes CallerSizes
	// Shadow, when the table has a shadow subtable, holds the candidate
	// sizes charged beside the enforced ones and never enforced: each key
	// the subtable does not set holds the policy's enforced value. Nil
	// without a shadow.
	Shadow *CallerSizes
	// Scope is what the policy's callers may ask for: the patterns of its
	// scope_services, scope_components, scope_hosts and scope_verbs keys,
	// a nil list (the key left out) meaning any value. Compile it with
	// callers.CompileScope (Validate has). Not settable from the
	// environment.
	Scope callers.ScopeSpec
	// Owner is the policy's scope_owner: whose registrations its callers
	// may remint or deregister. Load always fills it, with vocab.OwnerSelf
	// when the table leaves it out; the zero value of a policy built in
	// code reads as OwnerSelf too (EffectiveOwner). Not settable from the
	// environment.
	Owner vocab.Owner
	// MaxRegistrations is the policy's max_registrations: how many live
	// registrations its identities may hold together. 0 means no ceiling
	// (the key left out; the file cannot set 0). Not settable from the
	// environment.
	MaxRegistrations uint32
}

// EffectiveOwner returns p.Owner, or vocab.OwnerSelf for the zero value
// (a policy built in code that does not set it).
func (p CallerPolicy) EffectiveOwner() vocab.Owner {
	if p.Owner == 0 {
		return vocab.OwnerSelf
	}
	return p.Owner
}

// CallerSizes are the four bucket sizes of a caller policy, the
// [registrar] keys of the same names: capacities in tokens, intervals in
// milliseconds per token. All four are always filled; Set says which the
// table set itself.
type CallerSizes struct {
	AdmissionBurst                     uint32
	AdmissionRefillIntervalMS          uint32
	PredecisionRefusalBurst            uint32
	PredecisionRefusalRefillIntervalMS uint32
	// Set records the keys the table set itself; the others took the
	// [registrar] default's value (for a shadow, the policy's enforced
	// value). For display: the values are what applies either way.
	Set SizeSet
}

// SizeSet is a set of the four size keys, one bit each.
type SizeSet uint8

// The four size keys, as bits of a SizeSet, in documentation order.
const (
	SetAdmissionBurst SizeSet = 1 << iota
	SetAdmissionRefillInterval
	SetPredecisionRefusalBurst
	SetPredecisionRefusalRefillInterval
)

// Has reports whether s holds every key of k.
func (s SizeSet) Has(k SizeSet) bool { return s&k == k }

// SizeValue is one of the four sizes as config check lists it.
type SizeValue struct {
	// Key is the key's name inside a policy or shadow table, e.g.
	// "rate_limit_admission_burst".
	Key   string
	Value uint32
	// Set reports that the table set the key itself.
	Set bool
}

// Values returns the four sizes in documentation order, with their keys.
func (s CallerSizes) Values() []SizeValue {
	out := make([]SizeValue, len(sizeKeys))
	for i, k := range sizeKeys {
		out[i] = SizeValue{Key: k.name, Value: *k.field(&s), Set: s.Set.Has(k.bit)}
	}
	return out
}

// DefaultSizes returns the [registrar] table's four sizes: the sizes of
// the policy named "default", which an identity no policy matches takes.
// Set is empty.
func (r Registrar) DefaultSizes() CallerSizes {
	var s CallerSizes
	for _, k := range sizeKeys {
		*k.field(&s) = k.registrar(&r)
	}
	return s
}

// EnforcedSizes returns the sizes the policy's buckets are charged
// against.
func (p CallerPolicy) EnforcedSizes() CallerSizes { return p.Sizes }

// ShadowSizes returns the policy's shadow sizes, or its enforced sizes
// when it has no shadow (a shadow bucket of the enforced sizes is never
// limited where the enforced one is not).
func (p CallerPolicy) ShadowSizes() CallerSizes {
	if p.Shadow == nil {
		return p.Sizes
	}
	return *p.Shadow
}

// CallerPolicies returns r.Callers as the callers package names them,
// policy i for r.Callers[i].
func (r Registrar) CallerPolicies() []callers.Policy {
	out := make([]callers.Policy, len(r.Callers))
	for i, p := range r.Callers {
		out[i] = callers.Policy{Name: p.Name, Identities: p.Identities, IdentityPrefixes: p.IdentityPrefixes}
	}
	return out
}

// CallerRules returns what each policy of r.Callers may do, as the
// callers package names it: rules[i] is r.Callers[i]'s, beside
// CallerPolicies (callers.NewAuthority takes both).
func (r Registrar) CallerRules() []callers.Rules {
	out := make([]callers.Rules, len(r.Callers))
	for i, p := range r.Callers {
		out[i] = callers.Rules{Scope: p.Scope, Owner: p.EffectiveOwner(), MaxRegistrations: p.MaxRegistrations}
	}
	return out
}

// CallersMatcher returns the Matcher of r.Callers: its policy i is
// r.Callers[i]. The error is callers.New's; a Config that Load returned or
// that Validate accepts never gets one.
func (r Registrar) CallersMatcher() (*callers.Matcher, error) {
	return callers.New(r.CallerPolicies())
}

// Policy returns the policy named name and true, or false. "default" names
// no policy: use DefaultSizes.
func (r Registrar) Policy(name string) (CallerPolicy, bool) {
	for _, p := range r.Callers {
		if p.Name == name {
			return p, true
		}
	}
	return CallerPolicy{}, false
}

// clone is p with slices and shadow of its own.
func (p CallerPolicy) clone() CallerPolicy {
	p.Identities = slices.Clone(p.Identities)
	p.IdentityPrefixes = slices.Clone(p.IdentityPrefixes)
	p.Scope = callers.ScopeSpec{
		Services:   slices.Clone(p.Scope.Services),
		Components: slices.Clone(p.Scope.Components),
		Hosts:      slices.Clone(p.Scope.Hosts),
		Verbs:      slices.Clone(p.Scope.Verbs),
	}
	if p.Shadow != nil {
		s := *p.Shadow
		p.Shadow = &s
	}
	return p
}

func cloneCallers(ps []CallerPolicy) []CallerPolicy {
	if ps == nil {
		return nil
	}
	out := make([]CallerPolicy, len(ps))
	for i, p := range ps {
		out[i] = p.clone()
	}
	return out
}

// sizeKey is one of the four sizes a policy and a shadow take: the
// [registrar] key of the same name, with its rule.
type sizeKey struct {
	name      string
	bit       SizeSet
	field     func(*CallerSizes) *uint32
	registrar func(*Registrar) uint32
	zero      string // the rule a zero breaks
	doc       string
}

var sizeKeys = [...]sizeKey{
	{"rate_limit_admission_burst", SetAdmissionBurst,
		func(s *CallerSizes) *uint32 { return &s.AdmissionBurst },
		func(r *Registrar) uint32 { return r.RateLimitAdmissionBurst }, ruleZeroBurst,
		"admission bucket capacity in tokens"},
	{"rate_limit_admission_refill_interval_ms", SetAdmissionRefillInterval,
		func(s *CallerSizes) *uint32 { return &s.AdmissionRefillIntervalMS },
		func(r *Registrar) uint32 { return r.RateLimitAdmissionRefillIntervalMS }, ruleZeroInterval,
		"milliseconds per admission token"},
	{"rate_limit_predecision_refusal_burst", SetPredecisionRefusalBurst,
		func(s *CallerSizes) *uint32 { return &s.PredecisionRefusalBurst },
		func(r *Registrar) uint32 { return r.RateLimitPredecisionRefusalBurst }, ruleZeroBurst,
		"pre-derivation refusal bucket capacity in tokens"},
	{"rate_limit_predecision_refusal_refill_interval_ms", SetPredecisionRefusalRefillInterval,
		func(s *CallerSizes) *uint32 { return &s.PredecisionRefusalRefillIntervalMS },
		func(r *Registrar) uint32 { return r.RateLimitPredecisionRefusalRefillIntervalMS }, ruleZeroInterval,
		"milliseconds per refusal token"},
}

// policyKey is one key of a policy table or of its shadow subtable.
type policyKey struct {
	name, typ string
	// def is the documentation's default column: for a size, the key
	// whose value an unset one takes.
	def, doc string
	// decode checks v and fills the policy; it returns false after adding
	// the error.
	decode func(d *decoder, key string, v any, p *CallerPolicy) bool
}

const (
	keyIdentities       = "identities"
	keyIdentityPrefixes = "identity_prefixes"
	keyShadow           = "shadow"
	keyScopeServices    = "scope_services"
	keyScopeComponents  = "scope_components"
	keyScopeHosts       = "scope_hosts"
	keyScopeVerbs       = "scope_verbs"
	keyScopeOwner       = "scope_owner"
	keyMaxRegistrations = "max_registrations"
	callersTable        = "registrar.callers"
)

// policyKeys are the keys of a [registrar.callers.<name>] table, besides
// its shadow subtable: who it applies to, its sizes, then what its callers
// may do and hold (authorizationKeys).
var policyKeys = slices.Concat([]policyKey{
	{name: keyIdentities, typ: "array of strings", def: "[]", doc: "the exact identities the policy applies to",
		decode: func(d *decoder, key string, v any, p *CallerPolicy) bool {
			var ok bool
			p.Identities, ok = d.strings(key, v)
			return ok
		}},
	{name: keyIdentityPrefixes, typ: "array of strings", def: "[]", doc: "the identity prefixes it applies to: the longest matching one wins",
		decode: func(d *decoder, key string, v any, p *CallerPolicy) bool {
			var ok bool
			p.IdentityPrefixes, ok = d.strings(key, v)
			return ok
		}},
}, sizePolicyKeys(func(p *CallerPolicy) *CallerSizes { return &p.Sizes }, "registrar.", ""), authorizationKeys)

// shadowKeys are the keys of a [registrar.callers.<name>.shadow] table.
var shadowKeys = sizePolicyKeys(func(p *CallerPolicy) *CallerSizes { return p.Shadow }, callersTable+".<name>.", "shadow ")

// sizePolicyKeys are the rows of the four sizes held in sizes(p); an unset
// one takes the value of the key of the same name under from.
func sizePolicyKeys(sizes func(*CallerPolicy) *CallerSizes, from, what string) []policyKey {
	out := make([]policyKey, len(sizeKeys))
	for i, k := range sizeKeys {
		out[i] = policyKey{name: k.name, typ: "u32", def: from + k.name, doc: what + k.doc,
			decode: func(d *decoder, key string, v any, p *CallerPolicy) bool {
				n, ok := d.u32(key, v)
				if ok {
					s := sizes(p)
					*k.field(s) = n
					s.Set |= k.bit
				}
				return ok
			}}
	}
	return out
}

// callersKey is the key table's row of [registrar.callers.<name>]: Keys
// and Table list the keys of policyKeys and shadowKeys in its place, Diff
// reports one change per policy added, changed or removed.
var callersKey = key{
	table: "registrar", name: "callers", typ: "table", live: live,
	doc:        "named caller policies: the identities each applies to and the bucket sizes they take",
	setDefault: func(c *Config) { c.Registrar.Callers = nil },
	decode:     func(d *decoder, key string, v any, c *Config) { d.callers(key, v, &c.Registrar) },
	show:       func(c *Config) string { return showCallers(c.Registrar.Callers) },
	check:      func(c *Config, _ string, add func(*KeyError)) { checkCallers(&c.Registrar, add) },
	field:      func(c *Config) any { return &c.Registrar.Callers },
	raw:        func(*Config) any { return nil }, // no policy by default
	rows:       callerRows,
	diff:       diffCallers,
}

// callerRows are the rows of a policy table's keys, then of a shadow
// table's.
func callerRows() []Row {
	var out []Row
	for _, set := range []struct {
		prefix string
		keys   []policyKey
	}{{callersTable + ".<name>.", policyKeys}, {callersTable + ".<name>." + keyShadow + ".", shadowKeys}} {
		for _, k := range set.keys {
			out = append(out, Row{Key: set.prefix + k.name, Type: k.typ, Default: k.def, Reload: Live, Doc: k.doc})
		}
	}
	return out
}

// policyKeyPath is the dotted name of a policy's key.
func policyKeyPath(name string, rest ...string) string {
	return keyPath(append([]string{"registrar", "callers", name}, rest...)...)
}

// callers decodes [registrar.callers]: one policy per table, sorted by
// name, with the unset sizes filled by resolveCallers once every key of
// [registrar] is decoded.
func (d *decoder) callers(key string, v any, r *Registrar) {
	m, ok := d.table(key, v, "must be a table of caller policies, one [registrar.callers.<name>] table each")
	if !ok {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		pkey := policyKeyPath(name)
		pt, ok := d.table(pkey, m[name], "must be a table: [registrar.callers."+name+"] with identities, identity_prefixes and the rate_limit_* keys")
		if !ok {
			continue
		}
		p := CallerPolicy{Name: name, Owner: vocab.OwnerSelf}
		listsOK := d.policyTable(pkey, pt, policyKeys, &p, "a caller policy", policyTakes, keyShadow)
		if sv, ok := pt[keyShadow]; ok {
			skey := policyKeyPath(name, keyShadow)
			if st, ok := d.table(skey, sv, "must be a table of the four rate_limit_* keys"); ok {
				p.Shadow = &CallerSizes{}
				d.policyTable(skey, st, shadowKeys, &p, "a shadow table", "only the four rate_limit_* keys (the identities and prefixes are the policy's)")
			}
		}
		ikey := policyKeyPath(name, keyIdentities)
		if !listsOK {
			// Validate's "names no identity" would only repeat the error.
			d.bad[ikey] = true
		}
		if ev, ok := onlyFromEnv(pt); ok {
			// The whole table came from variables: a rule about what it
			// lacks names the variable that made it.
			d.origin[ikey] = ev
		}
		r.Callers = append(r.Callers, p)
	}
}

// policyTakes is what a policy table takes, as the refusal of a key it
// does not know says.
const policyTakes = "identities, identity_prefixes, the four rate_limit_* keys, the four scope_* keys, scope_owner, max_registrations and a shadow table"

// policyTable decodes the keys of a policy or shadow table t (named key)
// and refuses the others but those of also; it reports whether the
// identities and prefixes decoded.
func (d *decoder) policyTable(key string, t map[string]any, keys []policyKey, p *CallerPolicy, what, takes string, also ...string) bool {
	ok := true
	known := map[string]bool{}
	for _, k := range also {
		known[k] = true
	}
	for _, k := range keys {
		known[k.name] = true
		if v, set := t[k.name]; set && !k.decode(d, key+"."+k.name, v, p) && (k.name == keyIdentities || k.name == keyIdentityPrefixes) {
			ok = false
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if known[k] {
			continue
		}
		kk := key + "." + keyPath(k)
		rule := "is not a key of " + what + ": it takes " + takes
		if s := d.suggest(kk); s != "" {
			rule += "; did you mean " + s + "?"
		}
		d.failHidden(kk, t[k], rule)
	}
	return ok
}

// onlyFromEnv returns a variable of t when every value of t (a policy
// table) came from the environment.
func onlyFromEnv(t map[string]any) (envValue, bool) {
	var first envValue
	for _, k := range slices.Sorted(maps.Keys(t)) {
		switch v := t[k].(type) {
		case envValue:
			if first.Var == "" {
				first = v
			}
		case map[string]any:
			ev, ok := onlyFromEnv(v)
			if !ok {
				return envValue{}, false
			}
			if first.Var == "" {
				first = ev
			}
		default:
			return envValue{}, false
		}
	}
	return first, first.Var != ""
}

// strings decodes an array of strings. An environment variable cannot
// spell one.
func (d *decoder) strings(key string, v any) ([]string, bool) {
	switch x := v.(type) {
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				d.failHidden(key, v, "must be an array of strings; element "+strconv.Itoa(i)+" is "+formatValue(e))
				return nil, false
			}
			out[i] = s
		}
		return out, true
	case envValue:
		d.fail(key, v, "cannot be set from the environment: it is an array of strings, set it in the configuration file")
		return nil, false
	}
	d.fail(key, v, "must be an array of strings")
	return nil, false
}

// resolveCallers fills the sizes each policy leaves unset: the [registrar]
// key's value, and in a shadow the policy's enforced value.
func resolveCallers(r *Registrar) {
	def := r.DefaultSizes()
	for i := range r.Callers {
		p := &r.Callers[i]
		for _, k := range sizeKeys {
			if !p.Sizes.Set.Has(k.bit) {
				*k.field(&p.Sizes) = *k.field(&def)
			}
		}
		if p.Shadow == nil {
			continue
		}
		for _, k := range sizeKeys {
			if !p.Shadow.Set.Has(k.bit) {
				*k.field(p.Shadow) = *k.field(&p.Sizes)
			}
		}
	}
}

// checkCallers is Validate's rule of the policies: the names, identities
// and prefixes callers.New accepts, at least one identity or prefix each,
// no zero size, and a scope and owner checkScope accepts. A size the table
// does not set and that is zero only because the key it takes its value
// from is zero is left to that key's own error.
func checkCallers(r *Registrar, add func(*KeyError)) {
	def := r.DefaultSizes()
	for _, p := range r.Callers {
		if len(p.Identities) == 0 && len(p.IdentityPrefixes) == 0 {
			add(&KeyError{Key: policyKeyPath(p.Name, keyIdentities),
				Rule: "must name at least one identity unless identity_prefixes names a prefix: a policy that names neither applies to no caller"})
		}
		checkSizes(p.Sizes, def, func(k string) string { return policyKeyPath(p.Name, k) }, add)
		if p.Shadow != nil {
			checkSizes(*p.Shadow, p.Sizes, func(k string) string { return policyKeyPath(p.Name, keyShadow, k) }, add)
		}
		checkScope(p, r.Components, add)
	}
	_, err := r.CallersMatcher()
	for _, e := range Errors(err) {
		add(callersError(e))
	}
}

func checkSizes(s, from CallerSizes, keyOf func(string) string, add func(*KeyError)) {
	for _, k := range sizeKeys {
		if *k.field(&s) == 0 && (s.Set.Has(k.bit) || *k.field(&from) != 0) {
			add(&KeyError{Key: keyOf(k.name), Value: uint32(0), Rule: k.zero, hideValue: true})
		}
	}
}

// callersError is the KeyError of an error of callers.New: the key of the
// name, or of the identity or prefix, with the element's index.
func callersError(err error) *KeyError {
	list := func(prefix bool) string {
		if prefix {
			return keyIdentityPrefixes
		}
		return keyIdentities
	}
	var (
		ne *callers.NameError
		ie *callers.IdentityError
		de *callers.DuplicateError
	)
	switch {
	case errors.As(err, &ne):
		return &KeyError{Key: policyKeyPath(ne.Name), Value: ne.Name, Rule: ne.Rule, hideValue: true}
	case errors.As(err, &ie):
		return &KeyError{Key: policyKeyPath(ie.Policy, list(ie.Prefix)) + "[" + strconv.Itoa(ie.Index) + "]", Value: ie.Identity, Rule: ie.Rule}
	case errors.As(err, &de):
		what, why := "an identity", "an identity takes one policy"
		if de.Prefix {
			what, why = "a prefix", "the longest matching prefix must be one policy's"
		}
		rule := "must not name " + what + " " + policyKeyPath(de.First, list(de.Prefix)) + " names too: " + why
		if de.First == de.Second {
			rule = "must not name " + what + " the list names already"
		}
		return &KeyError{Key: policyKeyPath(de.Second, list(de.Prefix)) + "[" + strconv.Itoa(de.Index) + "]", Value: de.Identity, Rule: rule}
	}
	return &KeyError{Key: callersTable, Rule: err.Error()} // not reached: New returns only the three
}

// showPolicy is one policy on one line, as the file sets it: its lists,
// the sizes it sets itself (an unset size follows the key it takes its
// value from, which Diff reports on its own), and the authorization keys
// it sets (an unset scope key is any value, an unset owner self, an unset
// ceiling none: what they say does not change while they stay unset).
func showPolicy(p CallerPolicy) string {
	var b strings.Builder
	list := func(k string, v []string) {
		b.WriteString(k)
		b.WriteString("=[")
		for i, s := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quote(s))
		}
		b.WriteByte(']')
	}
	list(keyIdentities, p.Identities)
	b.WriteByte(' ')
	list(keyIdentityPrefixes, p.IdentityPrefixes)
	sizes := func(prefix string, s CallerSizes) {
		for _, v := range s.Values() {
			if v.Set {
				b.WriteString(" " + prefix + v.Key + "=" + strconv.FormatUint(uint64(v.Value), 10))
			}
		}
	}
	sizes("", p.Sizes)
	if p.Shadow != nil {
		b.WriteString(" shadow")
		sizes("shadow.", *p.Shadow)
	}
	for _, k := range scopeKeys {
		if v := *k.field(&p.Scope); v != nil {
			b.WriteByte(' ')
			list(k.name, v)
		}
	}
	if o := p.EffectiveOwner(); o != vocab.OwnerSelf {
		b.WriteString(" " + keyScopeOwner + "=" + quote(o.String()))
	}
	if p.MaxRegistrations != 0 {
		b.WriteString(" " + keyMaxRegistrations + "=" + showU32(p.MaxRegistrations))
	}
	return b.String()
}

// showCallers is every policy on one line, sorted by name.
func showCallers(ps []CallerPolicy) string {
	parts := make([]string, len(ps))
	for i, p := range sortedCallers(ps) {
		parts[i] = p.Name + ": " + showPolicy(p)
	}
	return "{" + strings.Join(parts, "; ") + "}"
}

func sortedCallers(ps []CallerPolicy) []CallerPolicy {
	return slices.SortedStableFunc(slices.Values(ps), func(a, b CallerPolicy) int { return strings.Compare(a.Name, b.Name) })
}

// diffCallers is one Change per policy added, changed or removed, named
// registrar.callers.<name>, in name order; all live.
func diffCallers(old, new *Config) []Change {
	shown := func(ps []CallerPolicy) map[string]string {
		m := make(map[string]string, len(ps))
		for _, p := range ps {
			m[p.Name] = showPolicy(p)
		}
		return m
	}
	o, n := shown(old.Registrar.Callers), shown(new.Registrar.Callers)
	names := slices.Sorted(maps.Keys(o))
	for name := range n {
		if _, ok := o[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []Change
	for _, name := range names {
		if o[name] != n[name] {
			out = append(out, Change{Key: policyKeyPath(name), Old: o[name], New: n[name], Live: true})
		}
	}
	return out
}
