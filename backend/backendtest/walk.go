package backendtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// walkAuthority is the walk's caller policies: identity "test:pP-J" takes
// policy P (0: its own registrations, 1: its policy's, 2: any), or, when
// moved, test:p2-1 takes policy 1 (a reload that moves an identity moves
// the registrations it owns); test:operator is an operator. max is each
// policy's max_registrations. Immutable once in force.
type walkAuthority struct {
	max   []uint32
	moved bool
}

var _ registrar.Authority = (*walkAuthority)(nil)

const walkOperator = "test:operator"

func walkIdentity(policy, j int) string { return fmt.Sprintf("test:p%d-%d", policy, j) }

func (a *walkAuthority) Policy(identity string) (int, bool) {
	if identity == walkOperator {
		return -1, true
	}
	var p, j int
	if n, err := fmt.Sscanf(identity, "test:p%d-%d", &p, &j); n != 2 || err != nil || p < 0 || p >= len(a.max) {
		return 0, false
	}
	if a.moved && p == 2 && j == 1 {
		return 1, true
	}
	return p, true
}

func (a *walkAuthority) OutOfScope(int, string, vocab.Verb, string, string, string) vocab.Scope {
	return 0
}

func (a *walkAuthority) MayAct(policy int, identity, owner string) bool {
	switch {
	case policy < 0:
		return true
	case owner == "":
		return false
	case owner == identity:
		return true
	case policy == 1:
		p, ok := a.Policy(owner)
		return ok && p == policy
	}
	return policy == 2
}

func (a *walkAuthority) MaxRegistrations(policy int) uint32 {
	if policy < 0 || policy >= len(a.max) {
		return 0
	}
	return a.max[policy]
}

// walkFault is a failure the walk's backend wrapper injects into its next
// call, each a way a real backend may fail: after a reservation that took
// its slot, cleanly (nothing written) or partially (the binding may or may
// not exist: here it does not); after the binding was created; after it
// was removed.
type walkFault uint8

const (
	noFault walkFault = iota
	faultCleanAfterReserve
	faultPartialWithoutCreating
	faultPartialAfterCreating
	faultPartialAfterRemoving
)

var errWalkFault = errors.New("injected by the walk")

// faultyBackend is the backend under test with the walk's faults.
type faultyBackend struct {
	registrar.Backend
	next walkFault
}

func (f *faultyBackend) Registrations(ctx context.Context, fn func(registrar.Registration) error) error {
	return f.Backend.(registrar.Lister).Registrations(ctx, fn)
}

func (f *faultyBackend) Mint(ctx context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	fault := f.next
	f.next = noFault
	switch fault {
	case faultCleanAfterReserve, faultPartialWithoutCreating:
		// Armed only for an unbound id: Reserve is what a backend asks.
		if !op.Reserves() {
			return registrar.MintCeilingReached, registrar.Material{}, nil
		}
		if fault == faultCleanAfterReserve {
			return 0, registrar.Material{}, errWalkFault
		}
		return 0, registrar.Material{}, &registrar.PartialError{Changed: []string{"binding claimed (maybe)"}, Err: errWalkFault}
	case faultPartialAfterCreating:
		st, m, err := f.Backend.Mint(ctx, op)
		if err == nil && st == registrar.MintCreated {
			return 0, registrar.Material{}, &registrar.PartialError{Changed: []string{"binding claimed"}, Err: errWalkFault}
		}
		return st, m, err
	}
	return f.Backend.Mint(ctx, op)
}

func (f *faultyBackend) Deregister(ctx context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	fault := f.next
	f.next = noFault
	st, err := f.Backend.Deregister(ctx, op)
	if fault == faultPartialAfterRemoving && err == nil && st == registrar.DeregisterRemoved {
		return 0, &registrar.PartialError{Changed: []string{"binding deleted"}, Err: errWalkFault}
	}
	return st, err
}

// walkBinding is what the model holds of one registration.
type walkBinding struct {
	component, host, owner string
	instance               uint32
}

// walkAnswer is one verb's answer, as the model predicts it.
type walkAnswer struct {
	outcome string // the result's wire spelling, or "refused"
	reason  vocab.Reason
	ceiling vocab.Ceiling
	limit   uint32
}

func (a walkAnswer) String() string {
	if a.outcome != "refused" {
		return a.outcome
	}
	if a.reason == vocab.ReasonInstanceCeiling {
		return fmt.Sprintf("refused %s (%s %d)", a.reason, a.ceiling, a.limit)
	}
	return "refused " + a.reason.String()
}

// walk is the random walk: the verbs and backend under test, and the model
// of the registry every answer is predicted from.
//
// The model holds the registry and, beside it, the phantoms: the ids the
// verbs keep counting after a *PartialError although the registry holds no
// binding (the counts err high, never past a ceiling), until a mint of the
// id reserves it again, a deregister finds it absent, or a Rebuild.
type walk struct {
	t       *testing.T
	b       registrar.Backend
	fb      *faultyBackend
	v       *registrar.Verbs
	opts    CeilingOptions
	rng     *rand.Rand
	tag     string // the Run's: its hosts are tag-h1, tag-h2, tag-h3
	hosts   []string
	auth    *walkAuthority
	perHost map[string]uint32
	model   map[string]walkBinding
	phantom map[string]walkBinding
	step    int
	stats   struct{ mints, deregisters, reloads, crashes, created, ceilinged, faults int }
}

func newWalk(t *testing.T, b registrar.Backend, opts CeilingOptions, tag string) *walk {
	if _, ok := b.(registrar.Lister); !ok {
		t.Fatal("RunCeilings: the backend is no registrar.Lister")
	}
	w := &walk{
		t:       t,
		b:       b,
		opts:    opts,
		rng:     rand.New(rand.NewPCG(opts.Seed, 36)),
		tag:     tag,
		hosts:   []string{tag + "-h1", tag + "-h2", tag + "-h3"},
		auth:    &walkAuthority{max: []uint32{3, 4, 0}},
		perHost: map[string]uint32{"review": 2, "agent": 3},
		model:   map[string]walkBinding{},
		phantom: map[string]walkBinding{},
	}
	w.fb = &faultyBackend{Backend: b}
	w.v, _ = newCeilingVerbs(t, w.fb, w.perHost, w.auth)
	if err := w.v.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *walk) run() {
	for w.step = 1; w.step <= w.opts.Steps; w.step++ {
		switch r := w.rng.IntN(1000); {
		case r < 10:
			w.crash()
		case r < 20:
			w.reload()
		case r < 180 && len(w.model) > 0:
			w.remint()
		case r < 480:
			w.deregister()
		default:
			c, h, i := w.pick()
			w.mint(w.identity(), c, h, i)
		}
		w.checkStock("")
		if w.step%250 == 0 {
			w.checkRegistry("")
		}
	}
	w.crash() // and a last recount
}

func (w *walk) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("step %d (seed %d): %s", w.step, w.opts.Seed, fmt.Sprintf(format, args...))
}

// identity is a random caller: one of two per policy, or the operator.
func (w *walk) identity() string {
	if w.rng.IntN(10) == 0 {
		return walkOperator
	}
	return walkIdentity(w.rng.IntN(len(w.auth.max)), w.rng.IntN(2))
}

// pick is a random registration: component, host and instance.
func (w *walk) pick() (string, string, uint32) {
	comps := slices.Sorted(maps.Keys(ceilingComponents))
	c := comps[w.rng.IntN(len(comps))]
	var instance uint32
	if ceilingComponents[c] == vocab.ManyPerHost {
		instance = 1 + w.rng.Uint32N(5)
	}
	return c, w.hosts[w.rng.IntN(len(w.hosts))], instance
}

func walkID(component, host string, instance uint32) string {
	return RegistrationID(ceilingComponents[component], component, host, instance)
}

// RegistrationID is the registration id the verbs derive, written from
// the spec's rule (one-per-deployment: the component; one-per-host:
// host-component; many-per-host: host-component-NNN) as the tests'
// reference: the random walk's and the verbs' authorization model's.
func RegistrationID(m vocab.Multiplicity, component, host string, instance uint32) string {
	switch m {
	case vocab.OnePerDeployment:
		return component
	case vocab.OnePerHost:
		return host + "-" + component
	}
	return fmt.Sprintf("%s-%s-%03d", host, component, instance)
}

// policyOf is owner's policy now, -1 for none.
func (w *walk) policyOf(owner string) int {
	p, ok := w.auth.Policy(owner)
	if !ok || p < 0 || owner == "" {
		return -1
	}
	return p
}

// onHost and ofPolicy are what the verbs count of (component, host) and
// of policy: the registry's, and the phantoms.
func (w *walk) onHost(component, host string) (n uint32) {
	for _, m := range []map[string]walkBinding{w.model, w.phantom} {
		for _, bd := range m {
			if bd.component == component && bd.host == host {
				n++
			}
		}
	}
	return n
}

func (w *walk) ofPolicy(p int) (n uint64) {
	for _, m := range []map[string]walkBinding{w.model, w.phantom} {
		for _, bd := range m {
			if w.policyOf(bd.owner) == p {
				n++
			}
		}
	}
	return n
}

func refused(reason vocab.Reason) walkAnswer { return walkAnswer{outcome: "refused", reason: reason} }

func answerOf(t *testing.T, outcome fmt.Stringer, err error) walkAnswer {
	t.Helper()
	if err == nil {
		return walkAnswer{outcome: outcome.String()}
	}
	if u, ok := errors.AsType[*registrar.UnavailableError](err); ok && u.Reason == registrar.BackendUnavailable && errors.Is(err, errWalkFault) {
		return walkAnswer{outcome: "unavailable"}
	}
	var r *registrar.RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("an answer that is no result and no refusal: %v", err)
	}
	return walkAnswer{outcome: "refused", reason: r.Reason, ceiling: r.Ceiling, limit: r.Limit}
}

func (w *walk) remint() {
	ids := slices.Sorted(maps.Keys(w.model))
	bd := w.model[ids[w.rng.IntN(len(ids))]]
	identity := bd.owner
	if w.rng.IntN(10) < 3 {
		identity = w.identity()
	}
	host := bd.host
	if ceilingComponents[bd.component] == vocab.OnePerDeployment && w.rng.IntN(2) == 0 {
		host = w.hosts[w.rng.IntN(len(w.hosts))]
	}
	w.mint(identity, bd.component, host, bd.instance)
}

func (w *walk) mint(identity, component, host string, instance uint32) {
	w.t.Helper()
	w.stats.mints++
	id := walkID(component, host, instance)
	var want walkAnswer
	policy := w.policyOf(identity)
	bd, bound := w.model[id]
	stale, isPhantom := w.phantom[id]
	fault := noFault
	if !bound {
		// The mint reserves: a phantom of the id is stale (the backend
		// found no binding) and goes first.
		delete(w.phantom, id)
		if w.rng.IntN(100) < 6 {
			fault = []walkFault{faultCleanAfterReserve, faultPartialWithoutCreating, faultPartialAfterCreating}[w.rng.IntN(3)]
		}
	}
	switch {
	case bound && !w.auth.MayAct(w.authPolicy(identity), identity, bd.owner):
		want = refused(vocab.ReasonNotOwner)
	case bound && bd.host != host:
		want = refused(vocab.ReasonRegistrationIDCollision)
	case bound:
		want = walkAnswer{outcome: registrar.IdempotentRemint.String()}
	case w.perHost[component] != 0 && w.onHost(component, host) >= w.perHost[component]:
		want = walkAnswer{"refused", vocab.ReasonInstanceCeiling, vocab.CeilingInstancesPerHost, w.perHost[component]}
	case policy >= 0 && w.auth.max[policy] != 0 && w.ofPolicy(policy) >= uint64(w.auth.max[policy]):
		want = walkAnswer{"refused", vocab.ReasonInstanceCeiling, vocab.CeilingRegistrations, w.auth.max[policy]}
	case fault != noFault:
		want = walkAnswer{outcome: "unavailable"}
	default:
		want = walkAnswer{outcome: registrar.FirstMint.String()}
	}
	w.fb.next = fault
	res, err := w.v.Mint(context.Background(), ceilingMint(identity, component, host, instance))
	got := answerOf(w.t, res.Outcome, err)
	if got != want {
		w.fatalf("mint of %s from %s by %s (fault %d, stale phantom %t %+v): got %s, want %s", id, host, identity, fault, isPhantom, stale, got, want)
	}
	created := walkBinding{component: component, host: host, owner: identity, instance: instance}
	switch {
	case want.outcome == "unavailable":
		w.stats.faults++
		switch fault {
		case faultPartialWithoutCreating:
			w.phantom[id] = created
		case faultPartialAfterCreating:
			w.model[id] = created
		}
	case want.outcome == registrar.FirstMint.String():
		w.stats.created++
		w.model[id] = created
		// The invariants, said outright: no mint takes a host past
		// its component's ceiling, or a policy past its own.
		if c := w.perHost[component]; c != 0 && w.onHost(component, host) > c {
			w.fatalf("the first mint of %s left %d registrations of %s on %s, over its ceiling %d", id, w.onHost(component, host), component, host, c)
		}
		if policy >= 0 && w.auth.max[policy] != 0 && w.ofPolicy(policy) > uint64(w.auth.max[policy]) {
			w.fatalf("the first mint of %s left policy %d %d registrations, over its ceiling %d", id, policy, w.ofPolicy(policy), w.auth.max[policy])
		}
	case want.reason == vocab.ReasonInstanceCeiling:
		w.stats.ceilinged++
	}
}

// authPolicy is identity's policy index as the verbs take it (an
// operator's is negative).
func (w *walk) authPolicy(identity string) int {
	p, _ := w.auth.Policy(identity)
	return p
}

func (w *walk) deregister() {
	w.t.Helper()
	w.stats.deregisters++
	var component, host string
	var instance uint32
	if ids := slices.Sorted(maps.Keys(w.model)); len(ids) > 0 && w.rng.IntN(4) != 0 {
		bd := w.model[ids[w.rng.IntN(len(ids))]]
		component, host, instance = bd.component, bd.host, bd.instance
		if ceilingComponents[component] == vocab.OnePerDeployment && w.rng.IntN(3) == 0 {
			host = w.hosts[w.rng.IntN(len(w.hosts))]
		}
	} else {
		component, host, instance = w.pick()
	}
	identity := w.identity()
	if bd, ok := w.model[walkID(component, host, instance)]; ok && w.rng.IntN(10) < 6 {
		identity = bd.owner
	}
	id := walkID(component, host, instance)
	var want walkAnswer
	bd, bound := w.model[id]
	switch {
	case !bound:
		want = walkAnswer{outcome: registrar.AlreadyAbsent.String()}
	case !w.auth.MayAct(w.authPolicy(identity), identity, bd.owner):
		want = refused(vocab.ReasonNotOwner)
	case bd.host != host:
		want = refused(vocab.ReasonHostMismatch)
	case w.rng.IntN(100) < 5:
		w.fb.next = faultPartialAfterRemoving
		want = walkAnswer{outcome: "unavailable"}
	default:
		want = walkAnswer{outcome: registrar.Removed.String()}
	}
	res, err := w.v.Deregister(context.Background(), registrar.DeregisterRequest{
		CallerIdentity: identity, ServiceName: "review", Host: host, Instance: instance, Component: component,
	})
	got := answerOf(w.t, res.Outcome, err)
	if got != want {
		w.fatalf("deregister of %s from %s by %s: got %s, want %s", id, host, identity, got, want)
	}
	switch want.outcome {
	case registrar.Removed.String():
		delete(w.model, id)
	case registrar.AlreadyAbsent.String():
		delete(w.phantom, id) // absent: whatever was counted for it goes
	case "unavailable":
		w.stats.faults++
		w.phantom[id] = bd // removed, and still counted
		delete(w.model, id)
	}
}

// reload puts new ceilings and caller policies in force, as a SIGHUP
// does, and rebuilds half the time (the counts must be right either way).
func (w *walk) reload() {
	w.stats.reloads++
	w.perHost = map[string]uint32{"review": w.rng.Uint32N(4), "agent": 1 + w.rng.Uint32N(4)}
	w.auth = &walkAuthority{max: []uint32{w.rng.Uint32N(6), 1 + w.rng.Uint32N(5), w.rng.Uint32N(3)}, moved: w.rng.IntN(2) == 0}
	w.v.SetCeilings(w.perHost)
	w.v.SetAuthority(w.auth)
	if w.rng.IntN(2) == 0 {
		if err := w.v.Rebuild(context.Background()); err != nil {
			w.fatalf("Rebuild after a reload: %v", err)
		}
		clear(w.phantom)
	}
}

// crash drops the verbs (and, with Restart, the backend): nothing of the
// counts survives but the registry. New verbs are built and rebuilt from
// it, as the daemon does at start, and must count what the registry holds.
func (w *walk) crash() {
	w.stats.crashes++
	w.v = nil
	if w.opts.Restart != nil {
		w.b = w.opts.Restart(w.t, w.b)
	}
	w.fb = &faultyBackend{Backend: w.b}
	clear(w.phantom)
	w.v, _ = newCeilingVerbs(w.t, w.fb, w.perHost, w.auth)
	if st := w.v.Stock(); slices.ContainsFunc(st.Components, func(c registrar.ComponentStock) bool { return c.Live != 0 }) {
		w.fatalf("new verbs count %+v before their first Rebuild, want nothing", st)
	}
	if err := w.v.Rebuild(context.Background()); err != nil {
		w.fatalf("Rebuild after a crash: %v", err)
	}
	w.checkStock("after a crash and its Rebuild: ")
	w.checkRegistry("after a crash: ")
}

// checkStock compares the verbs' counts with the model's.
func (w *walk) checkStock(when string) {
	w.t.Helper()
	st := w.v.Stock()
	var want registrar.Stock
	for _, c := range slices.Sorted(maps.Keys(ceilingComponents)) {
		cs := registrar.ComponentStock{Component: c, Ceiling: w.perHost[c]}
		for _, h := range w.hosts {
			cs.BusiestHost = max(cs.BusiestHost, w.onHost(c, h))
		}
		for _, m := range []map[string]walkBinding{w.model, w.phantom} {
			for _, bd := range m {
				if bd.component == c {
					cs.Live++
				}
			}
		}
		want.Components = append(want.Components, cs)
	}
	for p := range w.auth.max {
		if n := w.ofPolicy(p); n != 0 {
			want.Policies = append(want.Policies, registrar.PolicyStock{Policy: p, Live: n, Ceiling: w.auth.max[p]})
		}
	}
	if !slices.Equal(st.Components, want.Components) || !slices.Equal(st.Policies, want.Policies) {
		w.fatalf("%sthe verbs count\n%+v\nwant (the model of the registry)\n%+v", when, st, want)
	}
}

// checkRegistry compares the backend's listing with the model.
func (w *walk) checkRegistry(when string) {
	w.t.Helper()
	got := map[string]registrar.Registration{}
	err := w.b.(registrar.Lister).Registrations(context.Background(), func(r registrar.Registration) error {
		if r.ID == "control-plane" || strings.HasPrefix(r.ID, w.tag+"-h") {
			got[r.ID] = r
		}
		return nil
	})
	if err != nil {
		w.fatalf("Registrations: %v", err)
	}
	want := map[string]registrar.Registration{}
	for id, bd := range w.model {
		want[id] = registrar.Registration{ID: id, Host: bd.host, Component: bd.component, Owner: bd.owner}
	}
	if !maps.Equal(got, want) {
		w.fatalf("%sthe registry lists\n%v\nwant (the model)\n%v", when, got, want)
	}
}
