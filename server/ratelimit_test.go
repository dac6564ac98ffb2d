package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
)

// rateLimitOf parses both headers of an answer strictly (the raw lines,
// not the client's view) and returns the default policy's items.
func rateLimitOf(t *testing.T, h http.Header) (wire.QuotaPolicy, wire.ServiceLimit) {
	t.Helper()
	pl, rl := h.Values(wire.HeaderRateLimitPolicy), h.Values(wire.HeaderRateLimit)
	if len(pl) != 1 || len(rl) != 1 {
		t.Fatalf("RateLimit-Policy %q and RateLimit %q: want one line each", pl, rl)
	}
	p, err := wire.ParseRateLimitPolicy(pl[0])
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", pl[0], err)
	}
	r, err := wire.ParseRateLimit(rl[0])
	if err != nil {
		t.Fatalf("RateLimit %q: %v", rl[0], err)
	}
	if len(p.Policies) != 1 || len(r.Limits) != 1 || p.Policies[0].Name != r.Limits[0].Name {
		t.Fatalf("RateLimit-Policy %q and RateLimit %q: want one item each, naming the same policy", pl[0], rl[0])
	}
	return p.Policies[0], r.Limits[0]
}

// TestEveryVerbAnswerCarriesTheRateLimitHeaders: success, idempotent
// success, a refusal and a throttle, for both verbs, each answer describes
// the caller's own admission bucket of the verb called after the call, and
// Retry-After stays on the 429. The limiter's clock stands still, so the
// remaining count falls by one per admitted call. Every step after the
// first is sent on the same kept-alive connection, which keeps its last
// RateLimit value for reuse: each answer's must still be its own.
func TestEveryVerbAnswerCarriesTheRateLimitHeaders(t *testing.T) {
	const burst = 3
	rv := newRealVerbs(t, 32, burst, registrartest.NewBackend(nil), &audittest.AuditLog{})
	s := newServer(t, rv.v, fixedHolder(t, 0, 0))
	hc := rawUnixClient(t, serveUnix(t, s))

	type step struct {
		path, body     string
		status         int
		wantRemaining  uint64
		wantRetryAfter bool
	}
	mint, dereg := wiretest.MintBody, wiretest.DeregisterBody
	bad := wiretest.ReplaceMember(mint, `"host":"h1"`, `"host":"h1.example"`) // not a DNS label: refused before admission
	steps := []step{
		{"/v1/mint", mint, 200, 2, false},
		{"/v1/mint", mint, 200, 1, false},
		{"/v1/mint", bad, 0, 1, false}, // refused before admission: the admission bucket is untouched
		{"/v1/mint", mint, 200, 0, false},
		{"/v1/mint", mint, 429, 0, true},
		{"/v1/deregister", dereg, 200, 2, false}, // deregister's own bucket
	}
	for i, st := range steps {
		reused := false
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://registrar"+st.path, strings.NewReader(st.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// Read whole, so the client keeps the connection for the next step.
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if i > 0 && !reused {
			t.Errorf("step %d: sent on a new connection, want the first step's kept alive", i)
		}
		if st.status == 0 && (res.StatusCode < 400 || res.StatusCode >= 500 || res.StatusCode == 429) {
			t.Fatalf("step %d %s: status %d, want a refusal", i, st.path, res.StatusCode)
		}
		if st.status != 0 && res.StatusCode != st.status {
			t.Fatalf("step %d %s: status %d, want %d", i, st.path, res.StatusCode, st.status)
		}
		p, l := rateLimitOf(t, res.Header)
		if p.Name != "default" || p.Quota != burst || p.Window != 2 { // 3 × 500 ms, rounded up
			t.Errorf("step %d: policy %+v, want default q=3 w=2", i, p)
		}
		if l.Remaining != st.wantRemaining {
			t.Errorf("step %d %s: r=%d, want %d", i, st.path, l.Remaining, st.wantRemaining)
		}
		if wantT := uint64(0); l.Remaining == burst && l.EffectiveWindow != wantT {
			t.Errorf("step %d: a full bucket states t=%d, want 0", i, l.EffectiveWindow)
		}
		if l.Remaining < burst && (!l.HasEffectiveWindow || l.EffectiveWindow != 1) {
			t.Errorf("step %d: t=%d (present %v), want 1 (the next token is at most 500 ms away)", i, l.EffectiveWindow, l.HasEffectiveWindow)
		}
		if got := res.Header.Get("Retry-After") != ""; got != st.wantRetryAfter {
			t.Errorf("step %d: Retry-After present %v, want %v", i, got, st.wantRetryAfter)
		}
	}
}

// TestTheRateLimitHeadersOfARequestWithoutAConnectionAreItsCallers: a
// request served through Handler (an embedding's: identified by
// WithIdentity, no connection of the server's, so no Caller prepared for
// it) is answered its own identity's bucket, prepared for the answer: the
// remaining count falls by one per admitted mint.
func TestTheRateLimitHeadersOfARequestWithoutAConnectionAreItsCallers(t *testing.T) {
	const burst = 3
	rv := newRealVerbs(t, 32, burst, registrartest.NewBackend(nil), &audittest.AuditLog{})
	s := newServer(t, rv.v, fixedHolder(t, 0, 0))
	for i, want := range []uint64{2, 1} {
		req := httptest.NewRequest(http.MethodPost, "/v1/mint", strings.NewReader(wiretest.MintBody))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(server.WithIdentity(req.Context(), server.UnixIdentity(1000)))
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("mint %d: status %d: %s", i, rec.Code, rec.Body)
		}
		if _, l := rateLimitOf(t, rec.Header()); l.Remaining != want {
			t.Errorf("mint %d: r=%d, want %d", i, l.Remaining, want)
		}
	}
}
