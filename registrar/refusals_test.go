package registrar_test

import (
	"context"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// AuthorizationRefusals counts every refusal of the caller policies by verb
// and reason, the limited ones (no record written) included, and nothing
// else.
func TestAuthorizationRefusalsAreCountedByVerbAndReason(t *testing.T) {
	const burst, calls = 2, 5
	b := registrartest.NewBackend(t)
	h := newHarness(t, burst, 512, b)
	const agent = "registrar-client:dns:h1.example.org"
	h.v.SetAuthority(fakeAuthority{{identity: agent, host: "h1"}})
	out := goodMint()
	out.CallerIdentity, out.Host = agent, "h2"
	for range calls {
		h.v.Mint(context.Background(), goodMint()) // no policy
		h.v.Mint(context.Background(), out)        // out of scope
	}
	dereg := goodDeregister() // no policy
	h.v.Deregister(context.Background(), dereg)
	bad := goodMint()
	bad.CallerIdentity, bad.Host = agent, "H1!" // a request check, not authorization
	h.v.Mint(context.Background(), bad)

	got := h.v.AuthorizationRefusals()
	var want [vocab.NumVerbs][len(registrar.AuthorizationReasons)]uint64
	want[vocab.Mint][0] = calls // no_policy, limited past the burst included
	want[vocab.Mint][1] = calls // out_of_scope
	want[vocab.Deregister][0] = 1
	if got != want {
		t.Fatalf("AuthorizationRefusals = %v, want %v", got, want)
	}
	if registrar.AuthorizationReasons != [...]vocab.Reason{vocab.ReasonNoPolicy, vocab.ReasonOutOfScope, vocab.ReasonNotOwner, vocab.ReasonInstanceCeiling} {
		t.Fatalf("AuthorizationReasons = %v", registrar.AuthorizationReasons)
	}
}

// A refusal's message names what the caller needs to act: the scope an
// out_of_scope call left, the ceiling and its value, the registration.
func TestARefusalsMessageNamesItsScopeOrCeiling(t *testing.T) {
	for _, c := range []struct {
		err  registrar.RefusedError
		want string
	}{
		{registrar.RefusedError{Reason: vocab.ReasonOutOfScope, Scope: vocab.ScopeHost}, "registrar: refused out_of_scope (host)"},
		{registrar.RefusedError{Reason: vocab.ReasonInstanceCeiling, Ceiling: vocab.CeilingRegistrations, Limit: 3, RegistrationID: "h1-review-001"},
			"registrar: refused instance_ceiling (max_registrations 3) (registration h1-review-001)"},
		{registrar.RefusedError{Reason: vocab.ReasonNoPolicy}, "registrar: refused no_policy"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
