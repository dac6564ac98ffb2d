package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// TestAClientBusierThanItsIdentityCapLosesNoCall: a caller running more
// calls in parallel than registrar.max_conns_per_identity keeps more
// keep-alive connections than the cap, so each newcomer evicts one of its
// own idle connections, often the very one the client is about to reuse.
// The client sends such a call again on a fresh connection (the verbs are
// idempotent, and an idle connection held no request), so every call is
// answered and none fails with a reset or EOF.
func TestAClientBusierThanItsIdentityCapLosesNoCall(t *testing.T) {
	verbs := &fakeVerbs{t: t, mint: func(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint,
			Material: registrar.Material{RoleID: "role", WrappedSecretID: "wrapped", ExpiresAt: time.Now().Add(time.Minute)}}, nil
	}}
	const workers, rounds = 2, 60
	s, err := server.New(server.Options{Verbs: verbs, Health: fixedHolder(t, 0, 0), MaxConnsPerIdentity: workers})
	if err != nil {
		t.Fatal(err)
	}
	// Two clients of one identity (two tools of one uid), each keeping its
	// own pool of idle connections, take turns: never more calls in flight
	// than the cap, but more pooled connections than the cap, so each
	// turn's connections evict the other client's idle ones, which that
	// client reuses on its next turn.
	path := serveUnix(t, s)
	clients := []*wire.Client{
		wire.NewUnixClient(path, wire.WithTimeout(30*time.Second)),
		wire.NewUnixClient(path, wire.WithTimeout(30*time.Second)),
	}
	errs := make(chan error, workers*rounds)
	for r := range rounds {
		c := clients[r%len(clients)]
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				res, err := c.Mint(context.Background(), goodMint())
				if err != nil {
					errs <- err
					return
				}
				if !res.OK() {
					t.Errorf("got %d %s, want an answer", res.StatusCode, res.ErrorID)
				}
			})
		}
		wg.Wait()
	}
	close(errs)
	n := 0
	for err := range errs {
		if n == 0 {
			t.Errorf("a call failed on the transport: %v", err)
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of %d calls failed on the transport", n, workers*rounds)
	}
	if got := verbs.calls.Load(); got != workers*rounds {
		t.Errorf("the verbs ran %d times, want %d: a call was lost or run twice", got, workers*rounds)
	}
	if ev := s.Stats().Rejected[server.ListenerUnix][server.ReasonIdleEvicted]; ev == 0 {
		t.Errorf("no idle connection was evicted: the test did not contest the cap")
	}
}
