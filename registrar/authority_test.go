package registrar_test

import (
	"context"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// fakeAuthority grants the identities it holds, each its own policy;
// every other identity has no policy.
type fakeAuthority []fakeGrant

// fakeGrant allows one identity one service and one host, or anything
// when empty, and its own registrations, or any under anyOwner; it may
// own at most maxRegistrations live registrations (0: any number).
type fakeGrant struct {
	identity, service, host string
	anyOwner                bool
	maxRegistrations        uint32
}

func (a fakeAuthority) Policy(identity string) (int, bool) {
	for i, g := range a {
		if g.identity == identity {
			return i, true
		}
	}
	return 0, false
}

func (a fakeAuthority) OutOfScope(policy int, _ string, _ vocab.Verb, service, _, host string) vocab.Scope {
	switch g := a[policy]; {
	case g.service != "" && service != g.service:
		return vocab.ScopeService
	case g.host != "" && host != g.host:
		return vocab.ScopeHost
	}
	return 0
}

func (a fakeAuthority) MayAct(policy int, identity, owner string) bool {
	return a[policy].anyOwner || owner != "" && owner == identity
}

func (a fakeAuthority) MaxRegistrations(policy int) uint32 { return a[policy].maxRegistrations }

func TestAuthorizationRefusesBeforeTheBackendAndRecordsWhy(t *testing.T) {
	const agent, stranger = "registrar-client:dns:h1.example.org", "unix-peer:uid=1000"
	for _, tc := range []struct {
		name     string
		identity string
		mut      func(*registrar.MintRequest)
		reason   vocab.Reason
		scope    vocab.Scope
	}{
		// no_policy comes first: a caller without a policy learns nothing
		// of the configuration, not even that its request is malformed.
		{"no policy", stranger, func(*registrar.MintRequest) {}, vocab.ReasonNoPolicy, 0},
		{"no policy and a bad host", stranger, func(r *registrar.MintRequest) { r.Host = "H1!" }, vocab.ReasonNoPolicy, 0},
		{"no policy and an unconfigured component", stranger, func(r *registrar.MintRequest) { r.Component = "nope" }, vocab.ReasonNoPolicy, 0},
		// The scope is judged after the request checks.
		{"a bad host in a policy", agent, func(r *registrar.MintRequest) { r.Host = "H1!" }, vocab.ReasonInvalidHost, 0},
		{"another service", agent, func(r *registrar.MintRequest) { r.ServiceName, r.Spec.ServiceName = "payments", "payments" }, vocab.ReasonOutOfScope, vocab.ScopeService},
		{"another host", agent, func(r *registrar.MintRequest) { r.Host = "h2" }, vocab.ReasonOutOfScope, vocab.ScopeHost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := registrartest.NewBackend(t)
			h := newHarness(t, 32, 512, b)
			h.v.SetAuthority(fakeAuthority{{identity: agent, service: "review", host: "h1"}})
			req := goodMint()
			req.CallerIdentity = tc.identity
			tc.mut(&req)
			_, err := h.v.Mint(context.Background(), req)
			r := asRefused(t, err)
			if r.Reason != tc.reason || r.Scope != tc.scope || r.Limited || r.RegistrationID != "" {
				t.Fatalf("got %+v, want %v (%v), not limited, no registration id", r, tc.reason, tc.scope)
			}
			if b.Calls() != 0 {
				t.Fatalf("%d backend calls for a refused caller", b.Calls())
			}
			recs := h.log.Records()
			if len(recs) != 2 || recs[0].Phase != audit.PhaseIntent || recs[1].Phase != audit.PhaseOutcome {
				t.Fatalf("records %+v, want intent then outcome", recs)
			}
			wantDetail := ""
			if tc.scope != 0 {
				wantDetail = tc.scope.String()
			}
			if o := recs[1].Outcome; o.Class != vocab.ClassRefused || o.Reason != tc.reason || o.Detail != wantDetail {
				t.Fatalf("outcome %+v, want refused %v with detail %q", o, tc.reason, wantDetail)
			}
			if err := recs[1].Validate(); err != nil {
				t.Fatalf("the refused record does not validate: %v", err)
			}
		})
	}
}

// A refused caller is charged to predecision_refusal, like every
// pre-derivation refusal: past its burst it is limited (no records) and
// keeps its real answer, and its admission bucket is never touched.
func TestAuthorizationRefusalsAreChargedToPredecisionRefusal(t *testing.T) {
	const burst, flood = 3, 20
	b := registrartest.NewBackend(t)
	h := newHarness(t, burst, 1, b)
	h.v.SetAuthority(fakeAuthority{{identity: "registrar-client:dns:h1.example.org", host: "h1"}})
	out := goodMint()
	out.CallerIdentity, out.Host = "registrar-client:dns:h1.example.org", "h2"
	for i := range flood {
		for _, req := range []registrar.MintRequest{goodMint(), out} {
			_, err := h.v.Mint(context.Background(), req)
			r := asRefused(t, err)
			if r.Limited != (i >= burst) || (r.Reason != vocab.ReasonNoPolicy && r.Reason != vocab.ReasonOutOfScope) {
				t.Fatalf("call %d of %s: %+v, want a refusal limited=%v", i, req.CallerIdentity, r, i >= burst)
			}
		}
	}
	if got := len(h.log.Records()); got != 2*2*burst {
		t.Fatalf("%d records, want intent and outcome of each caller's first %d calls", got, burst)
	}
	// Both callers' admission buckets are untouched: the in-scope mint
	// of the agent is admitted.
	in := goodMint()
	in.CallerIdentity, in.Host = "registrar-client:dns:h1.example.org", "h1"
	if _, err := h.v.Mint(context.Background(), in); err != nil {
		t.Fatalf("in-scope mint after the refusals: %v", err)
	}
}

// Without an authority every caller may do everything (the verbs'
// behaviour before authorization, and the daemon's for the operators);
// SetAuthority(nil) restores it.
func TestNoAuthorityPermitsEveryCaller(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetAuthority(fakeAuthority{})
	if _, err := h.v.Mint(context.Background(), goodMint()); asRefused(t, err).Reason != vocab.ReasonNoPolicy {
		t.Fatalf("empty authority: %v, want no_policy", err)
	}
	h.v.SetAuthority(nil)
	if _, err := h.v.Mint(context.Background(), goodMint()); err != nil {
		t.Fatalf("no authority: %v, want the mint", err)
	}
	if _, err := h.v.Deregister(context.Background(), goodDeregister()); err != nil {
		t.Fatalf("no authority: deregister %v", err)
	}
}
