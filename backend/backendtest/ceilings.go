package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// DefaultWalkSteps is the random walk's length when CeilingOptions.Steps
// is zero.
const DefaultWalkSteps = 10_000

// CeilingOptions says how RunCeilings drives a backend.
type CeilingOptions struct {
	// Steps is the random walk's length; zero means DefaultWalkSteps.
	Steps int
	// Seed seeds the walk; zero means 1. The failure message names it.
	Seed uint64
	// Restart, if set, returns a backend on b's store that shares nothing
	// in memory with b: a crash of the walk restarts the backend too. nil
	// builds new verbs on the same backend.
	Restart func(t *testing.T, b registrar.Backend) registrar.Backend
	// Racers is how many mints race for the last slot; zero means 32.
	Racers int
}

// RunCeilings runs the instance ceilings through the real verbs over
// backends from newBackend, each on a registry of its own that starts
// empty (its own store, or its own prefix on a shared one), which must be
// a registrar.Lister:
//
//   - racers mints of distinct instances for the last slot of a host's
//     max_instances_per_host, and of a policy's max_registrations: exactly
//     one first_mint, every other instance_ceiling naming the ceiling;
//   - a random walk (walk.go) of mints, remints, deregisters, reloads,
//     crashes and backend failures (clean and partial, injected by a
//     wrapper), each answer predicted by a model of the registry and of
//     what the verbs count, the counts compared with the model after every
//     step, and each crash followed by a Rebuild whose counts must equal
//     the model and the backend's listing.
//
// The registration ids it mints are unique to the Run (hosts named after
// it), so that backends sharing role names on one server do not collide.
func RunCeilings(t *testing.T, newBackend func(t *testing.T) registrar.Backend, opts CeilingOptions) {
	t.Helper()
	if opts.Steps <= 0 {
		opts.Steps = DefaultWalkSteps
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Racers <= 0 {
		opts.Racers = 32
	}
	run := runs.Add(1)
	t.Run("the last slot of a host raced by many mints has one first mint", func(t *testing.T) {
		testLastSlot(t, newBackend(t), fmt.Sprintf("c%d-race-h", run), opts.Racers, vocab.CeilingInstancesPerHost)
	})
	t.Run("the last slot of a policy raced by many mints has one first mint", func(t *testing.T) {
		testLastSlot(t, newBackend(t), fmt.Sprintf("c%d-race-p", run), opts.Racers, vocab.CeilingRegistrations)
	})
	t.Run("a random walk with crashes never passes a ceiling and rebuilds the registry's counts", func(t *testing.T) {
		w := newWalk(t, newBackend(t), opts, fmt.Sprintf("c%d-w", run))
		start := time.Now()
		w.run()
		t.Logf("%d steps (%d mints, %d deregisters, %d reloads, %d crashes; %d first mints, %d refused by a ceiling, %d backend faults) in %s, seed %d",
			opts.Steps, w.stats.mints, w.stats.deregisters, w.stats.reloads, w.stats.crashes, w.stats.created, w.stats.ceilinged, w.stats.faults,
			time.Since(start).Round(time.Millisecond), opts.Seed)
	})
}

// ceilingComponents are the components the ceilings' tests mint.
var ceilingComponents = map[string]vocab.Multiplicity{
	"review":        vocab.ManyPerHost,
	"agent":         vocab.ManyPerHost,
	"edge-proxy":    vocab.OnePerHost,
	"control-plane": vocab.OnePerDeployment,
}

// newCeilingVerbs returns verbs over b with ceilings, auth and a limiter
// that never throttles (its clock stands still and its buckets are deep).
func newCeilingVerbs(t *testing.T, b registrar.Backend, perHost map[string]uint32, auth registrar.Authority) (*registrar.Verbs, *audittest.AuditLog) {
	t.Helper()
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1 << 30, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: 1 << 30, RefillInterval: time.Second},
		Now:                func() limiter.Instant { return 0 },
	}, counting.New())
	if err != nil {
		t.Fatal(err)
	}
	log := &audittest.AuditLog{}
	v, err := registrar.New(registrar.Config{Components: ceilingComponents, MaxWrapTTLSeconds: 1800, Authority: auth, MaxInstancesPerHost: perHost},
		registrar.Deps{Limiter: lim, Audit: log, Backend: b, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return v, log
}

func ceilingMint(identity, component, host string, instance uint32) registrar.MintRequest {
	return registrar.MintRequest{
		CallerIdentity: identity,
		ServiceName:    "review",
		Host:           host,
		Instance:       instance,
		Component:      component,
		Spec:           registrar.Spec{Component: component, ServiceName: "review", Reload: "systemctl reload review"},
		WrapTTLSeconds: 300,
	}
}

func testLastSlot(t *testing.T, b registrar.Backend, host string, racers int, ceiling vocab.Ceiling) {
	const limit = 4
	auth := &walkAuthority{max: []uint32{0, 0, 0}}
	perHost := map[string]uint32{}
	if ceiling == vocab.CeilingInstancesPerHost {
		perHost["review"] = limit
	} else {
		auth.max[0] = limit
	}
	v, log := newCeilingVerbs(t, b, perHost, auth)
	if err := v.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	// limit-1 taken (one by another identity of the policy), one left.
	for i := range uint32(limit - 1) {
		if _, err := v.Mint(context.Background(), ceilingMint(walkIdentity(0, int(i%2)), "review", host, 1+i)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   = make([]registrar.MintResult, racers)
		errs  = make([]error, racers)
	)
	for i := range racers {
		wg.Go(func() {
			<-start
			res[i], errs[i] = v.Mint(context.Background(), ceilingMint(walkIdentity(0, i%2), "review", host, uint32(limit+i)))
		})
	}
	close(start)
	wg.Wait()
	first, refused := 0, 0
	for i := range racers {
		var r *registrar.RefusedError
		switch {
		case errs[i] == nil && res[i].Outcome == registrar.FirstMint:
			first++
		case errors.As(errs[i], &r) && r.Reason == vocab.ReasonInstanceCeiling && r.Ceiling == ceiling && r.Limit == limit && r.RegistrationID != "":
			refused++
		default:
			t.Errorf("racer %d: got %+v, %v; want first_mint or instance_ceiling (%s %d) with its registration id", i, res[i], errs[i], ceiling, limit)
		}
	}
	if first != 1 || refused != racers-1 {
		t.Errorf("%d mints racing for the last slot of %s %d: got %d first_mint and %d instance_ceiling, want 1 and %d", racers, ceiling, limit, first, refused, racers-1)
	}
	// The registry agrees: exactly limit registrations of the host, and
	// each refusal is on the record with its registration id.
	n := 0
	err := b.(registrar.Lister).Registrations(context.Background(), func(r registrar.Registration) error {
		if r.Host == host {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != limit {
		t.Errorf("the registry holds %d registrations of %s, want the ceiling %d", n, host, limit)
	}
	outcomes := 0
	for _, r := range log.Records() {
		if o := r.Outcome; o != nil && o.Reason == vocab.ReasonInstanceCeiling {
			outcomes++
			if r.RegistrationID == "" || !strings.HasPrefix(o.Detail, ceiling.String()) {
				t.Errorf("refused record %+v: want its registration id and the ceiling in its detail", r)
			}
		}
	}
	if outcomes != racers-1 {
		t.Errorf("instance_ceiling records: got %d, want %d", outcomes, racers-1)
	}
}
