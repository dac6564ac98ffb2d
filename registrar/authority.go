package registrar

import (
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Authority says what each caller may do with the verbs, behind the
// transport that says who the caller is. The daemon's is built from the
// caller policies of the configuration (callers.Authority); Verbs without
// one lets every caller do anything, as before authorization existed.
//
// Its methods are pure (no I/O), cheap and safe for concurrent use: they
// run on every invocation, before the limiter is charged.
type Authority interface {
	// Grant returns what identity may do, or false when identity matches
	// no caller policy and is not an operator's: the call is refused
	// no_policy before any other check, so a caller without a policy
	// learns nothing of the configuration from its refusals.
	Grant(identity string) (Grant, bool)
}

// Grant is what one caller may do.
type Grant interface {
	// OutOfScope returns 0 when the call is within the caller's scope,
	// else the first scope, in vocab.Scope's order, that does not cover
	// it. It runs after the request checks passed: service, component and
	// host are DNS labels and component is configured.
	OutOfScope(verb vocab.Verb, service, component, host string) vocab.Scope
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

// grant is identity's Grant under a; ok false: no_policy. Without an
// authority every caller has the grant that permits all (nil).
func grant(a *Authority, identity string) (Grant, bool) {
	if a == nil {
		return nil, true
	}
	return (*a).Grant(identity)
}
