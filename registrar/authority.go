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
	// MaxRegistrations is policy's max_registrations: how many live
	// registrations the identities of policy may own together (each
	// counted by its recorded owner's policy under this authority); 0
	// means no ceiling, and so does a negative policy (an operator).
	MaxRegistrations(policy int) uint32
}

// SetAuthority puts a in force from the next invocation on (a reload of
// the caller policies); nil permits every caller everything. An invocation
// that has arrived keeps the authority it started with. The counts of the
// policies' registrations follow: every registration's owner is counted
// again under a, in memory, here (and by a mint of an invocation that
// arrived under another authority, under that one), so a reload needs no
// Rebuild for the ceilings.
func (v *Verbs) SetAuthority(a Authority) {
	var p *Authority
	if a != nil {
		p = &a
	}
	v.authority.Store(p)
	v.tally.under(p)
}
