package audit_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// countedFailing fails every write that carries a counted ("limited")
// record while on is set, and passes every other write through.
type countedFailing struct {
	audit.File
	on     *atomic.Bool
	failed *atomic.Int64
}

func (f countedFailing) Write(p []byte) (int, error) {
	if f.on.Load() && bytes.Contains(p, []byte(`"phase":"limited"`)) {
		f.failed.Add(1)
		return 0, errors.New("injected: counted write fails")
	}
	return f.File.Write(p)
}

// TestAFailedCountedWriteRefusesNoInvocation runs the verbs on one real
// store, as the daemon does (intent and outcome records by Append, counted
// records by the coalescer's AppendBatch), while every counted write
// fails: each failed tick drops its counted records and is logged, and
// no invocation is refused for it. The flood's answers stay the real
// refusals, and well-formed mints and deregisters between the failing
// ticks are admitted and recorded.
func TestAFailedCountedWriteRefusesNoInvocation(t *testing.T) {
	var on atomic.Bool
	var failed atomic.Int64
	store, err := audit.OpenWithHooks(audit.Options{Dir: filepath.Join(t.TempDir(), "audit")}, audit.TestHooks{
		WrapFile: func(inner audit.File) audit.File { return countedFailing{inner, &on, &failed} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	co, err := coalesce.New(coalesce.Options{Store: store, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 2, RefillInterval: time.Hour},
		Admission:          limiter.BucketConfig{Burst: 100, RefillInterval: time.Hour},
	}, co)
	if err != nil {
		t.Fatal(err)
	}
	v, err := registrar.New(registrar.Config{
		Components:        map[string]config.Multiplicity{"review": config.ManyPerHost},
		MaxWrapTTLSeconds: 1800,
	}, registrar.Deps{Limiter: lim, Audit: store, Backend: registrartest.NewBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	on.Store(true)
	ctx := context.Background()
	mint := func(service string, instance uint32) (registrar.MintResult, error) {
		return v.Mint(ctx, registrar.MintRequest{
			CallerIdentity: "unix-peer:uid=1000", ServiceName: service, Host: "h1", Instance: instance,
			Component: "review", WrapTTLSeconds: 300,
			Spec: registrar.Spec{Component: "review", ServiceName: service, Reload: "systemctl reload review"},
		})
	}
	tick := time.Now()
	for round := range 5 {
		for range 20 {
			_, err := mint("BAD", 1)
			var ref *registrar.RefusedError
			if !errors.As(err, &ref) {
				t.Fatalf("round %d: flood mint answered %v, want its real refusal", round, err)
			}
		}
		res, err := mint("review", uint32(10+round))
		if err != nil || res.Outcome != registrar.FirstMint {
			t.Fatalf("round %d, after %d failed counted writes: mint %+v, %v; want first_mint", round, failed.Load(), res, err)
		}
		if _, err := v.Deregister(ctx, registrar.DeregisterRequest{
			CallerIdentity: "unix-peer:uid=1000", ServiceName: "review", Host: "h1", Instance: uint32(10 + round), Component: "review",
		}); err != nil {
			t.Fatalf("round %d, after %d failed counted writes: deregister %v, want removed", round, failed.Load(), err)
		}
		tick = tick.Add(2 * time.Second)
		co.Tick(ctx, tick) // the counted write fails
	}
	if failed.Load() < 5 {
		t.Fatalf("%d counted writes failed, want one per tick (the fault was not exercised)", failed.Load())
	}
}
