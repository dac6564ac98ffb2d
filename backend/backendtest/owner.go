package backendtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// asker is a MayAct that answers allow and keeps the owners it was asked
// about. A backend may ask more than once for one call (a transaction run
// again), so the subtests check which owners were asked, not how often.
type asker struct {
	allow bool
	mu    sync.Mutex
	asked []string
}

func (a *asker) mayAct(owner string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, owner)
	return a.allow
}

// check fails t unless every question since the last check was about want
// (and there was one), or, for want nil, there was none; then it forgets
// them.
func (a *asker) check(t *testing.T, call string, want *string) {
	t.Helper()
	a.mu.Lock()
	asked := a.asked
	a.asked = nil
	a.mu.Unlock()
	if want == nil {
		if len(asked) != 0 {
			t.Errorf("%s: MayAct was asked about %q, want no question", call, asked)
		}
		return
	}
	if len(asked) == 0 {
		t.Errorf("%s: MayAct was not asked, want it asked about the owner %q", call, *want)
		return
	}
	if i := slices.IndexFunc(asked, func(o string) bool { return o != *want }); i >= 0 {
		t.Errorf("%s: MayAct was asked about the owner %q, want %q", call, asked[i], *want)
	}
}

func allow() *asker { return &asker{allow: true} }
func deny() *asker  { return &asker{allow: false} }

func owner(o string) *string { return &o }

// by is op minted by identity, asking a.
func by(op registrar.MintOp, identity string, a *asker) registrar.MintOp {
	op.Owner, op.MayAct = identity, a.mayAct
	return op
}

func deregisterOp(id, host string, a *asker) registrar.DeregisterOp {
	return registrar.DeregisterOp{RegistrationID: id, Host: host, MayAct: a.mayAct}
}

// deliver takes delivery of m (Options.Deliver) and returns the check that
// it still works, called once by stillWorks.
func (c *subject) deliver(t *testing.T, id string, m registrar.Material) func() error {
	t.Helper()
	if c.opts.Deliver == nil {
		return nil
	}
	return c.opts.Deliver(t, c.b, id, m)
}

// stillWorks fails t unless the delivered material of id still works after
// what, which must have changed nothing.
func stillWorks(t *testing.T, works func() error, id, what string) {
	t.Helper()
	if works == nil {
		return
	}
	if err := works(); err != nil {
		t.Errorf("the material delivered for %s before %s no longer works: %v", id, what, err)
	}
}

func testOwnerRecorded(t *testing.T, c *subject) {
	id := c.id("a")
	a := allow()
	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerA, a), registrar.MintCreated)
	a.check(t, "the first mint", nil) // there was no owner to ask about

	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerB, a), registrar.MintReissued)
	a.check(t, "a remint by another identity", owner(ownerA))
	// That remint, by an identity MayAct let act, did not take it over.
	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerA, a), registrar.MintReissued)
	a.check(t, "a remint after another identity's", owner(ownerA))

	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h1", a), registrar.DeregisterRemoved)
	a.check(t, "the deregister", owner(ownerA))
	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h1", a), registrar.DeregisterAbsent)
	a.check(t, "a deregister of an unbound id", nil)

	// Removal takes the owner with it: the next first mint records its own.
	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerB, a), registrar.MintCreated)
	a.check(t, "the first mint after removal", nil)
	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerA, a), registrar.MintReissued)
	a.check(t, "a remint after the removal", owner(ownerB))
}

func testMintNotOwner(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	works := c.deliver(t, id, first)
	d := deny()
	op := by(c.op(id, "h1"), ownerB, d)
	op.Now, op.WrapTTL = now.Add(time.Minute), 60*time.Second
	c.mustMint(t, c.b, op, registrar.MintNotOwner)
	d.check(t, "a remint by another identity", owner(ownerA))
	stillWorks(t, works, id, "a remint MayAct refused")
	c.unchanged(t, id, "h1", first.RoleID)
}

func testDeregisterNotOwner(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	works := c.deliver(t, id, first)
	d := deny()
	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h1", d), registrar.DeregisterNotOwner)
	d.check(t, "a deregister by another identity", owner(ownerA))
	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h1", d), registrar.DeregisterNotOwner)
	stillWorks(t, works, id, "two deregisters MayAct refused")
	c.unchanged(t, id, "h1", first.RoleID)
	c.mustDeregister(t, c.b, id, "h1", registrar.DeregisterRemoved)
}

func testOwnerCheckedFirst(t *testing.T, c *subject) {
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	works := c.deliver(t, id, first)
	otherSpec := func(op registrar.MintOp) registrar.MintOp {
		op.Spec.Reload = "systemctl restart review"
		return op
	}
	for _, tc := range []struct {
		name string
		op   registrar.MintOp
		// otherwise is the answer when MayAct lets the caller act.
		otherwise registrar.MintStatus
	}{
		{"from another host", c.op(id, "h2"), registrar.MintCollision},
		{"with another spec", otherSpec(c.op(id, "h1")), registrar.MintSpecConflict},
		{"from another host with another spec", otherSpec(c.op(id, "h2")), registrar.MintCollision},
	} {
		d, a := deny(), allow()
		c.mustMint(t, c.b, by(tc.op, ownerB, d), registrar.MintNotOwner)
		d.check(t, "a mint "+tc.name+" by another identity", owner(ownerA))
		c.mustMint(t, c.b, by(tc.op, ownerB, a), tc.otherwise)
		a.check(t, "a mint "+tc.name+" MayAct allows", owner(ownerA))
	}
	d, a := deny(), allow()
	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h2", d), registrar.DeregisterNotOwner)
	d.check(t, "a deregister from another host by another identity", owner(ownerA))
	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h2", a), registrar.DeregisterHostMismatch)
	a.check(t, "a deregister from another host MayAct allows", owner(ownerA))
	stillWorks(t, works, id, "refused mints and deregisters")
	c.unchanged(t, id, "h1", first.RoleID)
}

func testUnownedBinding(t *testing.T, c *subject) {
	if c.opts.DropOwner == nil {
		t.Skip("the backend cannot store a binding without an owner (Options.DropOwner)")
	}
	id := c.id("a")
	first := c.mustMint(t, c.b, c.op(id, "h1"), registrar.MintCreated)
	c.opts.DropOwner(t, c.b, id)
	works := c.deliver(t, id, first)

	// Not even the identity that minted it owns it now: it is the
	// operators', and MayAct is told so.
	d := deny()
	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerA, d), registrar.MintNotOwner)
	d.check(t, "a remint of a binding stored without an owner", owner(""))
	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h1", d), registrar.DeregisterNotOwner)
	d.check(t, "a deregister of a binding stored without an owner", owner(""))
	stillWorks(t, works, id, "a refused remint and deregister of a binding stored without an owner")

	// A remint MayAct allows keeps it unowned: it is not a first mint.
	a := allow()
	m := c.mustMint(t, c.b, by(c.op(id, "h1"), ownerA, a), registrar.MintReissued)
	a.check(t, "an allowed remint of a binding stored without an owner", owner(""))
	if m.RoleID != first.RoleID {
		t.Errorf("role id of the remint: got %q, want the binding's %q", m.RoleID, first.RoleID)
	}
	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerA, a), registrar.MintReissued)
	a.check(t, "the remint after it", owner(""))
	c.mustDeregisterOp(t, c.b, deregisterOp(id, "h1", a), registrar.DeregisterRemoved)
	a.check(t, "an allowed deregister", owner(""))
}

func testConcurrentOwners(t *testing.T, c *subject) {
	id := c.id("a")
	ops := make([]registrar.MintOp, c.opts.Concurrency)
	for i := range ops {
		self := fmt.Sprintf("identity-%d", i)
		ops[i] = c.op(id, "h1")
		ops[i].Owner, ops[i].MayAct = self, func(owner string) bool { return owner == self }
	}
	won, _ := oneCreated(t, mintAll(c.b, ops), registrar.MintNotOwner, func(op registrar.MintOp) string { return "by " + op.Owner })
	winner := won.Owner
	a := allow()
	c.mustMint(t, c.b, by(c.op(id, "h1"), ownerA, a), registrar.MintReissued)
	a.check(t, "a remint after the race", owner(winner))
	if st, err := c.b.Deregister(context.Background(), deregisterOp(id, "h1", a)); err != nil || st != registrar.DeregisterRemoved {
		t.Errorf("Deregister(%s): got %s, %v; want DeregisterRemoved", id, st, err)
	}
}
