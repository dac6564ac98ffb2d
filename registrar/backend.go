package registrar

import (
	"context"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Backend stores bindings (registration id → host, spec) and issues
// identities. The verbs call it only after the admission charge and the
// intent write, under the registration id's lock, and never see how it
// stores things. Implementations must be safe for concurrent use; the verbs
// serialise calls per registration id.
//
// A returned error means the backend failed (the verbs record
// backend_unavailable); every determined answer is a status.
//
// backend/backendtest.Run is this contract as one suite, which every
// implementation runs: each status below, the material's shape, concurrent
// calls for one registration id (as from two daemons on one store: exactly
// one MintCreated) and for overlapping ones, and the *PartialError rule.
type Backend interface {
	// Mint binds op.RegistrationID to (op.Host, op.Spec) and issues
	// material, atomically:
	//   - no binding → create binding and identity → MintCreated;
	//   - bound to another host → MintCollision (nothing changed);
	//   - bound to the same host with another spec → MintSpecConflict
	//     (nothing changed);
	//   - same host and spec → re-issue material → MintReissued.
	Mint(ctx context.Context, op MintOp) (MintStatus, Material, error)
	// Deregister removes op.RegistrationID's binding and identity:
	//   - no binding → DeregisterAbsent;
	//   - bound to another host → DeregisterHostMismatch (nothing changed);
	//   - else remove → DeregisterRemoved.
	Deregister(ctx context.Context, op DeregisterOp) (DeregisterStatus, error)
}

// MintOp is one mint's backend work.
type MintOp struct {
	RegistrationID string
	Host           string
	Spec           Spec
	// WrapTTL is the wrapped secret's lifetime from Now.
	WrapTTL time.Duration
	Now     time.Time
}

// DeregisterOp is one deregister's backend work.
type DeregisterOp struct {
	RegistrationID string
	Host           string
}

// MintStatus is the backend's answer to a mint.
type MintStatus uint8

const (
	MintCreated MintStatus = iota + 1
	MintReissued
	MintCollision
	MintSpecConflict
)

// DeregisterStatus is the backend's answer to a deregister.
type DeregisterStatus uint8

const (
	DeregisterRemoved DeregisterStatus = iota + 1
	DeregisterAbsent
	DeregisterHostMismatch
)

var (
	mintStatusNames       = vocab.NewEnum[MintStatus]("MintStatus", "MintStatus", []string{MintCreated: "MintCreated", MintReissued: "MintReissued", MintCollision: "MintCollision", MintSpecConflict: "MintSpecConflict"})
	deregisterStatusNames = vocab.NewEnum[DeregisterStatus]("DeregisterStatus", "DeregisterStatus", []string{DeregisterRemoved: "DeregisterRemoved", DeregisterAbsent: "DeregisterAbsent", DeregisterHostMismatch: "DeregisterHostMismatch"})
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
