package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// fakeVerbs answers with the functions it is given; a nil function fails
// the test if reached (the seam that proves a request never reached the
// verbs).
type fakeVerbs struct {
	t          testing.TB
	mint       func(context.Context, registrar.MintRequest) (registrar.MintResult, error)
	deregister func(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error)
	calls      atomic.Int64
}

var _ server.Verbs = (*fakeVerbs)(nil)

func (f *fakeVerbs) Mint(ctx context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
	return reach(f, "Mint", f.mint, ctx, req)
}

func (f *fakeVerbs) Deregister(ctx context.Context, req registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	return reach(f, "Deregister", f.deregister, ctx, req)
}

// reach counts a verb call and answers it with answer, or fails the test
// when the verb has none (it must not be reached).
func reach[Req, Res any](f *fakeVerbs, verb string, answer func(context.Context, Req) (Res, error), ctx context.Context, req Req) (Res, error) {
	f.calls.Add(1)
	if answer == nil {
		f.t.Errorf("verbs reached: %s(%+v)", verb, req)
		var zero Res
		return zero, errors.New("unreachable")
	}
	return answer(ctx, req)
}

// unreachableVerbs fails the test if either verb is called.
func unreachableVerbs(t testing.TB) *fakeVerbs { return &fakeVerbs{t: t} }

// fixedHolder is a health holder with fixed counts: stable bytes.
func fixedHolder(t testing.TB, pr, adm uint64) *health.Holder {
	t.Helper()
	h, err := health.NewHolder(func(c *health.Container) {
		c.Limiter = health.LimiterMember{LimitedPredecisionRefusal: pr, LimitedAdmission: adm}
		c.AuditCapacity = fixedAuditCapacity
		c.Restart = health.RestartMember{Checkpoint: "none"} // a clean start
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// fixedAuditCapacity is the audit_capacity member of fixedHolder: a store
// at the default budget (17 × 8 MiB), 3 MiB used, 1 GiB free.
var fixedAuditCapacity = health.AuditCapacityMember{
	State: "ok", FreeBytes: 1 << 30, StoreBytes: 3 << 20, BudgetBytes: 17 * 8 << 20, AppendFailures: 0,
}

var testComponents = map[string]vocab.Multiplicity{
	"review":        vocab.ManyPerHost,
	"edge-proxy":    vocab.OnePerHost,
	"control-plane": vocab.OnePerDeployment,
}

// realVerbs is the real *registrar.Verbs over fakes, with a limiter whose
// clock stands still (no token ever refills).
type realVerbs struct {
	v      *registrar.Verbs
	log    *audittest.AuditLog
	counts *counting.Sink
}

func newRealVerbs(t testing.TB, prBurst, admBurst uint32, backend registrar.Backend, log *audittest.AuditLog, opts ...func(*registrar.Deps)) *realVerbs {
	t.Helper()
	counts := counting.New()
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: prBurst, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: admBurst, RefillInterval: 500 * time.Millisecond},
		Now:                func() limiter.Instant { return 0 },
	}, counts)
	if err != nil {
		t.Fatal(err)
	}
	deps := registrar.Deps{
		Limiter: lim,
		Audit:   log,
		Backend: backend,
		Now:     func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) },
	}
	for _, o := range opts {
		o(&deps)
	}
	v, err := registrar.New(registrar.Config{Components: testComponents, MaxWrapTTLSeconds: 1800}, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &realVerbs{v: v, log: log, counts: counts}
}

// serveUnix starts s on a real unix socket in a temporary directory and
// returns the socket path. Cleanup shuts the server down and waits for
// Serve to return.
func serveUnix(t testing.TB, s *server.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "r.sock")
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, s, l)
	return path
}

// serveOn serves l until cleanup.
func serveOn(t testing.TB, s *server.Server, l net.Listener) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
}

func newServer(t testing.TB, v server.Verbs, h *health.Holder) *server.Server {
	t.Helper()
	s, err := server.New(server.Options{Verbs: v, Health: h})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
