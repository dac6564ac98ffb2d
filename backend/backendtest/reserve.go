package backendtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// reserver is a MintOp.Reserve that answers allow and counts the times it
// was asked. A backend may ask more than once for one call (a transaction
// run again), so the subtests check whether it was asked, not how often.
type reserver struct {
	allow bool
	asked atomic.Int64
}

func (r *reserver) reserve() bool {
	r.asked.Add(1)
	return r.allow
}

// on is op reserving with r.
func (r *reserver) on(op registrar.MintOp) registrar.MintOp {
	op.Reserve = r.reserve
	return op
}

// check fails t unless r was asked since the last check exactly when want.
func (r *reserver) check(t *testing.T, call string, want bool) {
	t.Helper()
	switch asked := r.asked.Swap(0); {
	case want && asked == 0:
		t.Errorf("%s: Reserve was not asked, want it asked (the mint creates a binding)", call)
	case !want && asked != 0:
		t.Errorf("%s: Reserve was asked %d times, want never (the mint creates no binding)", call, asked)
	}
}

func testReserveAskedWhenCreating(t *testing.T, c *subject) {
	id := c.id("a")
	r := &reserver{allow: true}
	first := c.mustMint(t, c.b, r.on(c.op(id, "h1")), registrar.MintCreated)
	r.check(t, "the first mint", true)
	c.mustMint(t, c.b, r.on(c.op(id, "h1")), registrar.MintReissued)
	r.check(t, "a remint", false)
	c.mustMint(t, c.b, r.on(c.op(id, "h2")), registrar.MintCollision)
	r.check(t, "a mint from another host", false)
	other := c.op(id, "h1")
	other.Spec.Reload = "systemctl restart review"
	c.mustMint(t, c.b, r.on(other), registrar.MintSpecConflict)
	r.check(t, "a mint with another spec", false)
	c.mustMint(t, c.b, r.on(by(c.op(id, "h1"), ownerB, deny())), registrar.MintNotOwner)
	r.check(t, "a mint MayAct refuses", false)

	// A remint is never refused by a ceiling: a Reserve that would refuse
	// is not even asked.
	refuse := &reserver{allow: false}
	c.mustMint(t, c.b, refuse.on(c.op(id, "h1")), registrar.MintReissued)
	refuse.check(t, "a remint with a Reserve that refuses", false)
	c.unchanged(t, id, "h1", first.RoleID)

	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterRemoved)
	c.mustMint(t, c.b, r.on(c.op(id, "h2")), registrar.MintCreated)
	r.check(t, "the first mint after removal", true)
}

func testReserveRefusalChangesNothing(t *testing.T, c *subject) {
	id := c.id("a")
	refuse := &reserver{allow: false}
	c.mustMint(t, c.b, refuse.on(c.op(id, "h1")), registrar.MintCeilingReached)
	refuse.check(t, "a first mint Reserve refuses", true)
	c.mustMint(t, c.b, refuse.on(c.op(id, "h1")), registrar.MintCeilingReached)
	refuse.check(t, "the same mint again", true)
	if regs, ok := c.listed(t, c.b); ok {
		if _, listed := regs[id]; listed {
			t.Errorf("Registrations lists %s after its only mint was refused, want nothing bound", id)
		}
	}
	// Nothing was claimed: a deregister finds nothing, and another host
	// (which would collide with any claim) creates it.
	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterAbsent)
	a := allow()
	c.mustMint(t, c.b, by(c.op(id, "h2"), ownerB, a), registrar.MintCreated)
	a.check(t, "the first mint after a refused one", nil)
	c.mustMint(t, c.b, by(c.op(id, "h2"), ownerA, a), registrar.MintReissued)
	a.check(t, "a remint after it", owner(ownerB))
}

func testConcurrentReserveOnce(t *testing.T, c *subject) {
	id := c.id("a")
	ops := make([]registrar.MintOp, c.opts.Concurrency)
	rs := make([]*reserver, len(ops))
	for i := range ops {
		rs[i] = &reserver{allow: true}
		ops[i] = rs[i].on(c.op(id, "h1"))
	}
	created := 0
	for i, r := range mintAll(c.b, ops) {
		if r.err != nil {
			t.Fatalf("mint %d: %v", i, r.err)
		}
		asked := rs[i].asked.Load() != 0
		switch {
		case r.st == registrar.MintCreated:
			created++
			if !asked {
				t.Errorf("mint %d: MintCreated without asking Reserve, want it asked", i)
			}
		case asked:
			t.Errorf("mint %d: %s after asking Reserve, want Reserve asked only by the mint that creates", i, r.st)
		}
	}
	if created != 1 {
		t.Errorf("%d concurrent mints of one id: got %d MintCreated, want 1", len(ops), created)
	}
}

func testConcurrentLastSlot(t *testing.T, c *subject) {
	// Distinct ids racing for one slot: a Reserve that grants it once.
	var slots atomic.Int64
	slots.Store(1)
	take := func() bool { return slots.Add(-1) >= 0 }
	ops := make([]registrar.MintOp, c.opts.Concurrency)
	for i := range ops {
		ops[i] = c.op(c.id(fmt.Sprintf("s%d", i)), "h1")
		ops[i].Reserve = take
	}
	_, losers := oneCreated(t, mintAll(c.b, ops), registrar.MintCeilingReached, func(op registrar.MintOp) string { return "of " + op.RegistrationID })
	for _, op := range losers {
		c.mustDeregister(t, c.b, op.RegistrationID, "h1", registrar.DeregisterAbsent)
	}
}

// listed returns b's registrations of this subtest by id, and false when
// b is no registrar.Lister.
func (c *subject) listed(t *testing.T, b registrar.Backend) (map[string]registrar.Registration, bool) {
	t.Helper()
	l, ok := b.(registrar.Lister)
	if !ok {
		return nil, false
	}
	regs := map[string]registrar.Registration{}
	err := l.Registrations(context.Background(), func(r registrar.Registration) error {
		if !strings.HasPrefix(r.ID, c.prefix+"-") {
			return nil // another subtest's, on a shared store
		}
		if _, dup := regs[r.ID]; dup {
			t.Errorf("Registrations lists %s twice", r.ID)
		}
		regs[r.ID] = r
		return nil
	})
	if err != nil {
		t.Fatalf("Registrations: %v", err)
	}
	return regs, true
}

func testListerListsLiveBindings(t *testing.T, c *subject) {
	if _, ok := c.b.(registrar.Lister); !ok {
		t.Skip("the backend is no registrar.Lister")
	}
	if regs, _ := c.listed(t, c.b); len(regs) != 0 {
		t.Fatalf("Registrations of a subtest that minted nothing: got %v, want none", regs)
	}
	agent := func(op registrar.MintOp) registrar.MintOp {
		op.Spec.Component = "agent"
		return op
	}
	want := map[string]registrar.Registration{}
	mint := func(op registrar.MintOp, owner string) {
		t.Helper()
		op.Owner = owner
		c.mustMint(t, c.b, op, registrar.MintCreated)
		want[op.RegistrationID] = registrar.Registration{ID: op.RegistrationID, Host: op.Host, Component: op.Spec.Component, Owner: owner}
	}
	mint(c.op(c.id("a"), "h1"), ownerA)
	mint(agent(c.op(c.id("b"), "h2")), ownerB)
	mint(c.op(c.id("c"), "h1"), "")
	mint(c.op(c.id("gone"), "h3"), ownerA)
	c.mustDeregister(t, c.b, c.id("gone"), "h3", registrar.DeregisterRemoved)
	delete(want, c.id("gone"))
	refuse := &reserver{allow: false}
	c.mustMint(t, c.b, refuse.on(c.op(c.id("refused"), "h1")), registrar.MintCeilingReached)
	// A remint by another identity keeps the owner listed.
	c.mustMint(t, c.b, by(c.op(c.id("a"), "h1"), ownerB, allow()), registrar.MintReissued)
	if c.opts.DropOwner != nil {
		mint(c.op(c.id("unowned"), "h2"), ownerB)
		c.opts.DropOwner(t, c.b, c.id("unowned"))
		r := want[c.id("unowned")]
		r.Owner = ""
		want[r.ID] = r
	}
	got, _ := c.listed(t, c.b)
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if got[id] != want[id] {
			t.Errorf("Registrations: got %+v for %s, want %+v", got[id], id, want[id])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[id]; !ok {
			t.Errorf("Registrations lists %+v, which is not bound", got[id])
		}
	}
	// A fresh backend on the same store lists the same.
	if c.opts.Restart != nil {
		again, _ := c.listed(t, c.opts.Restart(t, c.b))
		if !maps.Equal(again, got) {
			t.Errorf("Registrations after a restart: got %v, want %v", again, got)
		}
	}
}

func testListerStopsAtFnsError(t *testing.T, c *subject) {
	l, ok := c.b.(registrar.Lister)
	if !ok {
		t.Skip("the backend is no registrar.Lister")
	}
	for _, name := range []string{"a", "b", "c"} {
		c.mustMint(t, c.b, c.op(c.id(name), "h1"), registrar.MintCreated)
	}
	stop := errors.New("stop here")
	var mu sync.Mutex
	calls := 0
	err := l.Registrations(context.Background(), func(registrar.Registration) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("Registrations with an fn that fails: got %v, want fn's error", err)
	}
	if calls != 1 {
		t.Errorf("Registrations called fn %d times after its error, want once", calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Registrations(ctx, func(registrar.Registration) error { return nil }); err == nil {
		t.Errorf("Registrations with a cancelled context: got no error, want the context's")
	}
}
