// Package backendtest is the contract of registrar.Backend as one suite
// that every implementation runs (modelled on Tailscale's
// tstest/chonktest.RunChonkTests): each mint and deregister status of the
// table in registrar/backend.go, what a refusal leaves unchanged, the shape
// of the material, idempotent deregister, ownership (the owner a first
// mint records, what MayAct is asked, and that its refusal comes first and
// changes nothing), the reservation (Reserve asked exactly when a mint
// creates, never for a remint, and its refusal MintCeilingReached changing
// nothing), concurrent calls for one registration id and for overlapping
// ones, the partial-failure rule of registrar.PartialError (and that a
// binding a failed mint may have claimed is listed, and completed without
// a reservation), and, for a backend that is a registrar.Lister, that it
// lists exactly the bindings with their owners.
//
// RunCeilings is the instance ceilings over a backend: the real verbs,
// racing for the last slot and through a long random walk with crashes.
//
// It is test support: it imports testing, and production code never
// imports it (cmd/registrar-otel's deptest holds that).
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// Call names the verb a fault is armed for.
type Call uint8

const (
	CallMint Call = iota + 1
	CallDeregister
)

func (c Call) String() string {
	if c == CallMint {
		return "mint"
	}
	return "deregister"
}

// DefaultConcurrency is how many calls the concurrency subtests run at once
// when Options.Concurrency is zero.
const DefaultConcurrency = 64

// Options says what the suite may do to a backend beyond the interface.
// The zero value runs everything but the fault subtests.
type Options struct {
	// Fault, if set, arms a failure of b's next call of the verb call at
	// its step-th (0-based) step, and returns the function that disarms
	// it; ok false means the call has no such step (the suite stops
	// counting there). The suite arms CallMint before the first mint of an
	// unbound id and CallDeregister before the deregister of a bound one,
	// and expects the armed call to fail. What a step is (a request, a
	// random read, a write) is the backend's business; the suite checks
	// only the rule: a failure that is not a *registrar.PartialError
	// changed nothing, and one that is converges when retried.
	Fault func(t *testing.T, b registrar.Backend, call Call, step int) (disarm func(), ok bool)
	// Restart, if set, returns a backend on b's store that shares nothing
	// in memory with b, as a restarted daemon would open. The retry after
	// a fault goes to it; nil retries on b.
	Restart func(t *testing.T, b registrar.Backend) registrar.Backend
	// Concurrency is how many calls the concurrency subtests run at once;
	// zero means DefaultConcurrency.
	Concurrency int
	// Deliver, if set, takes delivery of the material a mint issued for
	// id, as the service it was issued for would, and returns the check
	// that it still works: that the service can still log in with it, or
	// as near as the backend can tell. The suite calls the check once,
	// after calls that must have changed nothing, and never uses the
	// material again; nil checks only that the role id is unchanged.
	Deliver func(t *testing.T, b registrar.Backend, id string, m registrar.Material) (stillWorks func() error)
	// DropOwner, if set, rewrites id's binding on b's store in the shape
	// a release before owners were recorded wrote: without an owner. nil
	// skips the subtest of such bindings.
	DropOwner func(t *testing.T, b registrar.Backend, id string)
}

// Run runs the contract against backends from newBackend, which is called
// once per subtest. newBackend may return backends on one shared store:
// no registration id is used by two subtests of one Run.
func Run(t *testing.T, newBackend func(t *testing.T) registrar.Backend, opts Options) {
	t.Helper()
	s := &suite{newBackend: newBackend, opts: opts, run: runs.Add(1)}
	if s.opts.Concurrency <= 0 {
		s.opts.Concurrency = DefaultConcurrency
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, c *subject)
	}{
		{"mint/an unbound id is created", testMintCreated},
		{"mint/the same host and spec are reissued", testMintReissued},
		{"mint/another host collides", testMintCollision},
		{"mint/another host and spec collide", testMintCollisionBeforeSpec},
		{"mint/another component conflicts", specConflict(func(s *registrar.Spec) { s.Component = "agent" })},
		{"mint/another service name conflicts", specConflict(func(s *registrar.Spec) { s.ServiceName = "other" })},
		{"mint/another reload conflicts", specConflict(func(s *registrar.Spec) { s.Reload = "systemctl restart review" })},
		{"mint/after removal is created with a new role id", testMintAfterRemoval},
		{"mint/ids that share a prefix are independent", testPrefixIDsIndependent},
		{"deregister/an unbound id is absent", testDeregisterAbsent},
		{"deregister/another host is a mismatch", testDeregisterHostMismatch},
		{"deregister/the bound host removes, then it is absent", testDeregisterRemovedThenAbsent},
		{"owner/the first mint records its owner, which every later call is asked about", testOwnerRecorded},
		{"owner/a remint MayAct refuses is MintNotOwner and changes nothing", testMintNotOwner},
		{"owner/a deregister MayAct refuses is DeregisterNotOwner and removes nothing", testDeregisterNotOwner},
		{"owner/the ownership check comes before the host, spec and host-mismatch checks", testOwnerCheckedFirst},
		{"owner/a binding stored without an owner is asked about the owner \"\"", testUnownedBinding},
		{"reserve/Reserve is asked exactly when a mint creates, never for a remint", testReserveAskedWhenCreating},
		{"reserve/a refused reservation is MintCeilingReached and changes nothing", testReserveRefusalChangesNothing},
		{"lister/lists exactly the bindings, with their hosts, components and owners", testListerListsLiveBindings},
		{"lister/stops at fn's error and at a cancelled context", testListerStopsAtFnsError},
		{"concurrency/mints of one id have one created", testConcurrentOneID},
		{"concurrency/mints of one id from two hosts have one owner", testConcurrentTwoHosts},
		{"concurrency/mints and deregisters of overlapping ids", testConcurrentOverlapping},
		{"concurrency/mints of one id by many identities have one owner", testConcurrentOwners},
		{"concurrency/mints of one id ask Reserve once, the one that creates", testConcurrentReserveOnce},
		{"concurrency/mints of distinct ids racing for one slot have one created", testConcurrentLastSlot},
		{"partial/a failed mint changed nothing or converges", testMintFaults},
		{"partial/a failed deregister changed nothing or converges", testDeregisterFaults},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &subject{suite: s, b: newBackend(t), prefix: fmt.Sprintf("c%d-%d", s.run, i)}
			tt.fn(t, c)
		})
	}
}

// runs numbers the Runs of one test binary, so that two Runs on one shared
// store (one server for a package's tests) use different ids too.
var runs atomic.Uint64

type suite struct {
	newBackend func(t *testing.T) registrar.Backend
	opts       Options
	run        uint64
}

// subject is one subtest's backend and id namespace.
type subject struct {
	*suite
	b      registrar.Backend
	prefix string
}

// now is the first mint's instant: whole seconds in UTC, so that every
// backend's precision holds it exactly.
var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

const ttl = 300 * time.Second

var baseSpec = registrar.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"}

// id returns the subtest's registration id for name ([a-z0-9-], short
// enough for every backend's role names).
func (c *subject) id(name string) string { return c.prefix + "-" + name }

// The caller identities of the ownership subtests: ownerA mints by
// default (subject.op), ownerB is another caller.
const (
	ownerA = "identity-a"
	ownerB = "identity-b"
)

// op is a mint of id from host by ownerA, with MayAct nil (anyone may act).
func (c *subject) op(id, host string) registrar.MintOp {
	return registrar.MintOp{RegistrationID: id, Host: host, Spec: baseSpec, Owner: ownerA, WrapTTL: ttl, Now: now}
}

func (c *subject) mint(t *testing.T, b registrar.Backend, op registrar.MintOp) (registrar.MintStatus, registrar.Material) {
	t.Helper()
	st, m, err := b.Mint(context.Background(), op)
	if err != nil {
		t.Fatalf("Mint(%s from %s): %v", op.RegistrationID, op.Host, err)
	}
	return st, m
}

// mustMint mints op and fails unless the status is want; it checks the
// material's shape for every status.
func (c *subject) mustMint(t *testing.T, b registrar.Backend, op registrar.MintOp, want registrar.MintStatus) registrar.Material {
	t.Helper()
	st, m := c.mint(t, b, op)
	if st != want {
		t.Fatalf("Mint(%s from %s): got %s, want %s", op.RegistrationID, op.Host, st, want)
	}
	checkMaterial(t, op, st, m)
	return m
}

func (c *subject) mustDeregister(t *testing.T, b registrar.Backend, id, host string, want registrar.DeregisterStatus) {
	t.Helper()
	c.mustDeregisterOp(t, b, registrar.DeregisterOp{RegistrationID: id, Host: host}, want)
}

func (c *subject) mustDeregisterOp(t *testing.T, b registrar.Backend, op registrar.DeregisterOp, want registrar.DeregisterStatus) {
	t.Helper()
	st, err := b.Deregister(context.Background(), op)
	if err != nil {
		t.Fatalf("Deregister(%s from %s): %v", op.RegistrationID, op.Host, err)
	}
	if st != want {
		t.Fatalf("Deregister(%s from %s): got %s, want %s", op.RegistrationID, op.Host, st, want)
	}
}

// checkMaterial holds the material's shape: a role id, a wrapped secret id
// and ExpiresAt = Now + WrapTTL for a mint that issued, the zero value for
// one that refused.
func checkMaterial(t *testing.T, op registrar.MintOp, st registrar.MintStatus, m registrar.Material) {
	t.Helper()
	switch st {
	case registrar.MintCreated, registrar.MintReissued:
		if m.RoleID == "" || m.WrappedSecretID == "" {
			t.Errorf("%s material of %s: got role id %q and a secret empty=%t, want both set", st, op.RegistrationID, m.RoleID, m.WrappedSecretID == "")
		}
		if want := op.Now.Add(op.WrapTTL); !m.ExpiresAt.Equal(want) {
			t.Errorf("%s material of %s: got expires_at %s, want Now + WrapTTL = %s", st, op.RegistrationID, m.ExpiresAt, want)
		}
	default:
		if m != (registrar.Material{}) {
			t.Errorf("%s of %s: got material %+v, want the zero value", st, op.RegistrationID, m)
		}
	}
}

// unchanged checks that id is still bound to (host, baseSpec) with roleID:
// a remint is reissued with the same role id.
func (c *subject) unchanged(t *testing.T, id, host, roleID string) {
	t.Helper()
	op := c.op(id, host)
	op.Now = now.Add(2 * time.Minute)
	if m := c.mustMint(t, c.b, op, registrar.MintReissued); m.RoleID != roleID {
		t.Errorf("role id of %s after a refusal: got %q, want it unchanged %q", id, m.RoleID, roleID)
	}
}

func testMintCreated(t *testing.T, c *subject) {
	c.mustMint(t, c.b, c.op(c.id("a"), "h1"), registrar.MintCreated)
}

func testMintReissued(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	op := c.op(id, "h1")
	op.Now, op.WrapTTL = now.Add(time.Hour), 60*time.Second
	again := c.mustMint(t, c.b, op, registrar.MintReissued)
	if again.RoleID != first.RoleID {
		t.Errorf("role id of a remint: got %q, want the first mint's %q", again.RoleID, first.RoleID)
	}
	if again.WrappedSecretID == first.WrappedSecretID {
		t.Errorf("wrapped secret id of a remint: got the first mint's again, want a fresh one")
	}
}

func testMintCollision(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	c.mustMint(t, c.b, c.op(id, "h2"), registrar.MintCollision)
	c.unchanged(t, id, "h1", first.RoleID)
}

func testMintCollisionBeforeSpec(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	op := c.op(id, "h2")
	op.Spec.Reload = "systemctl restart review"
	c.mustMint(t, c.b, op, registrar.MintCollision)
	c.unchanged(t, id, "h1", first.RoleID)
}

func specConflict(change func(*registrar.Spec)) func(t *testing.T, c *subject) {
	return func(t *testing.T, c *subject) {
		id := c.id("a")
		first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
		op := c.op(id, "h1")
		change(&op.Spec)
		c.mustMint(t, c.b, op, registrar.MintSpecConflict)
		c.unchanged(t, id, "h1", first.RoleID)
	}
}

func testMintAfterRemoval(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterRemoved)
	// Removal takes the host's claim with it: another host may bind it.
	second := c.mustMint(t, c.b, c.op(id, "h2"), registrar.MintCreated)
	if second.RoleID == first.RoleID {
		t.Errorf("role id after removal: got the removed identity's %q again, want a new one", first.RoleID)
	}
}

func testPrefixIDsIndependent(t *testing.T, c *subject) {
	short, long := c.id("p"), c.id("p-1")
	c.mustMint(t, c.b, c.op(short, "h1"), registrar.MintCreated)
	m := c.mustMint(t, c.b, c.op(long, "h2"), registrar.MintCreated)
	c.mustDeregister(t, c.b, long, "h1", registrar.DeregisterHostMismatch)
	c.mustDeregister(t, c.b, short, "h1", registrar.DeregisterRemoved)
	c.unchanged(t, long, "h2", m.RoleID)
	c.mustDeregister(t, c.b, short, "h1", registrar.DeregisterAbsent)
}

func testDeregisterAbsent(t *testing.T, c *subject) {
	c.mustDeregister(t, c.b, c.id("a"), "h1", registrar.DeregisterAbsent)
	c.mustDeregister(t, c.b, c.id("a"), "h2", registrar.DeregisterAbsent)
	// Nothing was created by asking.
	c.mustMint(t, c.b, c.op(c.id("a"), "h2"), registrar.MintCreated)
}

func testDeregisterHostMismatch(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	c.mustDeregister(t, c.b, id, "h2", registrar.DeregisterHostMismatch)
	c.unchanged(t, id, "h1", first.RoleID)
	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterRemoved)
}

func testDeregisterRemovedThenAbsent(t *testing.T, c *subject) {
	id := c.id("a")
	c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterRemoved)
	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterAbsent)
	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterAbsent)
	c.mustDeregister(t, c.b, id, "h2", registrar.DeregisterAbsent)
}

// mintResult is one concurrent mint's answer.
type mintResult struct {
	op  registrar.MintOp
	st  registrar.MintStatus
	m   registrar.Material
	err error
}

// mintAll runs ops at once (released together) and returns their answers.
func mintAll(b registrar.Backend, ops []registrar.MintOp) []mintResult {
	res := make([]mintResult, len(ops))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Go(func() {
			<-start
			st, m, err := b.Mint(context.Background(), op)
			res[i] = mintResult{op, st, m, err}
		})
	}
	close(start)
	wg.Wait()
	return res
}

func testConcurrentOneID(t *testing.T, c *subject) {
	ops := make([]registrar.MintOp, c.opts.Concurrency)
	for i := range ops {
		ops[i] = c.op(c.id("a"), "h1")
	}
	count := map[registrar.MintStatus]int{}
	secrets := map[string]bool{}
	roles := map[string]bool{}
	for i, r := range mintAll(c.b, ops) {
		if r.err != nil {
			t.Fatalf("mint %d: %v", i, r.err)
		}
		checkMaterial(t, r.op, r.st, r.m)
		count[r.st]++
		roles[r.m.RoleID] = true
		if secrets[r.m.WrappedSecretID] {
			t.Errorf("mint %d: got a wrapped secret id already issued, want a fresh one per mint", i)
		}
		secrets[r.m.WrappedSecretID] = true
	}
	if n := len(ops); count[registrar.MintCreated] != 1 || count[registrar.MintReissued] != n-1 {
		t.Errorf("%d concurrent mints of one id: got %d MintCreated and %d MintReissued (of %d), want 1 and %d",
			n, count[registrar.MintCreated], count[registrar.MintReissued], n, n-1)
	}
	if len(roles) != 1 {
		t.Errorf("role ids: got %d distinct, want 1 (one binding)", len(roles))
	}
}

func testConcurrentTwoHosts(t *testing.T, c *subject) {
	id := c.id("a")
	ops := make([]registrar.MintOp, c.opts.Concurrency)
	for i := range ops {
		ops[i] = c.op(id, fmt.Sprintf("h%d", 1+i%2))
	}
	res := mintAll(c.b, ops)
	owner := ""
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("mint %d: %v", i, r.err)
		}
		checkMaterial(t, r.op, r.st, r.m)
		if r.st == registrar.MintCreated {
			if owner != "" {
				t.Fatalf("mint %d from %s: got a second MintCreated (the first from %s), want one", i, r.op.Host, owner)
			}
			owner = r.op.Host
		}
	}
	if owner == "" {
		t.Fatalf("no mint got MintCreated, want one")
	}
	for i, r := range res {
		want := registrar.MintCollision
		if r.op.Host == owner {
			want = registrar.MintReissued
			if r.st == registrar.MintCreated {
				continue
			}
		}
		if r.st != want {
			t.Errorf("mint %d from %s (%s owns it): got %s, want %s", i, r.op.Host, owner, r.st, want)
		}
	}
}

func testConcurrentOverlapping(t *testing.T, c *subject) {
	// Ids that share prefixes ("o", "o-1", "o-1-2", …), each from its own
	// host, minted by several callers at once.
	const k = 8
	ids := make([]string, k)
	name := "o"
	for i := range ids {
		ids[i] = c.id(name)
		name += fmt.Sprintf("-%d", i+1)
	}
	ops := make([]registrar.MintOp, max(c.opts.Concurrency, k))
	for i := range ops {
		ops[i] = c.op(ids[i%k], fmt.Sprintf("h%d", i%k))
	}
	created := map[string]int{}
	roles := map[string]map[string]bool{}
	for i, r := range mintAll(c.b, ops) {
		if r.err != nil {
			t.Fatalf("mint %d of %s: %v", i, r.op.RegistrationID, r.err)
		}
		checkMaterial(t, r.op, r.st, r.m)
		switch r.st {
		case registrar.MintCreated:
			created[r.op.RegistrationID]++
		case registrar.MintReissued:
		default:
			t.Errorf("mint %d of %s: got %s, want MintCreated or MintReissued", i, r.op.RegistrationID, r.st)
		}
		if roles[r.op.RegistrationID] == nil {
			roles[r.op.RegistrationID] = map[string]bool{}
		}
		roles[r.op.RegistrationID][r.m.RoleID] = true
	}
	seen := map[string]string{}
	for _, id := range ids {
		if created[id] != 1 {
			t.Errorf("%s: got %d MintCreated, want 1", id, created[id])
		}
		if len(roles[id]) != 1 {
			t.Errorf("%s: got %d distinct role ids, want 1", id, len(roles[id]))
		}
		for r := range roles[id] {
			if other, ok := seen[r]; ok {
				t.Errorf("%s and %s share the role id %q, want one identity each", id, other, r)
			}
			seen[r] = id
		}
	}

	// Deregister every other id at once while the rest are reminted.
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range ids {
		host := fmt.Sprintf("h%d", i)
		wg.Go(func() {
			<-start
			if i%2 == 0 {
				st, err := c.b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: id, Host: host})
				if err != nil || st != registrar.DeregisterRemoved {
					t.Errorf("Deregister(%s from %s): got %s, %v; want DeregisterRemoved", id, host, st, err)
				}
				return
			}
			st, _, err := c.b.Mint(context.Background(), c.op(id, host))
			if err != nil || st != registrar.MintReissued {
				t.Errorf("Mint(%s from %s): got %s, %v; want MintReissued", id, host, st, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for i, id := range ids {
		want := registrar.DeregisterRemoved
		if i%2 == 0 {
			want = registrar.DeregisterAbsent
		}
		c.mustDeregister(t, c.b, id, fmt.Sprintf("h%d", i), want)
	}
}

// retrier is the backend a retry after a fault goes to.
func (c *subject) retrier(t *testing.T) registrar.Backend {
	if c.opts.Restart == nil {
		return c.b
	}
	return c.opts.Restart(t, c.b)
}

// checkFailure holds a failed call's error to the PartialError rule's
// shape and reports whether it is partial.
func checkFailure(t *testing.T, call string, err error) bool {
	t.Helper()
	if err == nil {
		t.Fatalf("%s with an armed fault: got no error, want the fault to fail it", call)
	}
	pe, partial := errors.AsType[*registrar.PartialError](err)
	if !partial {
		return false
	}
	if len(pe.Changed) == 0 {
		t.Errorf("%s: got a *PartialError naming no change (%v), want the changes named", call, err)
	}
	if pe.Err == nil {
		t.Fatalf("%s: got a *PartialError without its cause", call)
	}
	if !strings.Contains(err.Error(), "partial:") {
		t.Errorf("%s: got %q, want the message to say partial", call, err)
	}
	return true
}

func testMintFaults(t *testing.T, c *subject) {
	if c.opts.Fault == nil {
		t.Skip("the backend has no fault seam (Options.Fault)")
	}
	steps := 0
	for step := 0; ; step++ {
		id := c.id(fmt.Sprintf("m%d", step))
		disarm, ok := c.opts.Fault(t, c.b, CallMint, step)
		if !ok {
			break
		}
		steps++
		st, m, err := c.b.Mint(context.Background(), c.op(id, "h1"))
		disarm()
		call := fmt.Sprintf("Mint(%s) failing at step %d", id, step)
		if err == nil {
			t.Fatalf("%s: got %s and no error, want the fault to fail it", call, st)
		}
		if m != (registrar.Material{}) {
			t.Errorf("%s: got material %+v, want the zero value", call, m)
		}
		b := c.retrier(t)
		regs, canList := c.listed(t, b)
		_, listed := regs[id]
		if !checkFailure(t, call, err) {
			// A clean failure changed nothing: the id is unbound.
			if listed {
				t.Errorf("%s: Registrations lists %s after a failure that is no *PartialError, want nothing bound", call, id)
			}
			c.mustDeregister(t, b, id, "h1", registrar.DeregisterAbsent)
			c.mustMint(t, b, c.op(id, "h1"), registrar.MintCreated)
		} else {
			// A partial one converges when the same request is retried,
			// and a binding it claimed has its owner. The listing tells
			// which: a binding it holds (even a claim) is completed
			// without a reservation, since the verbs counted it from the
			// listing; one it does not hold is created with one.
			a, r := allow(), &reserver{allow: true}
			st, m := c.mint(t, b, r.on(by(c.op(id, "h1"), ownerA, a)))
			if st != registrar.MintCreated && st != registrar.MintReissued {
				t.Fatalf("retry of %s: got %s, want MintCreated or MintReissued", call, st)
			}
			if canList {
				asked := r.asked.Load() != 0
				switch {
				case listed && asked:
					t.Errorf("retry of %s: Reserve was asked for %s, which Registrations listed (a binding exists), want not asked", call, id)
				case !listed && st == registrar.MintCreated && !asked:
					t.Errorf("retry of %s: MintCreated without asking Reserve for %s, which Registrations did not list, want it asked", call, id)
				case listed && regs[id].Owner != ownerA:
					t.Errorf("retry of %s: Registrations lists the claim of %s with owner %q, want %q", call, id, regs[id].Owner, ownerA)
				}
			}
			a.mu.Lock()
			for _, o := range a.asked {
				if o != ownerA {
					t.Errorf("retry of %s: MayAct was asked about the owner %q, want the claim's %q", call, o, ownerA)
				}
			}
			a.mu.Unlock()
			checkMaterial(t, c.op(id, "h1"), st, m)
			c.unchanged(t, id, "h1", m.RoleID)
		}
		c.mustDeregister(t, b, id, "h1", registrar.DeregisterRemoved)
		c.mustDeregister(t, b, id, "h1", registrar.DeregisterAbsent)
	}
	if steps == 0 {
		t.Errorf("Fault armed no mint step, want at least one")
	}
}

func testDeregisterFaults(t *testing.T, c *subject) {
	if c.opts.Fault == nil {
		t.Skip("the backend has no fault seam (Options.Fault)")
	}
	for step := 0; ; step++ {
		id := c.id(fmt.Sprintf("d%d", step))
		first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
		disarm, ok := c.opts.Fault(t, c.b, CallDeregister, step)
		if !ok {
			if step == 0 {
				t.Skip("the backend has no deregister step to fail")
			}
			break
		}
		st, err := c.b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: id, Host: "h1"})
		disarm()
		call := fmt.Sprintf("Deregister(%s) failing at step %d", id, step)
		if err == nil {
			t.Fatalf("%s: got %s and no error, want the fault to fail it", call, st)
		}
		b := c.retrier(t)
		if !checkFailure(t, call, err) {
			// A clean failure changed nothing: still bound, same identity.
			c.mustDeregister(t, b, id, "h2", registrar.DeregisterHostMismatch)
			c.unchanged(t, id, "h1", first.RoleID)
			c.mustDeregister(t, b, id, "h1", registrar.DeregisterRemoved)
		} else {
			regs, canList := c.listed(t, b)
			_, listed := regs[id]
			st, err := b.Deregister(context.Background(), registrar.DeregisterOp{RegistrationID: id, Host: "h1"})
			if err != nil || (st != registrar.DeregisterRemoved && st != registrar.DeregisterAbsent) {
				t.Fatalf("retry of %s: got %s, %v; want DeregisterRemoved or DeregisterAbsent", call, st, err)
			}
			// The listing holds the binding exactly when the retry still
			// had one to remove.
			if canList && listed != (st == registrar.DeregisterRemoved) {
				t.Errorf("retry of %s: got %s, but Registrations listed %s: %t", call, st, id, listed)
			}
		}
		c.mustDeregister(t, b, id, "h1", registrar.DeregisterAbsent)
		c.mustMint(t, b, c.op(id, "h2"), registrar.MintCreated)
	}
}

// oneCreated checks racing mints' results: each without error and with
// sound material, exactly one MintCreated and every other lost, and it
// returns the winner's op and the losers'. name says which op a message
// means.
func oneCreated(t *testing.T, rs []mintResult, lost registrar.MintStatus, name func(registrar.MintOp) string) (winner registrar.MintOp, losers []registrar.MintOp) {
	t.Helper()
	won := false
	for i, r := range rs {
		if r.err != nil {
			t.Fatalf("mint %d: %v", i, r.err)
		}
		checkMaterial(t, r.op, r.st, r.m)
		switch r.st {
		case registrar.MintCreated:
			if won {
				t.Fatalf("mint %s: a second MintCreated (the first: %s), want one and %s for the others", name(r.op), name(winner), lost)
			}
			winner, won = r.op, true
		case lost:
			losers = append(losers, r.op)
		default:
			t.Errorf("mint %s: got %s, want MintCreated for one and %s for the others", name(r.op), r.st, lost)
		}
	}
	if !won {
		t.Fatalf("no mint got MintCreated, want one")
	}
	return winner, losers
}
