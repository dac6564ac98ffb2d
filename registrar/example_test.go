package registrar_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// memoryLog is an audit log in memory.
type memoryLog struct {
	mu      sync.Mutex
	records []audit.Record
}

func (l *memoryLog) Append(_ context.Context, r *audit.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, *r)
	return nil
}

// memoryBackend is a registrar.Backend and registrar.Lister in memory:
// bindings by registration id (it keeps no spec, and so answers no
// conflict of specs).
type memoryBackend struct {
	mu       sync.Mutex
	bindings map[string]registrar.Registration
}

func (b *memoryBackend) Mint(_ context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	mat := registrar.Material{RoleID: "role-" + op.RegistrationID, WrappedSecretID: "wrapped", ExpiresAt: op.Now.Add(op.WrapTTL)}
	switch bd, ok := b.bindings[op.RegistrationID]; {
	case !ok && !op.Reserves():
		return registrar.MintCeilingReached, registrar.Material{}, nil
	case !ok:
		b.bindings[op.RegistrationID] = registrar.Registration{ID: op.RegistrationID, Host: op.Host, Component: op.Spec.Component, Owner: op.Owner}
		return registrar.MintCreated, mat, nil
	case !op.Permits(bd.Owner):
		return registrar.MintNotOwner, registrar.Material{}, nil
	case bd.Host != op.Host:
		return registrar.MintCollision, registrar.Material{}, nil
	}
	return registrar.MintReissued, mat, nil
}

func (b *memoryBackend) Deregister(_ context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch bd, ok := b.bindings[op.RegistrationID]; {
	case !ok:
		return registrar.DeregisterAbsent, nil
	case !op.Permits(bd.Owner):
		return registrar.DeregisterNotOwner, nil
	case bd.Host != op.Host:
		return registrar.DeregisterHostMismatch, nil
	}
	delete(b.bindings, op.RegistrationID)
	return registrar.DeregisterRemoved, nil
}

func (b *memoryBackend) Registrations(_ context.Context, fn func(registrar.Registration) error) error {
	b.mu.Lock()
	regs := slices.Collect(maps.Values(b.bindings))
	b.mu.Unlock()
	for _, r := range regs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// Example mints an identity, mints it again (idempotent), is throttled on
// the third mint (an admission burst of 2), is refused a malformed one,
// and prints the audit trail.
func Example() {
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 4, RefillInterval: time.Minute},
		Admission:          limiter.BucketConfig{Burst: 2, RefillInterval: time.Minute},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	log := &memoryLog{}
	verbs, err := registrar.New(
		registrar.Config{Components: map[string]vocab.Multiplicity{"web": vocab.OnePerDeployment}, MaxWrapTTLSeconds: 600},
		registrar.Deps{Limiter: lim, Audit: log, Backend: &memoryBackend{bindings: map[string]registrar.Registration{}}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	req := registrar.MintRequest{
		CallerIdentity: "unix-peer:uid=1000",
		ServiceName:    "web",
		Host:           "host-1",
		Component:      "web",
		Spec:           registrar.Spec{Component: "web", ServiceName: "web"},
		WrapTTLSeconds: 300,
	}
	for range 3 {
		res, err := verbs.Mint(ctx, req)
		if t, ok := errors.AsType[*registrar.ThrottledError](err); ok {
			fmt.Println("throttled, retry after", t.RetryAfterSeconds, "s")
			continue
		}
		fmt.Println(res.Outcome, res.RegistrationID, err)
	}
	bad := req
	bad.ServiceName = "Web"
	_, err = verbs.Mint(ctx, bad)
	if r, ok := errors.AsType[*registrar.RefusedError](err); ok {
		fmt.Println("refused", r.Reason)
	}
	for _, r := range log.records {
		if r.Outcome != nil {
			fmt.Println(r.Phase, r.Outcome.Class)
		} else {
			fmt.Println(r.Phase)
		}
	}
	// Output:
	// first_mint web <nil>
	// idempotent_remint web <nil>
	// throttled, retry after 60 s
	// refused invalid_service_name
	// intent
	// outcome first_mint
	// intent
	// outcome idempotent_remint
	// intent
	// outcome refused
}

// ExampleVerbs_Rebuild restarts over a registry holding two workers of
// host-1: Rebuild counts them before serving, so with a ceiling of two
// per host a third is refused, a remint is not, and a deregister frees
// the slot at once.
func ExampleVerbs_Rebuild() {
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 8, RefillInterval: time.Minute},
		Admission:          limiter.BucketConfig{Burst: 8, RefillInterval: time.Minute},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	registry := &memoryBackend{bindings: map[string]registrar.Registration{
		"host-1-worker-001": {ID: "host-1-worker-001", Host: "host-1", Component: "worker", Owner: "unix-peer:uid=1000"},
		"host-1-worker-002": {ID: "host-1-worker-002", Host: "host-1", Component: "worker", Owner: "unix-peer:uid=1000"},
	}}
	verbs, err := registrar.New(registrar.Config{
		Components:          map[string]vocab.Multiplicity{"worker": vocab.ManyPerHost},
		MaxInstancesPerHost: map[string]uint32{"worker": 2},
		MaxWrapTTLSeconds:   600,
	}, registrar.Deps{Limiter: lim, Audit: &memoryLog{}, Backend: registry})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := verbs.Rebuild(ctx); err != nil { // at start, before serving
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", verbs.Stock().Components)
	worker := func(n uint32) registrar.MintRequest {
		return registrar.MintRequest{CallerIdentity: "unix-peer:uid=1000", ServiceName: "worker", Host: "host-1", Instance: n,
			Component: "worker", Spec: registrar.Spec{Component: "worker", ServiceName: "worker"}, WrapTTLSeconds: 300}
	}
	_, err = verbs.Mint(ctx, worker(3))
	fmt.Println(err)
	res, err := verbs.Mint(ctx, worker(2))
	fmt.Println(res.Outcome, err)
	_, err = verbs.Deregister(ctx, registrar.DeregisterRequest{CallerIdentity: "unix-peer:uid=1000", ServiceName: "worker", Host: "host-1", Instance: 1, Component: "worker"})
	fmt.Println(err)
	res, err = verbs.Mint(ctx, worker(3))
	fmt.Println(res.Outcome, err)
	// Output:
	// [{Component:worker Live:2 BusiestHost:2 Ceiling:2}]
	// registrar: refused instance_ceiling (max_instances_per_host 2) (registration host-1-worker-003)
	// idempotent_remint <nil>
	// <nil>
	// first_mint <nil>
}
