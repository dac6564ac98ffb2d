package registrar

import (
	"context"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Backend stores bindings (registration id → host, spec, owner) and issues
// identities. The verbs call it only after the admission charge and the
// intent write, under the registration id's lock, and never see how it
// stores things. Implementations must be safe for concurrent use; the verbs
// serialise calls per registration id.
//
// A returned error means the backend failed (the verbs record
// backend_unavailable); every determined answer is a status.
//
// Ownership: a binding records its owner, the MintOp.Owner of the mint that
// created it, and keeps it until it is removed (a remint never changes it,
// whoever makes it). Whenever a binding exists, the first check of a call
// is op.MayAct(owner), before the host, spec and host-mismatch checks, so a
// caller that may not act learns only that: MintNotOwner or
// DeregisterNotOwner, and nothing of the registration changed (the
// previously issued material still works). A binding stored before owners
// were recorded has the owner "". The check is part of the call's
// atomicity: it judges the binding the call then acts on.
//
// Reservation: a mint that is about to create a binding (none exists)
// first asks op.Reserve, inside the same atomicity as the creation and
// before anything is written; false answers MintCeilingReached and
// nothing changed. Reserve is never called when a binding exists: a
// remint, every refusal of an existing binding, and the completion of a
// binding a failed mint claimed (a *PartialError; its retry answers
// MintCreated without a reservation, since the claim is already a
// binding). It may be called more than once for one call (a transaction
// run again): the call's status says whether it created.
//
// backend/backendtest.Run is this contract as one suite, which every
// implementation runs: each status below, the material's shape, the owner
// and the order of the checks, the reservation, concurrent calls for one
// registration id (as from two daemons on one store: exactly one
// MintCreated) and for overlapping ones, the *PartialError rule, and
// Lister when the backend implements it.
type Backend interface {
	// Mint binds op.RegistrationID to (op.Host, op.Spec, op.Owner) and
	// issues material, atomically:
	//   - no binding, and op.Reserve refuses → MintCeilingReached
	//     (nothing changed; op.MayAct is not called);
	//   - no binding → create binding and identity, recording op.Owner
	//     → MintCreated (op.MayAct is not called);
	//   - op.MayAct refuses the binding's owner → MintNotOwner (nothing
	//     changed);
	//   - bound to another host → MintCollision (nothing changed);
	//   - bound to the same host with another spec → MintSpecConflict
	//     (nothing changed);
	//   - same host and spec → re-issue material, keeping the owner →
	//     MintReissued.
	Mint(ctx context.Context, op MintOp) (MintStatus, Material, error)
	// Deregister removes op.RegistrationID's binding and identity:
	//   - no binding → DeregisterAbsent (op.MayAct is not called);
	//   - op.MayAct refuses the binding's owner → DeregisterNotOwner
	//     (nothing changed);
	//   - bound to another host → DeregisterHostMismatch (nothing changed);
	//   - else remove → DeregisterRemoved.
	Deregister(ctx context.Context, op DeregisterOp) (DeregisterStatus, error)
}

// MintOp is one mint's backend work.
type MintOp struct {
	RegistrationID string
	Host           string
	Spec           Spec
	// Owner is the caller identity a binding this mint creates records as
	// its owner; "" records none (as a binding stored before owners were
	// recorded). A mint of an existing binding never changes its owner.
	Owner string
	// MayAct, when a binding exists, is asked whether the caller may act
	// on it, with the binding's recorded owner ("" for a binding stored
	// before owners were recorded); false answers MintNotOwner. nil means
	// anyone may act. It must be pure and cheap: a backend may call it
	// inside its transaction, and more than once for one call.
	MayAct func(owner string) bool
	// Reserve, when no binding exists, is asked whether this mint may
	// create one: inside the mint's atomicity, after the binding was read
	// and before anything is written, exactly when the mint is about to
	// create (never when a binding exists, whatever its state). false
	// answers MintCeilingReached and nothing is written. nil reserves
	// always. The verbs' takes a slot of the instance ceilings; it is
	// cheap, takes no lock a backend holds, and is safe to call again for
	// the same call (a re-run transaction).
	Reserve func() bool
	// WrapTTL is the wrapped secret's lifetime from Now.
	WrapTTL time.Duration
	Now     time.Time
}

// DeregisterOp is one deregister's backend work.
type DeregisterOp struct {
	RegistrationID string
	Host           string
	// MayAct is as MintOp's: false answers DeregisterNotOwner.
	MayAct func(owner string) bool
}

// Permits reports whether op.MayAct lets the caller act on a binding
// owned by owner: always when MayAct is nil.
func (op MintOp) Permits(owner string) bool { return op.MayAct == nil || op.MayAct(owner) }

// Reserves reports whether op.Reserve lets the mint create a binding:
// always when Reserve is nil.
func (op MintOp) Reserves() bool { return op.Reserve == nil || op.Reserve() }

// Permits is MintOp.Permits for a deregister.
func (op DeregisterOp) Permits(owner string) bool { return op.MayAct == nil || op.MayAct(owner) }

// MintStatus is the backend's answer to a mint.
type MintStatus uint8

const (
	MintCreated MintStatus = iota + 1
	MintReissued
	MintCollision
	MintSpecConflict
	// MintNotOwner: MintOp.MayAct refused the binding's owner; nothing
	// changed.
	MintNotOwner
	// MintCeilingReached: there was no binding and MintOp.Reserve
	// refused to create one; nothing changed.
	MintCeilingReached
)

// DeregisterStatus is the backend's answer to a deregister.
type DeregisterStatus uint8

const (
	DeregisterRemoved DeregisterStatus = iota + 1
	DeregisterAbsent
	DeregisterHostMismatch
	// DeregisterNotOwner: DeregisterOp.MayAct refused the binding's
	// owner; nothing changed.
	DeregisterNotOwner
)

var (
	mintStatusNames       = vocab.NewEnum[MintStatus]("MintStatus", "MintStatus", []string{MintCreated: "MintCreated", MintReissued: "MintReissued", MintCollision: "MintCollision", MintSpecConflict: "MintSpecConflict", MintNotOwner: "MintNotOwner", MintCeilingReached: "MintCeilingReached"})
	deregisterStatusNames = vocab.NewEnum[DeregisterStatus]("DeregisterStatus", "DeregisterStatus", []string{DeregisterRemoved: "DeregisterRemoved", DeregisterAbsent: "DeregisterAbsent", DeregisterHostMismatch: "DeregisterHostMismatch", DeregisterNotOwner: "DeregisterNotOwner"})
)

// String returns the constant's name, or MintStatus(N) for a value outside
// the set (a backend bug the contract suite reports by name).
func (s MintStatus) String() string { return mintStatusNames.String(s) }

// String returns the constant's name, or DeregisterStatus(N) for a value
// outside the set.
func (s DeregisterStatus) String() string {
	return deregisterStatusNames.String(s)
}

// PartialError is a backend failure after a call that changed, or may have
// changed, the registry: a mint that claimed its binding and then could not
// finish, or a deregister that removed the role and then could not remove
// the binding. The verbs answer it BackendUnavailable like any backend
// failure, but never as a clean refusal: the outcome record's detail starts
// with "partial:" and names the changes, the failure is logged at error
// level, and registrar.backend.partial counts it. A backend that returns it
// must converge when the same request is retried.
type PartialError struct {
	// Changed names, in order, the state-changing steps that completed or
	// may have completed, e.g. "binding claimed", "role written".
	Changed []string
	// Err is the failure that stopped the operation.
	Err error
}

func (e *PartialError) Error() string {
	return "partial: may have changed " + strings.Join(e.Changed, ", ") + "; then: " + e.Err.Error()
}

func (e *PartialError) Unwrap() error { return e.Err }
