// Package registrartest holds the backends the tests of several packages
// share: one that fails the test if reached, and an in-memory one that fails
// the test if two calls for one registration id overlap. It is test support:
// production code never imports it (cmd/registrar-otel's deptest holds that).
package registrartest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/registrar-otel/registrar-otel/registrar"
)

// Errorfer is the part of testing.TB the fakes report through.
type Errorfer interface {
	Errorf(format string, args ...any)
}

// FailingBackend is the seam that proves no backend work happened: any
// call reports a test error.
type FailingBackend struct{ T Errorfer }

var _ registrar.Backend = FailingBackend{}

// Mint reports the call and fails.
func (f FailingBackend) Mint(context.Context, registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	f.T.Errorf("backend Mint reached")
	return 0, registrar.Material{}, errors.New("unreachable")
}

// Deregister reports the call and fails.
func (f FailingBackend) Deregister(context.Context, registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	f.T.Errorf("backend Deregister reached")
	return 0, errors.New("unreachable")
}

// Backend is an in-memory registrar.Backend with the embedded backend's
// statuses; it passes backend/backendtest's contract suite. A binding's
// role id is new with each binding ("role-<id>-<n>") and each mint issues a
// new wrapped secret id ("secret-<n>"). A binding records the owner its
// first mint named, and every call on an existing binding asks the op's
// MayAct first; a mint of an unbound id asks its Reserve before anything
// else. It lists its bindings (registrar.Lister), in id order. With a
// non-nil T it reports two overlapping calls for one registration id (the
// verbs must serialise them). Safe for concurrent use.
type Backend struct {
	// Err, if set, is returned by every call before it changes anything
	// (a failing backend).
	Err error
	// Partial, if set, fails a call after it changed the registry, as a
	// backend without transactions does: a first mint claims the binding
	// and returns a *registrar.PartialError wrapping Partial (a mint of
	// the same host and spec completes it: MintCreated); a deregister that
	// would remove removes, and returns one (its retry is absent).
	Partial error
	// Before, if set, runs at the start of every call.
	Before func()

	t        Errorfer
	mu       sync.Mutex
	bindings map[string]binding
	inFlight map[string]int
	calls    int
	issued   int // role ids and secrets issued, for fresh values
}

var (
	_ registrar.Backend = (*Backend)(nil)
	_ registrar.Lister  = (*Backend)(nil)
)

type binding struct {
	host   string
	spec   registrar.Spec
	roleID string
	owner  string
	// secret is the last wrapped secret id issued: the only one Valid.
	secret string
	// claimed: a first mint claimed it and failed before completing it.
	claimed bool
}

// NewBackend returns an empty backend reporting overlaps through t (nil:
// not checked).
func NewBackend(t Errorfer) *Backend {
	return &Backend{t: t, bindings: map[string]binding{}, inFlight: map[string]int{}}
}

func (b *Backend) enter(id string) {
	b.mu.Lock()
	b.calls++
	b.inFlight[id]++
	if b.inFlight[id] > 1 && b.t != nil {
		b.t.Errorf("two backend calls for %s overlap", id)
	}
	before := b.Before
	b.mu.Unlock()
	if before != nil {
		before()
	}
	if b.t != nil {
		runtime.Gosched() // widen the window an unserialised caller would hit
	}
}

func (b *Backend) leave(id string) {
	b.mu.Lock()
	b.inFlight[id]--
	b.mu.Unlock()
}

// Mint binds, re-issues, or answers a collision or a spec conflict.
func (b *Backend) Mint(_ context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	b.enter(op.RegistrationID)
	defer b.leave(op.RegistrationID)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Err != nil {
		return 0, registrar.Material{}, b.Err
	}
	cur, ok := b.bindings[op.RegistrationID]
	status := registrar.MintReissued
	switch {
	case ok && !op.Permits(cur.owner):
		return registrar.MintNotOwner, registrar.Material{}, nil
	case !ok && !op.Reserves():
		return registrar.MintCeilingReached, registrar.Material{}, nil
	case !ok:
		if b.Partial != nil {
			b.bindings[op.RegistrationID] = binding{host: op.Host, spec: op.Spec, owner: op.Owner, claimed: true}
			return 0, registrar.Material{}, &registrar.PartialError{Changed: []string{"binding claimed"}, Err: b.Partial}
		}
		cur.owner = op.Owner
		fallthrough
	case cur.claimed && cur.host == op.Host && cur.spec == op.Spec:
		b.issued++
		cur = binding{host: op.Host, spec: op.Spec, owner: cur.owner, roleID: fmt.Sprintf("role-%s-%d", op.RegistrationID, b.issued)}
		status = registrar.MintCreated
	case cur.host != op.Host:
		return registrar.MintCollision, registrar.Material{}, nil
	case cur.spec != op.Spec:
		return registrar.MintSpecConflict, registrar.Material{}, nil
	}
	b.issued++
	cur.secret = fmt.Sprintf("secret-%d", b.issued)
	b.bindings[op.RegistrationID] = cur
	return status, registrar.Material{RoleID: cur.roleID, WrappedSecretID: cur.secret, ExpiresAt: op.Now.Add(op.WrapTTL)}, nil
}

// Deregister removes, or answers absent or a host mismatch.
func (b *Backend) Deregister(_ context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	b.enter(op.RegistrationID)
	defer b.leave(op.RegistrationID)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Err != nil {
		return 0, b.Err
	}
	cur, ok := b.bindings[op.RegistrationID]
	switch {
	case !ok:
		return registrar.DeregisterAbsent, nil
	case !op.Permits(cur.owner):
		return registrar.DeregisterNotOwner, nil
	case cur.host != op.Host:
		return registrar.DeregisterHostMismatch, nil
	}
	delete(b.bindings, op.RegistrationID)
	if b.Partial != nil {
		return 0, &registrar.PartialError{Changed: []string{"binding removed"}, Err: b.Partial}
	}
	return registrar.DeregisterRemoved, nil
}

// Registrations lists every binding, claimed ones too, in id order,
// calling fn outside the backend's lock (after a copy): Err fails it
// before fn is called.
func (b *Backend) Registrations(ctx context.Context, fn func(registrar.Registration) error) error {
	b.mu.Lock()
	if b.Err != nil {
		b.mu.Unlock()
		return b.Err
	}
	regs := make([]registrar.Registration, 0, len(b.bindings))
	for id, cur := range b.bindings {
		regs = append(regs, registrar.Registration{ID: id, Host: cur.host, Component: cur.spec.Component, Owner: cur.owner})
	}
	b.mu.Unlock()
	slices.SortFunc(regs, func(x, y registrar.Registration) int { return strings.Compare(x.ID, y.ID) })
	for _, r := range regs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Has reports whether id is bound.
func (b *Backend) Has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.bindings[id]
	return ok
}

// Owner returns the owner id's binding recorded, and whether id is bound.
func (b *Backend) Owner(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, ok := b.bindings[id]
	return cur.owner, ok
}

// Valid reports whether wrappedSecretID is the last one issued for id: a
// remint replaces it, a removal ends it.
func (b *Backend) Valid(id, wrappedSecretID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, ok := b.bindings[id]
	return ok && !cur.claimed && cur.secret == wrappedSecretID
}

// DropOwner forgets id's owner, as if its binding had been stored before
// owners were recorded.
func (b *Backend) DropOwner(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.bindings[id]; ok {
		cur.owner = ""
		b.bindings[id] = cur
	}
}

// Calls returns how many calls reached the backend.
func (b *Backend) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}
