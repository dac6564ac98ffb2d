// Package callers maps a caller identity to the caller policy that sizes
// its limiter buckets: the configuration's [registrar.callers.<name>]
// tables, each naming exact identities and identity prefixes.
//
// # The matching rule
//
// An identity takes the policy that names it exactly; else the policy whose
// identity prefix is the longest one the identity starts with; else no
// policy, which means the default sizes of the [registrar] table (policy
// name [DefaultName]). Exact wins over any prefix, even one as long as the
// identity itself. There is nothing else to the rule: no wildcard, no
// case folding, no normalisation. The identity is compared byte for byte,
// as the server spells it (the audit records show that spelling).
//
// A policy sizes buckets; it never merges identities. Two identities of
// one policy still have buckets of their own.
//
// # Refused policies
//
// [New] refuses, all at once (errors.Join), every policy set it cannot
// match unambiguously: one identity or one prefix named twice
// ([*DuplicateError]), a name that cannot label a metric ([*NameError]),
// and an identity or prefix that no server identity could be
// ([*IdentityError]). Each matches errors.Is(err, [ErrInvalid]). Nothing
// the package is given makes it panic.
//
// # Scopes
//
// A policy may also restrict what its callers ask for: its scope_services,
// scope_components, scope_hosts and scope_verbs keys ([ScopeSpec]), each a
// list of glob patterns ('*' any run of bytes, '?' one byte) of which the
// value must match one; a key left out permits any value. scope_hosts also
// takes [IdentityPattern], "{identity}": the host the caller's identity
// names ([IdentityHost]). [CompileScope] refuses, all at once, every
// pattern that could match no value ([*PatternError]) and every empty or
// oversized list ([*ScopeKeyError]); [Scope.Check] names the first
// dimension out of scope, verb, service, component then host, without
// allocating.
//
// # Cost
//
// A lookup walks one compressed trie holding the exact identities and the
// prefixes together, so its cost grows with the identity's length and the
// trie's branching, not with the number of policies: BenchmarkMatch
// measures it with 1,024 policies. It allocates nothing.
package callers
