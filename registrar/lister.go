package registrar

import (
	"context"
)

// Lister is a Backend that can list its registrations: what Verbs.Rebuild
// counts the instance ceilings from. backend/embedded, backend/openbao and
// the test fake implement it; backend/backendtest.Run holds it to its
// contract when the backend under test implements it.
type Lister interface {
	// Registrations calls fn once for every binding the backend holds,
	// in no particular order, and returns fn's first error (stopping
	// there), ctx's, or the backend's when it cannot read one. A binding
	// is listed whatever its state, including one a failed mint claimed
	// and did not complete (a *PartialError's): it holds its registration
	// id, and the retry that completes it answers MintCreated without a
	// reservation, so it must already be counted. fn must not call the
	// backend (a backend may hold a read transaction across the calls);
	// it is called from one goroutine at a time.
	//
	// A listing that runs while mints and deregisters change the registry
	// sees each binding as it was at some instant during the call: the
	// verbs' Rebuild records the changes they make meanwhile and applies
	// them over the listing.
	Registrations(ctx context.Context, fn func(Registration) error) error
}

// Registration is one listed binding: its registration id, the host it is
// bound to, its spec's component, and its recorded owner ("" for a binding
// stored before owners were recorded).
type Registration struct {
	ID, Host, Component, Owner string
}
