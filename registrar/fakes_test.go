package registrar_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

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
	log  *audittest.AuditLog
	sink *recSink
}

var testComponents = map[string]vocab.Multiplicity{
	"review":        vocab.ManyPerHost,
	"edge-proxy":    vocab.OnePerHost,
	"control-plane": vocab.OnePerDeployment,
	"Bad_Component": vocab.OnePerHost, // not a label: derivation fails
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
	log := &audittest.AuditLog{}
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
