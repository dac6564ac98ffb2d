// Package fakes holds the in-memory stand-ins the tests of several packages
// share: an audit log that validates every record the way the store does,
// a backend that fails the test if reached, and an in-memory backend that
// fails the test if two calls for one registration id overlap. It is for
// tests only.
package fakes

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// Errorfer is the part of testing.TB the fakes report through.
type Errorfer interface {
	Errorf(format string, args ...any)
}

// AuditLog is an in-memory registrar.AuditLog (and coalesce.Appender). It
// validates every record with audit.Marshal, as the store does, and can be
// told to fail a phase. Safe for concurrent use.
type AuditLog struct {
	// Discard keeps only a count and skips validation (benchmarks).
	Discard bool
	// OnAppend, if set, runs (under the log's lock) before a record is
	// kept, for ordering assertions.
	OnAppend func(r *audit.Record)

	mu      sync.Mutex
	records []audit.Record
	n       int
	fail    map[audit.Phase]error
	batches int
}

// Append validates and keeps r, or returns the error set for its phase.
func (m *AuditLog) Append(_ context.Context, r *audit.Record) error {
	if !m.Discard {
		if _, err := audit.Marshal(r); err != nil {
			return fmt.Errorf("fakes.AuditLog: invalid record: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.OnAppend != nil {
		m.OnAppend(r)
	}
	if err := m.fail[r.Phase]; err != nil {
		return err
	}
	m.n++
	if !m.Discard {
		m.records = append(m.records, *r)
	}
	return nil
}

// FailPhase makes every later append of phase p return err (nil clears it).
func (m *AuditLog) FailPhase(p audit.Phase, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail == nil {
		m.fail = map[audit.Phase]error{}
	}
	m.fail[p] = err
}

// Records returns a copy of the records kept, in append order.
func (m *AuditLog) Records() []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Record(nil), m.records...)
}

// Count returns how many kept records have phase p.
func (m *AuditLog) Count(p audit.Phase) int {
	n := 0
	for _, r := range m.Records() {
		if r.Phase == p {
			n++
		}
	}
	return n
}

// Len returns how many appends succeeded (Discard included).
func (m *AuditLog) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
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
// statuses. With a non-nil T it reports two overlapping calls for one
// registration id (the verbs must serialise them). Safe for concurrent use.
type Backend struct {
	// Err, if set, is returned by every call (a failing backend).
	Err error
	// Before, if set, runs at the start of every call.
	Before func()

	t        Errorfer
	mu       sync.Mutex
	bindings map[string]binding
	inFlight map[string]int
	calls    int
}

var _ registrar.Backend = (*Backend)(nil)

type binding struct {
	host string
	spec registrar.Spec
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
	mat := registrar.Material{RoleID: "role-" + op.RegistrationID, WrappedSecretID: "secret", ExpiresAt: op.Now.Add(op.WrapTTL)}
	cur, ok := b.bindings[op.RegistrationID]
	switch {
	case !ok:
		b.bindings[op.RegistrationID] = binding{op.Host, op.Spec}
		return registrar.MintCreated, mat, nil
	case cur.host != op.Host:
		return registrar.MintCollision, registrar.Material{}, nil
	case cur.spec != op.Spec:
		return registrar.MintSpecConflict, registrar.Material{}, nil
	}
	return registrar.MintReissued, mat, nil
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
	case cur.host != op.Host:
		return registrar.DeregisterHostMismatch, nil
	}
	delete(b.bindings, op.RegistrationID)
	return registrar.DeregisterRemoved, nil
}

// Has reports whether id is bound.
func (b *Backend) Has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.bindings[id]
	return ok
}

// Calls returns how many calls reached the backend.
func (b *Backend) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}
