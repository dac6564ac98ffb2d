package registrar_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// mintOf is the good mint of review instance n on host by identity.
func mintOf(identity, host string, n uint32) registrar.MintRequest {
	r := mintBy(identity)
	r.Host, r.Instance = host, n
	return r
}

func deregisterOf(identity, host string, n uint32) registrar.DeregisterRequest {
	r := deregisterBy(identity)
	r.Host, r.Instance = host, n
	return r
}

func mustMint(t *testing.T, h *harness, req registrar.MintRequest, want registrar.MintOutcome) {
	t.Helper()
	res, err := h.v.Mint(context.Background(), req)
	if err != nil || res.Outcome != want {
		t.Fatalf("mint of %s instance %d by %s: got %s, %v; want %s", req.Host, req.Instance, req.CallerIdentity, res.Outcome, err, want)
	}
}

func mustDeregister(t *testing.T, h *harness, req registrar.DeregisterRequest, want registrar.DeregisterOutcome) {
	t.Helper()
	res, err := h.v.Deregister(context.Background(), req)
	if err != nil || res.Outcome != want {
		t.Fatalf("deregister of %s instance %d by %s: got %s, %v; want %s", req.Host, req.Instance, req.CallerIdentity, res.Outcome, err, want)
	}
}

// checkCeiling holds err to an instance_ceiling refusal of id naming c
// and limit, recorded as the invocation's intent and refused outcome.
func checkCeiling(t *testing.T, h *harness, err error, id string, c vocab.Ceiling, limit uint32) {
	t.Helper()
	r := asRefused(t, err)
	if r.Reason != vocab.ReasonInstanceCeiling || r.Ceiling != c || r.Limit != limit || r.RegistrationID != id || r.Limited {
		t.Fatalf("got %+v, want instance_ceiling (%s %d) of %s, not limited", r, c, limit, id)
	}
	recs := h.log.Records()
	in, out := recs[len(recs)-2], recs[len(recs)-1]
	if in.Phase != audit.PhaseIntent || out.Phase != audit.PhaseOutcome || in.RequestID != r.RequestID || out.RequestID != r.RequestID {
		t.Fatalf("last records %+v, %+v: want the refusal's intent and outcome", in, out)
	}
	if o := out.Outcome; o.Class != vocab.ClassRefused || o.Reason != vocab.ReasonInstanceCeiling || out.RegistrationID != id || o.Detail != fmt.Sprintf("%s %d", c, limit) {
		t.Fatalf("outcome %+v of %q, want refused instance_ceiling of %s with the detail %q", o, out.RegistrationID, id, fmt.Sprintf("%s %d", c, limit))
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("the refused record does not validate: %v", err)
	}
}

// live is the verbs' count of review's live registrations.
func live(h *harness) uint64 {
	for _, c := range h.v.Stock().Components {
		if c.Component == "review" {
			return c.Live
		}
	}
	return 0
}

func TestAMintBeyondAHostsCeilingIsRefusedAfterItsIntentAndCreatesNothing(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetCeilings(map[string]uint32{"review": 2})
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
	mustMint(t, h, mintOf(bob, "h1", 2), registrar.FirstMint)
	calls := b.Calls()
	_, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 3))
	checkCeiling(t, h, err, "h1-review-003", vocab.CeilingInstancesPerHost, 2)
	if b.Calls() != calls+1 || b.Has("h1-review-003") {
		t.Errorf("the refusal: %d backend calls and bound %t, want the one call that knows the count and nothing bound", b.Calls()-calls, b.Has("h1-review-003"))
	}
	// The ceiling is per host, and per component.
	mustMint(t, h, mintOf(alice, "h2", 3), registrar.FirstMint)
	edge := mintBy(alice)
	edge.Component, edge.Spec.Component, edge.Instance = "edge-proxy", "edge-proxy", 0
	mustMint(t, h, edge, registrar.FirstMint)
	// Without a ceiling, nothing is refused.
	h.v.SetCeilings(nil)
	mustMint(t, h, mintOf(alice, "h1", 3), registrar.FirstMint)
}

func TestAMintBeyondAPolicysCeilingIsRefusedForItsIdentitiesOnly(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetAuthority(fakeAuthority{{identity: alice, maxRegistrations: 2}, {identity: bob}})
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
	mustMint(t, h, mintOf(alice, "h2", 1), registrar.FirstMint)
	_, err := h.v.Mint(context.Background(), mintOf(alice, "h3", 1))
	checkCeiling(t, h, err, "h3-review-001", vocab.CeilingRegistrations, 2)
	for n := range uint32(5) {
		mustMint(t, h, mintOf(bob, "h3", 1+n), registrar.FirstMint)
	}
	// Both ceilings bind: the host's is named first.
	h.v.SetCeilings(map[string]uint32{"review": 5})
	_, err = h.v.Mint(context.Background(), mintOf(alice, "h3", 9))
	checkCeiling(t, h, err, "h3-review-009", vocab.CeilingInstancesPerHost, 5)
}

func TestARemintIsNeverRefusedByACeilingEvenOneLoweredBelowTheCount(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetAuthority(fakeAuthority{{identity: alice, maxRegistrations: 2}, {identity: bob, anyOwner: true}})
	h.v.SetCeilings(map[string]uint32{"review": 2})
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
	mustMint(t, h, mintOf(alice, "h1", 2), registrar.FirstMint)
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.IdempotentRemint)
	mustMint(t, h, mintOf(bob, "h1", 2), registrar.IdempotentRemint)
	h.v.SetCeilings(map[string]uint32{"review": 1})
	h.v.SetAuthority(fakeAuthority{{identity: alice, maxRegistrations: 1}, {identity: bob}})
	mustMint(t, h, mintOf(alice, "h1", 2), registrar.IdempotentRemint)
	if _, err := h.v.Mint(context.Background(), mintOf(bob, "h1", 3)); err == nil {
		t.Fatalf("a new registration on a host over its lowered ceiling: got first_mint, want instance_ceiling")
	}
}

func TestADeregisterFreesItsSlotAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ceiling vocab.Ceiling
	}{{"a host's", vocab.CeilingInstancesPerHost}, {"a policy's", vocab.CeilingRegistrations}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 32, 512, registrartest.NewBackend(t))
			if tc.ceiling == vocab.CeilingInstancesPerHost {
				h.v.SetCeilings(map[string]uint32{"review": 1})
			} else {
				h.v.SetAuthority(fakeAuthority{{identity: alice, maxRegistrations: 1}})
			}
			mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
			_, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 2))
			checkCeiling(t, h, err, "h1-review-002", tc.ceiling, 1)
			mustDeregister(t, h, deregisterOf(alice, "h1", 1), registrar.Removed)
			mustMint(t, h, mintOf(alice, "h1", 2), registrar.FirstMint)
			// A refused deregister frees nothing; an absent one nothing
			// more.
			mustDeregister(t, h, deregisterOf(alice, "h1", 1), registrar.AlreadyAbsent)
			_, err = h.v.Mint(context.Background(), mintOf(alice, "h1", 3))
			checkCeiling(t, h, err, "h1-review-003", tc.ceiling, 1)
		})
	}
}

func TestAReloadOfThePoliciesMovesTheirCountsWithoutARebuild(t *testing.T) {
	h := newHarness(t, 32, 512, registrartest.NewBackend(t))
	h.v.SetAuthority(fakeAuthority{{identity: alice, maxRegistrations: 3}, {identity: bob, maxRegistrations: 1}})
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
	mustMint(t, h, mintOf(alice, "h1", 2), registrar.FirstMint)
	// The policies swap places: alice's registrations now count against
	// policy 1, whose ceiling they already pass.
	h.v.SetAuthority(fakeAuthority{{identity: bob, maxRegistrations: 3}, {identity: alice, maxRegistrations: 2}})
	_, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 3))
	checkCeiling(t, h, err, "h1-review-003", vocab.CeilingRegistrations, 2)
	mustMint(t, h, mintOf(bob, "h1", 3), registrar.FirstMint)
	want := []registrar.PolicyStock{{Policy: 0, Live: 1, Ceiling: 3}, {Policy: 1, Live: 2, Ceiling: 2}}
	if got := h.v.Stock().Policies; !slices.Equal(got, want) {
		t.Errorf("Stock().Policies: got %+v, want %+v", got, want)
	}
}

func TestAPartialMintKeepsItsSlotUntilItsRetrySettlesIt(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetCeilings(map[string]uint32{"review": 2})
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
	b.Partial = errors.New("the answer was lost")
	if _, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 2)); err == nil {
		t.Fatal("a mint the backend failed partially: got no error")
	}
	b.Partial = nil
	// The backend may have created it: the slot stays taken.
	_, err := h.v.Mint(context.Background(), mintOf(bob, "h1", 3))
	checkCeiling(t, h, err, "h1-review-003", vocab.CeilingInstancesPerHost, 2)
	// Its retry completes the claim: counted once.
	mustMint(t, h, mintOf(alice, "h1", 2), registrar.FirstMint)
	if n := live(h); n != 2 {
		t.Errorf("live after the retry: got %d, want 2", n)
	}
	mustDeregister(t, h, deregisterOf(alice, "h1", 2), registrar.Removed)
	mustMint(t, h, mintOf(bob, "h1", 3), registrar.FirstMint)
}

func TestAPartialDeregisterKeepsItsSlotUntilRetriedOrRebuilt(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.v.SetCeilings(map[string]uint32{"review": 1})
	for _, settle := range []string{"retry", "rebuild", "mint of the same id"} {
		mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
		b.Partial = errors.New("the answer was lost")
		if _, err := h.v.Deregister(context.Background(), deregisterOf(alice, "h1", 1)); err == nil {
			t.Fatal("a deregister the backend failed partially: got no error")
		}
		b.Partial = nil
		// The fake removed it, but the verbs cannot know: counted high.
		_, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 2))
		checkCeiling(t, h, err, "h1-review-002", vocab.CeilingInstancesPerHost, 1)
		switch settle {
		case "retry":
			mustDeregister(t, h, deregisterOf(alice, "h1", 1), registrar.AlreadyAbsent)
		case "rebuild":
			if err := h.v.Rebuild(context.Background()); err != nil {
				t.Fatal(err)
			}
		default:
			// The backend finds no binding: the slot counted for it was
			// stale, and is its own again.
			mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
			mustDeregister(t, h, deregisterOf(alice, "h1", 1), registrar.Removed)
		}
		if n := live(h); n != 0 {
			t.Fatalf("live after the %s: got %d, want 0", settle, n)
		}
	}
}

// failingAfterReserve takes the reservation of a mint and then fails
// cleanly, writing nothing (as the embedded backend does when its random
// source fails after the binding was read).
type failingAfterReserve struct {
	*registrartest.Backend
	fail bool
}

func (f *failingAfterReserve) Mint(ctx context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	if f.fail {
		if !op.Reserves() {
			return registrar.MintCeilingReached, registrar.Material{}, nil
		}
		return 0, registrar.Material{}, errors.New("no entropy")
	}
	return f.Backend.Mint(ctx, op)
}

func TestABackendThatFailsCleanlyReleasesTheSlot(t *testing.T) {
	b := &failingAfterReserve{Backend: registrartest.NewBackend(t), fail: true}
	h := newHarness(t, 32, 512, b)
	h.v.SetCeilings(map[string]uint32{"review": 1})
	for range 2 {
		if _, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 1)); err == nil {
			t.Fatal("a mint the backend failed: got no error")
		}
	}
	b.fail = false
	mustMint(t, h, mintOf(alice, "h1", 2), registrar.FirstMint)
	if n := live(h); n != 1 {
		t.Errorf("live: got %d, want 1", n)
	}
}

// lostClaim is a backend that reserves, then finds the registration
// another daemon created meanwhile (OpenBao's compare-and-set claim lost
// to a second registrar) and owned by someone the caller may not act for.
type lostClaim struct {
	*registrartest.Backend
	owner string
}

func (l *lostClaim) Mint(_ context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	if !op.Reserves() {
		return registrar.MintCeilingReached, registrar.Material{}, nil
	}
	if !op.Permits(l.owner) {
		return registrar.MintNotOwner, registrar.Material{}, nil
	}
	return registrar.MintReissued, registrar.Material{RoleID: "r"}, nil
}

// A mint that took a slot and then was refused not_owner (the
// registration turned out to be another's) gives the slot back: the
// caller created nothing, so the ceiling still admits its next mint.
func TestAReservationRefusedNotOwnerGivesItsSlotBack(t *testing.T) {
	b := &lostClaim{Backend: registrartest.NewBackend(t), owner: bob}
	h := newHarness(t, 32, 512, b)
	h.v.SetAuthority(fakeAuthority{{identity: alice}, {identity: bob}})
	h.v.SetCeilings(map[string]uint32{"review": 1})
	_, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 1))
	checkNotOwnerOf(t, h, err, "h1-review-001")
	if n := live(h); n != 0 {
		t.Fatalf("after the refused mint: %d live, want 0 (the slot given back)", n)
	}
	if got := h.v.Stock().Policies; len(got) != 0 {
		t.Fatalf("after the refused mint the policies own %+v, want nothing", got)
	}
}

// ceilingBackend answers MintCeilingReached without asking Reserve: a
// backend's bug, which must not pass for a determined refusal.
type ceilingBackend struct{ *registrartest.Backend }

func (ceilingBackend) Mint(context.Context, registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	return registrar.MintCeilingReached, registrar.Material{}, nil
}

func TestMintCeilingReachedThatNoReservationRefusedIsABackendFailure(t *testing.T) {
	h := newHarness(t, 32, 512, ceilingBackend{registrartest.NewBackend(t)})
	_, err := h.v.Mint(context.Background(), goodMint())
	if u, ok := errors.AsType[*registrar.UnavailableError](err); !ok || u.Reason != registrar.BackendUnavailable {
		t.Errorf("got %v, want BackendUnavailable", err)
	}
}

// pausingLister lists a snapshot of the fake taken when the listing starts,
// and pauses before handing it over until resume is closed: the registry
// changes meanwhile, as it does while a slow listing reads.
type pausingLister struct {
	*registrartest.Backend
	paused, resume chan struct{}
}

func (p *pausingLister) Registrations(ctx context.Context, fn func(registrar.Registration) error) error {
	var regs []registrar.Registration
	if err := p.Backend.Registrations(ctx, func(r registrar.Registration) error { regs = append(regs, r); return nil }); err != nil {
		return err
	}
	close(p.paused)
	<-p.resume
	for _, r := range regs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func TestTheVerbsServedDuringARebuildAreCountedByIt(t *testing.T) {
	b := &pausingLister{Backend: registrartest.NewBackend(t), paused: make(chan struct{}), resume: make(chan struct{})}
	h := newHarness(t, 32, 512, b)
	h.v.SetCeilings(map[string]uint32{"review": 2})
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
	done := make(chan error)
	go func() { done <- h.v.Rebuild(context.Background()) }()
	<-b.paused // the listing holds instance 1 only
	mustMint(t, h, mintOf(alice, "h1", 2), registrar.FirstMint)
	mustDeregister(t, h, deregisterOf(alice, "h1", 1), registrar.Removed)
	mustMint(t, h, mintOf(alice, "h1", 3), registrar.FirstMint)
	close(b.resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := live(h); n != 2 {
		t.Errorf("live after the rebuild: got %d, want the registry's 2", n)
	}
	_, err := h.v.Mint(context.Background(), mintOf(alice, "h1", 4))
	checkCeiling(t, h, err, "h1-review-004", vocab.CeilingInstancesPerHost, 2)
}

// holdingBackend holds the mint of one id between its reservation and its
// creation: a mint in flight across a whole Rebuild.
type holdingBackend struct {
	*registrartest.Backend
	id                string
	reserved, release chan struct{}
}

func (h *holdingBackend) Mint(ctx context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	if op.RegistrationID == h.id {
		ok := op.Reserve()
		close(h.reserved)
		<-h.release
		if !ok {
			return registrar.MintCeilingReached, registrar.Material{}, nil
		}
		op.Reserve = nil
	}
	return h.Backend.Mint(ctx, op)
}

func TestAMintInFlightAcrossARebuildKeepsItsSlot(t *testing.T) {
	b := &holdingBackend{Backend: registrartest.NewBackend(t), id: "h1-review-001", reserved: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, 32, 512, b)
	h.v.SetCeilings(map[string]uint32{"review": 1})
	var wg sync.WaitGroup
	wg.Go(func() { mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint) })
	<-b.reserved
	// The listing does not hold it yet: only the reservation does.
	if err := h.v.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := h.v.Mint(context.Background(), mintOf(bob, "h1", 2))
	checkCeiling(t, h, err, "h1-review-002", vocab.CeilingInstancesPerHost, 1)
	close(b.release)
	wg.Wait()
	if n := live(h); n != 1 {
		t.Errorf("live: got %d, want 1", n)
	}
}

// noLister is a backend that cannot list.
type noLister struct{ registrar.Backend }

func TestRebuildNeedsALister(t *testing.T) {
	h := newHarness(t, 32, 512, noLister{registrartest.NewBackend(t)})
	if err := h.v.Rebuild(context.Background()); !errors.Is(err, registrar.ErrNoLister) {
		t.Errorf("Rebuild over a backend that cannot list: got %v, want ErrNoLister", err)
	}
}

func TestAFailedRebuildLeavesTheCountsAsTheyWere(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	mustMint(t, h, mintOf(alice, "h1", 1), registrar.FirstMint)
	b.Err = errors.New("down")
	if err := h.v.Rebuild(context.Background()); err == nil || !errors.Is(err, b.Err) {
		t.Errorf("Rebuild over a failing backend: got %v, want its error", err)
	}
	b.Err = nil
	if n := live(h); n != 1 {
		t.Errorf("live after a failed rebuild: got %d, want 1 as before", n)
	}
}

func TestRebuildCountsTheRegistryFromScratch(t *testing.T) {
	b := registrartest.NewBackend(t)
	before := newHarness(t, 32, 512, b)
	before.v.SetAuthority(fakeAuthority{{identity: alice}, {identity: bob}})
	mustMint(t, before, mintOf(alice, "h1", 1), registrar.FirstMint)
	mustMint(t, before, mintOf(alice, "h1", 2), registrar.FirstMint)
	mustMint(t, before, mintOf(bob, "h2", 1), registrar.FirstMint)
	mustMint(t, before, mintOf(bob, "h2", 2), registrar.FirstMint)
	mustMint(t, before, mintOf(bob, "h2", 3), registrar.FirstMint)
	b.DropOwner("h2-review-003") // the operators': no policy's

	h := newHarness(t, 32, 512, b) // a restart: nothing counted yet
	h.v.SetAuthority(fakeAuthority{{identity: alice, maxRegistrations: 2}, {identity: bob}})
	h.v.SetCeilings(map[string]uint32{"review": 3})
	if n := live(h); n != 0 {
		t.Fatalf("live before the first Rebuild: got %d, want 0", n)
	}
	if err := h.v.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := registrar.Stock{
		Components: []registrar.ComponentStock{
			{Component: "Bad_Component"},
			{Component: "control-plane"},
			{Component: "edge-proxy"},
			{Component: "review", Live: 5, BusiestHost: 3, Ceiling: 3},
		},
		Policies: []registrar.PolicyStock{{Policy: 0, Live: 2, Ceiling: 2}, {Policy: 1, Live: 2}},
	}
	if got := h.v.Stock(); !slices.Equal(got.Components, want.Components) || !slices.Equal(got.Policies, want.Policies) {
		t.Errorf("Stock after Rebuild:\ngot  %+v\nwant %+v", got, want)
	}
	_, err := h.v.Mint(context.Background(), mintOf(alice, "h3", 1))
	checkCeiling(t, h, err, "h3-review-001", vocab.CeilingRegistrations, 2)
	_, err = h.v.Mint(context.Background(), mintOf(bob, "h2", 4))
	checkCeiling(t, h, err, "h2-review-004", vocab.CeilingInstancesPerHost, 3)
}

// gatedReserver asks each unbound mint's Reserve itself, outside the
// fake's lock, once all of them have arrived: every reservation races,
// as on a backend that does not serialise mints of different ids.
type gatedReserver struct {
	*registrartest.Backend
	gated atomic.Bool
	gate  sync.WaitGroup
}

func (g *gatedReserver) Mint(ctx context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	if !g.Has(op.RegistrationID) {
		if g.gated.Load() {
			g.gate.Done()
			g.gate.Wait()
		}
		if !op.Reserves() {
			return registrar.MintCeilingReached, registrar.Material{}, nil
		}
		op.Reserve = nil
	}
	return g.Backend.Mint(ctx, op)
}

func TestTheLastSlotRacedBy32ReservationsAtOnceHasOneFirstMint(t *testing.T) {
	const racers, limit = 32, 3
	for _, c := range []vocab.Ceiling{vocab.CeilingInstancesPerHost, vocab.CeilingRegistrations} {
		t.Run(c.String(), func(t *testing.T) {
			b := &gatedReserver{Backend: registrartest.NewBackend(t)}
			h := newHarness(t, 32, 512, b)
			if c == vocab.CeilingInstancesPerHost {
				h.v.SetCeilings(map[string]uint32{"review": limit})
			} else {
				h.v.SetAuthority(fakeAuthority{{identity: alice, maxRegistrations: limit}})
			}
			for n := range uint32(limit - 1) {
				mustMint(t, h, mintOf(alice, "h1", 1+n), registrar.FirstMint)
			}
			b.gate.Add(racers)
			b.gated.Store(true)
			errs := make([]error, racers)
			var wg sync.WaitGroup
			for i := range racers {
				wg.Go(func() { _, errs[i] = h.v.Mint(context.Background(), mintOf(alice, "h1", uint32(limit+i))) })
			}
			wg.Wait()
			first := 0
			for i, err := range errs {
				if err == nil {
					first++
					continue
				}
				if r := asRefused(t, err); r.Reason != vocab.ReasonInstanceCeiling || r.Ceiling != c || r.Limit != limit {
					t.Errorf("racer %d: got %+v, want instance_ceiling (%s %d)", i, r, c, limit)
				}
			}
			if first != 1 || live(h) != limit {
				t.Errorf("%d mints reserving the last slot at once: got %d first_mint and %d live, want 1 and %d", racers, first, live(h), limit)
			}
		})
	}
}

func TestAMintThatCompletesAnotherDaemonsClaimCountsItAsTheClaimants(t *testing.T) {
	b := registrartest.NewBackend(t)
	auth := fakeAuthority{{identity: alice}, {identity: bob, anyOwner: true}}
	first := newHarness(t, 32, 512, b)
	first.v.SetAuthority(auth)
	b.Partial = errors.New("the answer was lost")
	if _, err := first.v.Mint(context.Background(), mintOf(alice, "h1", 1)); err == nil {
		t.Fatal("a mint the backend failed partially: got no error")
	}
	b.Partial = nil
	// A second daemon on the same registry, which never counted the
	// claim, completes it for another caller that may act on it.
	second := newHarness(t, 32, 512, b)
	second.v.SetAuthority(auth)
	mustMint(t, second, mintOf(bob, "h1", 1), registrar.FirstMint)
	want := []registrar.PolicyStock{{Policy: 0, Live: 1}}
	if got := second.v.Stock().Policies; !slices.Equal(got, want) || live(second) != 1 {
		t.Errorf("the completed claim: counted %+v (live %d), want %+v: alice's, once", got, live(second), want)
	}
}

// registryCount is the fake's live registrations of review on host.
func registryCount(t *testing.T, b *registrartest.Backend, host string) (n uint32) {
	t.Helper()
	err := b.Registrations(context.Background(), func(r registrar.Registration) error {
		if r.Host == host && r.Component == "review" {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRebuildsRacingMintsAndDeregistersNeverLetAHostPassItsCeiling(t *testing.T) {
	const workers, rounds, ceiling = 8, 300, 3
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 1<<20, b)
	h.v.SetCeilings(map[string]uint32{"review": ceiling})
	stop := make(chan struct{})
	var rebuilds sync.WaitGroup
	rebuilds.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := h.v.Rebuild(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				// Two workers per host, each with its own instances.
				host, n := fmt.Sprintf("h%d", w/2), uint32(1+w%2*10+i%7)
				if i%3 == 2 {
					if _, err := h.v.Deregister(context.Background(), deregisterOf(alice, host, n)); err != nil {
						t.Error(err)
					}
					continue
				}
				res, err := h.v.Mint(context.Background(), mintOf(alice, host, n))
				if err == nil && res.Outcome == registrar.FirstMint {
					if got := registryCount(t, b, host); got > ceiling {
						t.Errorf("after a first mint on %s: the registry holds %d registrations of review, over the ceiling %d", host, got, ceiling)
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rebuilds.Wait()
	total := uint32(0)
	for w := 0; w < workers; w += 2 {
		total += registryCount(t, b, fmt.Sprintf("h%d", w/2))
	}
	if n := live(h); n != uint64(total) {
		t.Errorf("after the race: the verbs count %d, the registry holds %d", n, total)
	}
}
