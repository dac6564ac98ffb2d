package registrar_test

import (
	"context"
	"errors"
	"fmt"
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

// memoryBackend is a registrar.Backend in memory: bindings by
// registration id.
type memoryBackend struct {
	mu       sync.Mutex
	bindings map[string]string // registration id → host
}

func (b *memoryBackend) Mint(_ context.Context, op registrar.MintOp) (registrar.MintStatus, registrar.Material, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	mat := registrar.Material{RoleID: "role-" + op.RegistrationID, WrappedSecretID: "wrapped", ExpiresAt: op.Now.Add(op.WrapTTL)}
	switch host, ok := b.bindings[op.RegistrationID]; {
	case !ok:
		b.bindings[op.RegistrationID] = op.Host
		return registrar.MintCreated, mat, nil
	case host != op.Host:
		return registrar.MintCollision, registrar.Material{}, nil
	}
	return registrar.MintReissued, mat, nil
}

func (b *memoryBackend) Deregister(_ context.Context, op registrar.DeregisterOp) (registrar.DeregisterStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch host, ok := b.bindings[op.RegistrationID]; {
	case !ok:
		return registrar.DeregisterAbsent, nil
	case host != op.Host:
		return registrar.DeregisterHostMismatch, nil
	}
	delete(b.bindings, op.RegistrationID)
	return registrar.DeregisterRemoved, nil
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
		registrar.Deps{Limiter: lim, Audit: log, Backend: &memoryBackend{bindings: map[string]string{}}},
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
