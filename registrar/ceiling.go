package registrar

import (
	"context"
	"errors"
	"fmt"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// ErrNoLister is Rebuild's error when the backend implements no Lister:
// the ceilings cannot be counted from its registry.
var ErrNoLister = errors.New("registrar: Rebuild: the backend cannot list its registrations (it is no registrar.Lister)")

// SetCeilings puts the per-host instance ceilings in force from the next
// mint on (a reload of [registrar.components]' max_instances_per_host):
// perHost maps a component to the most live registrations one host may
// hold of it; a component absent, or mapped to 0, has none. The map is
// copied. The configuration sets it only for many-per-host components (one
// of another multiplicity holds at most one registration per host anyway).
//
// The counts do not depend on the ceilings, so no Rebuild is needed: a
// ceiling lowered below a host's live registrations refuses that host's
// new registrations until enough are deregistered, and never a remint.
func (v *Verbs) SetCeilings(perHost map[string]uint32) {
	c := make(map[string]uint32, len(perHost))
	for name, n := range perHost {
		if n != 0 {
			c[name] = n
		}
	}
	v.ceilings.Store(&c)
}

// Rebuild counts every registration of the registry again, under the
// authority in force, and puts the counts in force at once. The daemon
// calls it at start, before serving (the counts live in memory only, so
// this is also what recovers them after a crash); calling it again, after a
// reload or to resync with a registry an operator changed by hand, is
// harmless. Ceilings do not take part in the counts, and the policies'
// counts follow SetAuthority by themselves, so a reload needs no Rebuild
// for correct answers.
//
// Until the first Rebuild the verbs count from an empty registry.
//
// Verbs keep being served while it lists: the mints and deregisters made
// meanwhile are recorded and applied over the listing when it ends, and the
// mints still in flight keep their reservation, so no answer is wrong
// during or after a Rebuild; the count lock is held only to apply those
// and swap. One Rebuild runs at a time. On error the counts stay as they
// were. A backend that is no Lister gets ErrNoLister.
func (v *Verbs) Rebuild(ctx context.Context) error {
	l, ok := v.backend.(Lister)
	if !ok {
		return ErrNoLister
	}
	v.rebuilding.Lock()
	defer v.rebuilding.Unlock()
	v.tally.beginRebuild()
	s := newTallyState(v.authority.Load())
	err := l.Registrations(ctx, func(r Registration) error {
		s.remove(r.ID) // listed twice: the last wins
		s.add(r.ID, tallyEntry{component: r.Component, host: r.Host, owner: r.Owner})
		return nil
	})
	if err != nil {
		v.tally.abortRebuild()
		return fmt.Errorf("registrar: Rebuild: %w", err)
	}
	v.tally.finishRebuild(s)
	return nil
}

// reservation is one mint's part in the counts: MintOp.Reserve and MintOp.MayAct
// are its methods, and settle puts the backend's answer into the counts.
// The backend calls the methods one at a time, before Mint returns.
type reservation struct {
	t  *tally
	id string
	// entry is the registration the mint would create: the spec's
	// component (the one the registry records, and Rebuild counts), the
	// host, and the caller as its owner.
	entry     tallyEntry
	auth      *Authority
	policy    int
	perHost   uint32
	perPolicy uint32
	// touched: Reserve was called, so the counts may hold this mint's
	// slot. reserved: the last call was Reserve, and it took the slot.
	// ceiling and limit: what its last refusal reached.
	touched, reserved bool
	ceiling           vocab.Ceiling
	limit             uint32
	// asked: the last call was MayAct, about the owner seen.
	asked bool
	seen  string
}

// reservationFor is inv's reservation of id, minted by req: the ceilings
// loaded now, the caller's policy ceiling under inv's authority.
func (v *Verbs) reservationFor(inv *invocation, id string, req *MintRequest) *reservation {
	r := &reservation{
		t:      &v.tally,
		id:     id,
		entry:  tallyEntry{component: req.Spec.Component, host: req.Host, owner: inv.identity},
		auth:   inv.authp,
		policy: inv.policy,
	}
	r.perHost = (*v.ceilings.Load())[req.Spec.Component]
	if inv.auth != nil && inv.policy >= 0 {
		r.perPolicy = inv.auth.MaxRegistrations(inv.policy)
	}
	return r
}

// reserve is MintOp.Reserve.
func (r *reservation) reserve() bool {
	r.touched, r.asked = true, false
	r.ceiling, r.limit = r.t.reserve(r.id, r.entry, r.auth, r.perHost, r.perPolicy)
	r.reserved = r.ceiling == 0
	return r.reserved
}

// mayAct is MintOp.MayAct: the invocation's ownership check, remembering
// the owner it was asked about (always passed, so that a mint that
// completes a binding another mint claimed counts it as its owner's).
func (r *reservation) mayAct(owner string) bool {
	r.asked, r.seen, r.reserved = true, owner, false
	return r.auth == nil || (*r.auth).MayAct(r.policy, r.entry.owner, owner)
}

// settle puts the backend's answer into the counts:
//
//   - MintCreated: the registration is counted, as its owner's (the
//     caller's, or the claimant's when this mint completed a binding a
//     failed mint claimed, which the counts already held);
//   - MintCeilingReached after a refused reservation: nothing was added
//     (one after a reservation that took its slot is the backend's bug,
//     answered BackendUnavailable: the slot is released);
//   - a *PartialError after a reservation: the backend may or may not
//     have created the binding, so the slot stays taken (counting high
//     rather than letting a ceiling be passed); the retry settles it
//     (MintCreated counts it once, a new reservation replaces it), as do
//     a deregister of the id (removed or already absent) and the next
//     Rebuild;
//   - any other answer after a reservation: the mint did not create, the
//     slot is released;
//   - without a reservation, nothing changes: a remint, or a refusal of
//     an existing binding.
func (r *reservation) settle(status MintStatus, err error) {
	e := r.entry
	if !r.reserved && r.asked {
		e.owner = r.seen
	}
	switch {
	case err == nil && status == MintCreated:
		r.t.set(r.id, e)
	case err == nil && status == MintCeilingReached && !r.reserved, !r.touched:
	case isPartial(err) && (r.reserved || r.asked):
		r.t.set(r.id, e)
	default:
		r.t.clear(r.id)
	}
}

// settleDeregister puts a deregister's answer into the counts: removed
// or already absent, id is uncounted (its owner's policy and its host
// free the slot at once: the counts know them by id). A *PartialError
// keeps it counted until the retry or the next Rebuild; a refusal or a
// clean failure changed nothing.
func (v *Verbs) settleDeregister(id string, status DeregisterStatus, err error) {
	if err == nil && (status == DeregisterRemoved || status == DeregisterAbsent) {
		v.tally.clear(id)
	}
}

func isPartial(err error) bool {
	_, ok := errors.AsType[*PartialError](err)
	return ok
}

// refuseCeiling records an instance_ceiling refusal, naming the ceiling and
// its value in the answer and the record's detail.
func (v *Verbs) refuseCeiling(ctx context.Context, inv *invocation, id string, c vocab.Ceiling, limit uint32) error {
	err := v.refuse(ctx, inv, id, vocab.ReasonInstanceCeiling, fmt.Sprintf("%s %d", c, limit))
	if r, ok := err.(*RefusedError); ok {
		r.Ceiling, r.Limit = c, limit
	}
	return err
}
