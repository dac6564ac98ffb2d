package vocab

// Scope is the part of a request a caller policy's scope judges: what an
// out_of_scope refusal names, on the wire (CallerNotPermitted's scope), in
// the refused record's detail and in the logs. The four values follow the
// order the scope is checked in.
type Scope uint8

// The four scopes.
const (
	// ScopeVerb: the policy's scope_verbs.
	ScopeVerb Scope = iota + 1
	// ScopeService: the policy's scope_services (service_name).
	ScopeService
	// ScopeComponent: the policy's scope_components.
	ScopeComponent
	// ScopeHost: the policy's scope_hosts.
	ScopeHost
)

var scopes = NewEnum[Scope]("Scope", "scope", []string{
	ScopeVerb:      "verb",
	ScopeService:   "service",
	ScopeComponent: "component",
	ScopeHost:      "host",
})

// Valid reports whether s is one of the four scopes.
func (s Scope) Valid() bool { return scopes.Valid(s) }

// String returns "verb", "service", "component" or "host" (Scope(N) for an
// invalid value).
func (s Scope) String() string { return scopes.String(s) }

// MarshalText implements encoding.TextMarshaler; an invalid scope is an
// error.
func (s Scope) MarshalText() ([]byte, error) { return scopes.MarshalText(s) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// four spellings.
func (s *Scope) UnmarshalText(text []byte) error { return scopes.UnmarshalText(s, text) }

// ParseScope parses a scope's spelling.
func ParseScope(s string) (Scope, error) { return scopes.Parse(s) }

// Ceiling names an instance ceiling: what an instance_ceiling refusal
// (InstanceCeilingReached on the wire) reached. Its spelling is the
// configuration key that sets it.
type Ceiling uint8

// The two ceilings.
const (
	// CeilingInstancesPerHost: a component's max_instances_per_host, the
	// live registrations of one (component, host).
	CeilingInstancesPerHost Ceiling = iota + 1
	// CeilingRegistrations: a caller policy's max_registrations, the live
	// registrations its identities hold together.
	CeilingRegistrations
)

var ceilings = NewEnum[Ceiling]("Ceiling", "ceiling", []string{
	CeilingInstancesPerHost: "max_instances_per_host",
	CeilingRegistrations:    "max_registrations",
})

// Valid reports whether c is one of the two ceilings.
func (c Ceiling) Valid() bool { return ceilings.Valid(c) }

// String returns "max_instances_per_host" or "max_registrations"
// (Ceiling(N) for an invalid value).
func (c Ceiling) String() string { return ceilings.String(c) }

// MarshalText implements encoding.TextMarshaler; an invalid ceiling is an
// error.
func (c Ceiling) MarshalText() ([]byte, error) { return ceilings.MarshalText(c) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// two spellings.
func (c *Ceiling) UnmarshalText(text []byte) error { return ceilings.UnmarshalText(c, text) }

// ParseCeiling parses a ceiling's spelling.
func ParseCeiling(s string) (Ceiling, error) { return ceilings.Parse(s) }

// Owner is a caller policy's scope_owner: whose registrations its callers
// may remint or deregister. A registration's owner is the identity that
// first minted it.
type Owner uint8

// The three owner scopes.
const (
	// OwnerSelf: only registrations the caller itself first minted (the
	// default).
	OwnerSelf Owner = iota + 1
	// OwnerPolicy: registrations first minted by any identity of the
	// caller's own policy.
	OwnerPolicy
	// OwnerAny: any registration (the operators' scope).
	OwnerAny
)

var owners = NewEnum[Owner]("Owner", "owner scope", []string{
	OwnerSelf:   "self",
	OwnerPolicy: "policy",
	OwnerAny:    "any",
})

// Valid reports whether o is one of the three owner scopes.
func (o Owner) Valid() bool { return owners.Valid(o) }

// String returns "self", "policy" or "any" (Owner(N) for an invalid value).
func (o Owner) String() string { return owners.String(o) }

// MarshalText implements encoding.TextMarshaler; an invalid owner scope is
// an error.
func (o Owner) MarshalText() ([]byte, error) { return owners.MarshalText(o) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// three spellings.
func (o *Owner) UnmarshalText(text []byte) error { return owners.UnmarshalText(o, text) }

// ParseOwner parses "self", "policy" or "any".
func ParseOwner(s string) (Owner, error) { return owners.Parse(s) }
