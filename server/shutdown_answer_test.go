package server_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// A stop whose grace period ends while a mint is between its intent record
// and its answer (the real verbs, a real unix socket, wire.Client): the
// mint's answer still reaches the caller, and the audit log holds one
// intent and one outcome for the one call. A connection closed under the
// call would leave a record pair with no answer, and the client's resend
// a second invocation elsewhere (issue 20's restart test: 370 answers, 386
// pairs, after "closing connections still busy after the grace period").
func TestShutdownPastItsGraceAnswersTheMintItRecorded(t *testing.T) {
	log := &audittest.AuditLog{}
	backend := registrartest.NewBackend(t)
	inBackend, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	backend.Before = func() {
		first.Do(func() {
			close(inBackend)
			<-release
		})
	}
	rv := newRealVerbs(t, 32, 512, backend, log)
	s := newServer(t, rv.v, fixedHolder(t, 0, 0))
	drained := make(chan struct{})
	server.SetAfterDrain(s, func() { close(drained) })
	path := t.TempDir() + "/r.sock"
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()

	type result struct {
		resp *wire.Response
		err  error
	}
	answered := make(chan result, 1)
	c := wire.NewUnixClient(path, wire.WithoutKeepAlive())
	go func() {
		resp, err := c.Mint(context.Background(), goodMint())
		answered <- result{resp, err}
	}()
	<-inBackend
	if n := log.Count(audit.PhaseIntent); n != 1 {
		t.Fatalf("%d intent records with the mint in its backend call, want 1", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the grace period is over at once
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	<-drained
	close(release)

	r := <-answered
	if r.err != nil {
		t.Fatalf("the mint recorded before the grace's end got no answer: %v", r.err)
	}
	if !r.resp.OK() || r.resp.Outcome != registrar.FirstMint.String() {
		t.Fatalf("answer %d %q %s, want 200 first_mint", r.resp.StatusCode, r.resp.Outcome, r.resp.ErrorID)
	}
	if err := <-shut; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown returned %v, want the grace's context error", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	if i, o, calls := log.Count(audit.PhaseIntent), log.Count(audit.PhaseOutcome), backend.Calls(); i != 1 || o != 1 || calls != 1 {
		t.Fatalf("intents %d, outcomes %d, backend calls %d for one answered mint: want 1, 1, 1", i, o, calls)
	}
}
