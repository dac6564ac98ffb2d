package registrar_test

import (
	"context"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

const (
	alice = "registrar-client:dns:alice.example.org"
	bob   = "registrar-client:dns:bob.example.org"
)

// mintBy and deregisterBy are the good requests made by identity.
func mintBy(identity string) registrar.MintRequest {
	r := goodMint()
	r.CallerIdentity = identity
	return r
}

func deregisterBy(identity string) registrar.DeregisterRequest {
	r := goodDeregister()
	r.CallerIdentity = identity
	return r
}

// checkNotOwner holds a not_owner refusal to its shape: post-derivation,
// so the answer and the refused record carry the registration id.
func checkNotOwner(t *testing.T, h *harness, err error) {
	t.Helper()
	checkNotOwnerOf(t, h, err, "h1-review-007")
}

func checkNotOwnerOf(t *testing.T, h *harness, err error, id string) {
	t.Helper()
	r := asRefused(t, err)
	if r.Reason != vocab.ReasonNotOwner || r.RegistrationID != id || r.Limited {
		t.Fatalf("got %+v, want not_owner of %s, not limited", r, id)
	}
	recs := h.log.Records()
	in, out := recs[len(recs)-2], recs[len(recs)-1]
	if in.Phase != audit.PhaseIntent || out.Phase != audit.PhaseOutcome || in.RequestID != r.RequestID || out.RequestID != r.RequestID {
		t.Fatalf("last records %+v, %+v: want the refusal's intent and outcome", in, out)
	}
	if o := out.Outcome; o.Class != vocab.ClassRefused || o.Reason != vocab.ReasonNotOwner || out.RegistrationID != id {
		t.Fatalf("outcome %+v of %q, want refused not_owner of %s", o, out.RegistrationID, id)
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("the refused record does not validate: %v", err)
	}
}

func TestTheFirstMintRecordsItsCallerAsTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth registrar.Authority
	}{
		{"with an authority", fakeAuthority{{identity: alice}, {identity: bob}}},
		{"without one", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := registrartest.NewBackend(t)
			h := newHarness(t, 32, 512, b)
			h.v.SetAuthority(tc.auth)
			if _, err := h.v.Mint(context.Background(), mintBy(alice)); err != nil {
				t.Fatal(err)
			}
			if owner, _ := b.Owner("h1-review-007"); owner != alice {
				t.Errorf("owner recorded: got %q, want the caller %q", owner, alice)
			}
		})
	}
}

func TestAnotherIdentitysRemintAndDeregisterAreRefusedNotOwner(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetAuthority(fakeAuthority{{identity: alice}, {identity: bob}})
	ctx := context.Background()
	first, err := h.v.Mint(ctx, mintBy(alice))
	if err != nil {
		t.Fatal(err)
	}

	res, err := h.v.Mint(ctx, mintBy(bob))
	checkNotOwner(t, h, err)
	if res.Material != (registrar.Material{}) {
		t.Errorf("a not_owner remint handed out material %+v", res.Material)
	}
	_, err = h.v.Deregister(ctx, deregisterBy(bob))
	checkNotOwner(t, h, err)
	// Ownership comes first: bob with another spec, or from another host
	// (a one-per-deployment id is one registration for every host),
	// still learns only that it is not the owner.
	other := mintBy(bob)
	other.Spec.Reload = "kill -HUP 1"
	_, err = h.v.Mint(ctx, other)
	checkNotOwner(t, h, err)
	cp := mintBy(alice)
	cp.Component, cp.Spec.Component, cp.Instance = "control-plane", "control-plane", 0
	if _, err := h.v.Mint(ctx, cp); err != nil {
		t.Fatal(err)
	}
	cp.CallerIdentity, cp.Host = bob, "h2"
	_, err = h.v.Mint(ctx, cp)
	checkNotOwnerOf(t, h, err, "control-plane")
	cpd := deregisterBy(bob)
	cpd.Component, cpd.Instance, cpd.Host = "control-plane", 0, "h2"
	_, err = h.v.Deregister(ctx, cpd)
	checkNotOwnerOf(t, h, err, "control-plane")

	if owner, ok := b.Owner("h1-review-007"); !ok || owner != alice {
		t.Fatalf("after bob's refused calls: bound=%t, owner %q; want alice's binding untouched", ok, owner)
	}
	res, err = h.v.Mint(ctx, mintBy(alice))
	if err != nil || res.Outcome != registrar.IdempotentRemint || res.Material.RoleID != first.Material.RoleID {
		t.Fatalf("alice's remint: %+v, %v; want idempotent_remint of the same role", res, err)
	}
	removes(t, h, alice)
}

func TestAPolicyThatMayActForAnyOwnerRemintsAndDeregisters(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetAuthority(fakeAuthority{{identity: alice}, {identity: bob, anyOwner: true}})
	ctx := context.Background()
	if _, err := h.v.Mint(ctx, mintBy(alice)); err != nil {
		t.Fatal(err)
	}
	remints(t, h, bob)
	if owner, _ := b.Owner("h1-review-007"); owner != alice {
		t.Errorf("owner after bob's remint: got %q, want still %q", owner, alice)
	}
	removes(t, h, bob)
}

// askLog is an Authority that lets every call through and keeps what
// MayAct was asked.
type askLog struct {
	fakeAuthority
	mu    sync.Mutex
	asked [][3]any
}

func (a *askLog) MayAct(policy int, identity, owner string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, [3]any{policy, identity, owner})
	return true
}

func TestMayActIsAskedWithTheCallersPolicyAndTheRecordedOwner(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	auth := &askLog{fakeAuthority: fakeAuthority{{identity: alice}, {identity: bob}}}
	h.v.SetAuthority(auth)
	ctx := context.Background()
	if _, err := h.v.Mint(ctx, mintBy(alice)); err != nil {
		t.Fatal(err)
	}
	if len(auth.asked) != 0 {
		t.Fatalf("the first mint asked MayAct %v, want no question: there is no owner yet", auth.asked)
	}
	if _, err := h.v.Mint(ctx, mintBy(bob)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.v.Deregister(ctx, deregisterBy(bob)); err != nil {
		t.Fatal(err)
	}
	want := [][3]any{{1, bob, alice}, {1, bob, alice}}
	if len(auth.asked) != len(want) || auth.asked[0] != want[0] || auth.asked[1] != want[1] {
		t.Fatalf("MayAct asked %v, want %v (bob's policy, bob, the owner alice)", auth.asked, want)
	}
}

// An invocation asks the ownership question of the authority it arrived
// with, even when a reload replaces it while the backend works.
func TestAnInvocationJudgesOwnershipWithTheAuthorityItArrivedWith(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	permissive := fakeAuthority{{identity: alice}, {identity: bob, anyOwner: true}}
	strict := fakeAuthority{{identity: alice}, {identity: bob}}
	h.v.SetAuthority(permissive)
	ctx := context.Background()
	if _, err := h.v.Mint(ctx, mintBy(alice)); err != nil {
		t.Fatal(err)
	}
	b.Before = func() { h.v.SetAuthority(strict) } // a reload while the backend works
	if _, err := h.v.Mint(ctx, mintBy(bob)); err != nil {
		t.Fatalf("bob's remint, arrived under the permissive authority: %v", err)
	}
	b.Before = nil
	_, err := h.v.Mint(ctx, mintBy(bob))
	checkNotOwner(t, h, err)
}

func TestWithoutAnAuthorityAnyIdentityMayRemintAndDeregister(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	ctx := context.Background()
	if _, err := h.v.Mint(ctx, mintBy(alice)); err != nil {
		t.Fatal(err)
	}
	remints(t, h, bob)
	b.DropOwner("h1-review-007") // and a registration of an earlier release
	removes(t, h, bob)
}

// A registration of an earlier release has no owner: only a caller whose
// MayAct says so for "" (the operators, with callers.Authority) may act.
func TestARegistrationWithoutAnOwnerIsRefusedToAPolicysCaller(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetAuthority(fakeAuthority{{identity: alice}, {identity: bob, anyOwner: true}})
	ctx := context.Background()
	if _, err := h.v.Mint(ctx, mintBy(alice)); err != nil {
		t.Fatal(err)
	}
	b.DropOwner("h1-review-007")
	_, err := h.v.Mint(ctx, mintBy(alice))
	checkNotOwner(t, h, err)
	_, err = h.v.Deregister(ctx, deregisterBy(alice))
	checkNotOwner(t, h, err)
	removes(t, h, bob) // a caller that may act for any owner
}

// remints fails unless who's mint of the registration answers
// idempotent_remint.
func remints(t *testing.T, h *harness, who string) {
	t.Helper()
	if res, err := h.v.Mint(context.Background(), mintBy(who)); err != nil || res.Outcome != registrar.IdempotentRemint {
		t.Fatalf("%s's remint: %+v, %v; want idempotent_remint", who, res, err)
	}
}

// removes fails unless who's deregister of the registration answers
// removed.
func removes(t *testing.T, h *harness, who string) {
	t.Helper()
	if d, err := h.v.Deregister(context.Background(), deregisterBy(who)); err != nil || d.Outcome != registrar.Removed {
		t.Fatalf("%s's deregister: %+v, %v; want removed", who, d, err)
	}
}
