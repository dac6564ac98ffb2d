package registrar_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// errorAs is err as an E (errors.As); t fails if err is not one.
func errorAs[E error](t testing.TB, err error) E {
	t.Helper()
	var e E
	if !errors.As(err, &e) {
		t.Fatalf("got %T %v, want %T", err, err, e)
	}
	return e
}

func asUnavailable(t testing.TB, err error) *registrar.UnavailableError {
	t.Helper()
	return errorAs[*registrar.UnavailableError](t, err)
}

func TestMintAndDeregisterOutcomes(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	ctx := context.Background()

	res, err := h.v.Mint(ctx, goodMint())
	if err != nil || res.Outcome != registrar.FirstMint || res.RegistrationID != "h1-review-007" {
		t.Fatalf("first mint: %+v, %v; want first_mint of h1-review-007", res, err)
	}
	if want := time.Date(2026, 12, 1, 12, 5, 0, 0, time.UTC); !res.Material.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at %v, want now + 300 s = %v", res.Material.ExpiresAt, want)
	}
	res, err = h.v.Mint(ctx, goodMint())
	if err != nil || res.Outcome != registrar.IdempotentRemint {
		t.Fatalf("remint: %+v, %v; want idempotent_remint", res, err)
	}

	conflict := goodMint()
	conflict.Spec.Reload = "kill -HUP 1"
	_, err = h.v.Mint(ctx, conflict)
	if r := asRefused(t, err); r.Reason != vocab.ReasonStoredSpecConflict || r.RegistrationID != "h1-review-007" {
		t.Fatalf("spec conflict: %+v", r)
	}

	// one-per-deployment ids collide across hosts.
	cp := goodMint()
	cp.Component, cp.Spec.Component, cp.Instance = "control-plane", "control-plane", 0
	if res, err := h.v.Mint(ctx, cp); err != nil || res.RegistrationID != "control-plane" {
		t.Fatalf("control-plane mint: %+v, %v", res, err)
	}
	cp.Host = "h2"
	_, err = h.v.Mint(ctx, cp)
	if r := asRefused(t, err); r.Reason != vocab.ReasonRegistrationIDCollision {
		t.Fatalf("collision: %+v", r)
	}

	dr := goodDeregister()
	dr.Host = "h2"
	dr.Component, dr.Instance = "control-plane", 0
	_, err = h.v.Deregister(ctx, dr)
	if r := asRefused(t, err); r.Reason != vocab.ReasonHostMismatch || r.RegistrationID != "control-plane" {
		t.Fatalf("host mismatch: %+v", r)
	}

	dres, err := h.v.Deregister(ctx, goodDeregister())
	if err != nil || dres.Outcome != registrar.Removed || dres.RegistrationID != "h1-review-007" {
		t.Fatalf("deregister: %+v, %v; want removed", dres, err)
	}
	dres, err = h.v.Deregister(ctx, goodDeregister())
	if err != nil || dres.Outcome != registrar.AlreadyAbsent {
		t.Fatalf("second deregister: %+v, %v; want already_absent", dres, err)
	}

	// Every invocation wrote an intent and an outcome of the same request.
	recs := h.log.Records()
	if len(recs) != 2*8 {
		t.Fatalf("%d records for 8 invocations, want 16", len(recs))
	}
	want := []vocab.OutcomeClass{vocab.ClassFirstMint, vocab.ClassIdempotentRemint, vocab.ClassRefused, vocab.ClassFirstMint,
		vocab.ClassRefused, vocab.ClassRefused, vocab.ClassIdentityRemoved, vocab.ClassIdempotentAlreadyAbsent}
	for i := 0; i < len(recs); i += 2 {
		in, out := recs[i], recs[i+1]
		if in.Phase != audit.PhaseIntent || out.Phase != audit.PhaseOutcome || in.RequestID != out.RequestID {
			t.Fatalf("records %d,%d are not an intent/outcome pair: %+v %+v", i, i+1, in, out)
		}
		if in.RegistrationID != "" || out.RegistrationID == "" {
			t.Fatalf("intent carries registration id %q / outcome carries %q; want none / the derived id", in.RegistrationID, out.RegistrationID)
		}
		if out.Outcome.Class != want[i/2] {
			t.Fatalf("outcome %d class %v, want %v", i/2, out.Outcome.Class, want[i/2])
		}
	}
}

func TestDerivedKeyInvalidIsRecorded(t *testing.T) {
	h := newHarness(t, 32, 512, registrartest.FailingBackend{T: t})
	req := goodMint()
	req.Component, req.Spec.Component, req.Instance = "Bad_Component", "Bad_Component", 0
	_, err := h.v.Mint(context.Background(), req)
	if r := asRefused(t, err); r.Reason != vocab.ReasonDerivedKeyInvalid || r.RegistrationID != "" {
		t.Fatalf("got %+v, want derived_key_invalid with no registration id", r)
	}
	if h.log.Count(audit.PhaseOutcome) != 1 {
		t.Fatal("derived_key_invalid not recorded")
	}
}

func TestIntentWriteFailureCreatesNothing(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.log.FailPhase(audit.PhaseIntent, errors.New("disk full"))
	_, err := h.v.Mint(context.Background(), goodMint())
	if u := asUnavailable(t, err); u.Reason != registrar.AuditUnwritable {
		t.Fatalf("got %v, want AuditUnwritable", u.Reason)
	}
	if b.Calls() != 0 || b.Has("h1-review-007") {
		t.Fatal("the backend was reached although the intent was not written")
	}
	// The same holds for a pre-derivation refusal: it is answered
	// AuditUnwritable rather than silently unrecorded.
	bad := goodMint()
	bad.Host = "H1"
	_, err = h.v.Mint(context.Background(), bad)
	if u := asUnavailable(t, err); u.Reason != registrar.AuditUnwritable {
		t.Fatalf("refusal with an unwritable intent: got %v, want AuditUnwritable", u.Reason)
	}
}

func TestOutcomeWriteFailureAfterMutation(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	h.log.FailPhase(audit.PhaseOutcome, errors.New("disk full"))
	res, err := h.v.Mint(context.Background(), goodMint())
	u := asUnavailable(t, err)
	if u.Reason != registrar.PostMintUnrecordable || u.RegistrationID != "h1-review-007" || res.RequestID == "" {
		t.Fatalf("got %+v, want PostMintUnrecordable for h1-review-007", u)
	}
	if !b.Has("h1-review-007") {
		t.Fatal("the binding does not exist after PostMintUnrecordable")
	}
	// A deregister that removes is a mutation too.
	_, err = h.v.Deregister(context.Background(), goodDeregister())
	if u := asUnavailable(t, err); u.Reason != registrar.PostMintUnrecordable {
		t.Fatalf("removal with an unwritable outcome: %v, want PostMintUnrecordable", u.Reason)
	}
	// Nothing changed → AuditUnwritable.
	_, err = h.v.Deregister(context.Background(), goodDeregister())
	if u := asUnavailable(t, err); u.Reason != registrar.AuditUnwritable {
		t.Fatalf("already-absent with an unwritable outcome: %v, want AuditUnwritable", u.Reason)
	}
}

func TestBackendFailureIsRecordedAndAnsweredUnavailable(t *testing.T) {
	b := registrartest.NewBackend(t)
	b.Err = errors.New("bbolt: timeout")
	h := newHarness(t, 32, 512, b)
	_, err := h.v.Mint(context.Background(), goodMint())
	if u := asUnavailable(t, err); u.Reason != registrar.BackendUnavailable || !errors.Is(err, b.Err) {
		t.Fatalf("got %+v, want BackendUnavailable wrapping the backend error", u)
	}
	recs := h.log.Records()
	if len(recs) != 2 || recs[1].Outcome.Reason != vocab.ReasonBackendUnavailable {
		t.Fatalf("records %+v, want an outcome refused backend_unavailable", recs)
	}
}

func TestConcurrentMintsOfOneIDYieldOneFirstMint(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		count = map[registrar.MintOutcome]int{}
	)
	for range 64 {
		wg.Go(func() {
			res, err := h.v.Mint(context.Background(), goodMint())
			if err != nil {
				t.Errorf("mint: %v", err)
				return
			}
			mu.Lock()
			count[res.Outcome]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if count[registrar.FirstMint] != 1 || count[registrar.IdempotentRemint] != 63 {
		t.Fatalf("outcomes %v, want exactly one first_mint and 63 remints", count)
	}
}

func TestMintAndDeregisterOfOneIDNeverInterleave(t *testing.T) {
	// The fake backend fails the test if two calls for one id overlap, and
	// the outcome record is written under the same lock as the call.
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 4096, b)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if i%2 == 0 {
				h.v.Mint(context.Background(), goodMint())
			} else {
				h.v.Deregister(context.Background(), goodDeregister())
			}
		})
	}
	wg.Wait()
	// Replaying the outcomes in record order must be consistent with a
	// serial history: a removal only after a mint, already_absent only
	// when nothing is bound, first_mint only when nothing is bound.
	bound := false
	for _, r := range h.log.Records() {
		if r.Phase != audit.PhaseOutcome {
			continue
		}
		switch r.Outcome.Class {
		case vocab.ClassFirstMint:
			if bound {
				t.Fatal("first_mint recorded while bound: outcomes interleaved")
			}
			bound = true
		case vocab.ClassIdempotentRemint:
			if !bound {
				t.Fatal("remint recorded while unbound")
			}
		case vocab.ClassIdentityRemoved:
			if !bound {
				t.Fatal("removal recorded while unbound")
			}
			bound = false
		case vocab.ClassIdempotentAlreadyAbsent:
			if bound {
				t.Fatal("already_absent recorded while bound")
			}
		}
	}
}

func TestRequestIDsAreUnique(t *testing.T) {
	h := newHarness(t, 1000, 1000, registrartest.NewBackend(t))
	seen := map[string]bool{}
	for range 500 {
		res, _ := h.v.Mint(context.Background(), goodMint())
		if seen[res.RequestID] || len(res.RequestID) > audit.MaxRequestIDBytes {
			t.Fatalf("request id %q repeated or too long", res.RequestID)
		}
		seen[res.RequestID] = true
	}
}

func TestResultOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want registrar.Result
	}{
		{nil, registrar.ResultFirstMint},
		{&registrar.RefusedError{Reason: vocab.ReasonInvalidHost}, registrar.ResultRefused},
		{&registrar.ThrottledError{RetryAfterSeconds: 1}, registrar.ResultThrottled},
		{&registrar.UnavailableError{Reason: registrar.AuditUnwritable}, registrar.ResultUnavailable},
	} {
		if got := registrar.ResultOf(registrar.ResultFirstMint, tc.err); got != tc.want {
			t.Errorf("ResultOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestBackendStatusesNameThemselves(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{registrar.MintCreated.String(), "MintCreated"},
		{registrar.MintReissued.String(), "MintReissued"},
		{registrar.MintCollision.String(), "MintCollision"},
		{registrar.MintSpecConflict.String(), "MintSpecConflict"},
		{registrar.MintStatus(0).String(), "MintStatus(0)"},
		{registrar.MintStatus(9).String(), "MintStatus(9)"},
		{registrar.DeregisterRemoved.String(), "DeregisterRemoved"},
		{registrar.DeregisterAbsent.String(), "DeregisterAbsent"},
		{registrar.DeregisterHostMismatch.String(), "DeregisterHostMismatch"},
		{registrar.DeregisterStatus(200).String(), "DeregisterStatus(200)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
