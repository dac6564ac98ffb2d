package registrar

import (
	"context"
	"time"
)

// Backend stores bindings (registration id → host, spec) and issues
// identities. The verbs call it only after the admission charge and the
// intent write, under the registration id's lock, and never see how it
// stores things. Implementations must be safe for concurrent use; the verbs
// serialise calls per registration id.
//
// A returned error means the backend failed (the verbs record
// backend_unavailable); every determined answer is a status.
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
