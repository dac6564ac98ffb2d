package registrar

import (
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Authority says what each caller may do with the verbs, behind the
// transport that says who the caller is. The daemon's is
// *callers.Authority, built from the caller policies of the configuration;
// Verbs without one lets every caller do anything, as before authorization
// existed.
//
// Its methods are pure (no I/O), cheap and safe for concurrent use: Policy
// and OutOfScope run on every invocation, before the limiter is charged;
// MayAct runs inside the backend's work.
type Authority interface {
	// Policy returns the index of identity's caller policy (negative for
	// an operator's identity, unrestricted), or false when identity
	// matches no policy: the call is refused no_policy before any other
	// check, so a caller without a policy learns nothing of the
	// configuration from its refusals.
	Policy(identity string) (int, bool)
	// OutOfScope returns 0 when policy's scope covers the call identity
	// makes, else the first scope, in vocab.Scope's order, that does not.
	// It runs after the request checks passed: service, component and
	// host are DNS labels and component is configured.
	OutOfScope(policy int, identity string, verb vocab.Verb, service, component, host string) vocab.Scope
	// MayAct reports whether identity, of policy, may remint or
	// deregister a registration whose recorded owner is owner ("" for
	// one minted before owners were recorded). The verbs hand it to the
	// backend (MintOp.MayAct, DeregisterOp.MayAct), which asks it inside
	// the registration's atomicity whenever the registration exists; a
	// refusal is not_owner.
	MayAct(policy int, identity, owner string) bool
}

// SetAuthority puts a in force from the next invocation on (a reload of
// the caller policies); nil permits every caller everything. An invocation
// that has arrived keeps the authority it started with.
func (v *Verbs) SetAuthority(a Authority) {
	if a == nil {
		v.authority.Store(nil)
		return
	}
	v.authority.Store(&a)
}
