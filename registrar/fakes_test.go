package registrar_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
)

// memLog is an in-memory AuditLog. It validates every record the way the
// store does (audit.Marshal) and can be told to fail a phase.
type memLog struct {
	mu      sync.Mutex
	records []audit.Record
	fail    map[audit.Phase]error
	// onAppend runs before a record is kept, for ordering assertions.
	onAppend func(r *audit.Record)
}

func (m *memLog) Append(_ context.Context, r *audit.Record) error {
	if _, err := audit.Marshal(r); err != nil {
		return fmt.Errorf("memLog: invalid record: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.onAppend != nil {
		m.onAppend(r)
	}
	if err := m.fail[r.Phase]; err != nil {
		return err
	}
	m.records = append(m.records, *r)
	return nil
}

func (m *memLog) failPhase(p audit.Phase, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail == nil {
		m.fail = map[audit.Phase]error{}
	}
	m.fail[p] = err
}

func (m *memLog) all() []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Record(nil), m.records...)
}

func (m *memLog) count(p audit.Phase) int {
	n := 0
	for _, r := range m.all() {
		if r.Phase == p {
			n++
		}
	}
	return n
}

// failingBackend is the seam that proves no backend work happened: any call
// fails the test.
type failingBackend struct{ t testing.TB }

func (f failingBackend) Mint(context.Context, registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	f.t.Errorf("backend Mint reached")
	return 0, registrar.Material{}, errors.New("unreachable")
}

func (f failingBackend) Deregister(context.Context, registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	f.t.Errorf("backend Deregister reached")
	return 0, errors.New("unreachable")
}

// memBackend is an in-memory Backend that fails the test if two calls for
// one registration id ever overlap.
type memBackend struct {
	t        testing.TB
	mu       sync.Mutex
	bindings map[string]binding
	inFlight map[string]int
	calls    int
	err      error
	// before runs at the start of every call, for ordering assertions.
	before func()
}

type binding struct {
	host string
	spec registrar.Spec
}

func newMemBackend(t testing.TB) *memBackend {
	return &memBackend{t: t, bindings: map[string]binding{}, inFlight: map[string]int{}}
}

func (b *memBackend) enter(id string) {
	b.mu.Lock()
	b.calls++
	b.inFlight[id]++
	if b.inFlight[id] > 1 {
		b.t.Errorf("two backend calls for %s overlap", id)
	}
	before := b.before
	b.mu.Unlock()
	if before != nil {
		before()
	}
	runtime.Gosched() // widen the window an unserialised caller would hit
}

func (b *memBackend) leave(id string) {
	b.mu.Lock()
	b.inFlight[id]--
	b.mu.Unlock()
}

func (b *memBackend) Mint(_ context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	b.enter(op.RegistrationID)
	defer b.leave(op.RegistrationID)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, registrar.Material{}, b.err
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

func (b *memBackend) Deregister(_ context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	b.enter(op.RegistrationID)
	defer b.leave(op.RegistrationID)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, b.err
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

func (b *memBackend) has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.bindings[id]
	return ok
}

// recSink records limited events and forwards them to a counting sink.
type recSink struct {
	mu     sync.Mutex
	events []limiter.Event
	count  *counting.Sink
}

func (s *recSink) Limited(ctx context.Context, ev limiter.Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
	s.count.Limited(ctx, ev)
}

func (s *recSink) all() []limiter.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]limiter.Event(nil), s.events...)
}

// harness is the verbs wired to fakes.
type harness struct {
	v    *registrar.Verbs
	lim  *limiter.Limiter
	log  *memLog
	sink *recSink
}

var testComponents = map[string]config.Multiplicity{
	"review":        config.ManyPerHost,
	"edge-proxy":    config.OnePerHost,
	"control-plane": config.OnePerDeployment,
	"Bad_Component": config.OnePerHost, // not a label: derivation fails
}

func newHarness(t testing.TB, prBurst, admBurst uint32, backend registrar.Backend) *harness {
	t.Helper()
	sink := &recSink{count: counting.New()}
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: prBurst, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: admBurst, RefillInterval: 500 * time.Millisecond},
		Now:                func() limiter.Instant { return 0 }, // time stands still
	}, sink)
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{}
	v, err := registrar.New(registrar.Config{Components: testComponents, MaxWrapTTLSeconds: 1800}, registrar.Deps{
		Limiter: lim,
		Audit:   log,
		Backend: backend,
		Now:     func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{v: v, lim: lim, log: log, sink: sink}
}

func goodMint() registrar.MintRequest {
	return registrar.MintRequest{
		CallerIdentity: "unix-peer:uid=1000",
		ServiceName:    "review",
		Host:           "h1",
		Instance:       7,
		Component:      "review",
		Spec:           registrar.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"},
		WrapTTLSeconds: 300,
	}
}

func goodDeregister() registrar.DeregisterRequest {
	return registrar.DeregisterRequest{CallerIdentity: "unix-peer:uid=1000", ServiceName: "review", Host: "h1", Instance: 7, Component: "review"}
}
