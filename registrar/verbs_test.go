package registrar_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func asRefused(t testing.TB, err error) *registrar.RefusedError {
	t.Helper()
	return errorAs[*registrar.RefusedError](t, err)
}

// preDerivationCases covers every pre-derivation check, in order.
var preDerivationCases = []struct {
	name   string
	mut    func(*registrar.MintRequest)
	reason vocab.Reason
}{
	{"service name not a DNS label", func(r *registrar.MintRequest) { r.ServiceName, r.Spec.ServiceName = "Review!", "Review!" }, vocab.ReasonInvalidServiceName},
	{"empty service name", func(r *registrar.MintRequest) { r.ServiceName, r.Spec.ServiceName = "", "" }, vocab.ReasonInvalidServiceName},
	{"service name with trailing dash", func(r *registrar.MintRequest) { r.ServiceName, r.Spec.ServiceName = "review-", "review-" }, vocab.ReasonInvalidServiceName},
	{"64-octet service name", func(r *registrar.MintRequest) { s := strings.Repeat("a", 64); r.ServiceName, r.Spec.ServiceName = s, s }, vocab.ReasonInvalidServiceName},
	{"host not a DNS label", func(r *registrar.MintRequest) { r.Host = "h1.example.com" }, vocab.ReasonInvalidHost},
	{"reserved prefix", func(r *registrar.MintRequest) { r.ServiceName, r.Spec.ServiceName = "registrar-x", "registrar-x" }, vocab.ReasonReservedServiceName},
	{"spec names another service", func(r *registrar.MintRequest) { r.Spec.ServiceName = "other" }, vocab.ReasonSpecIdentityDisagreement},
	{"component not configured", func(r *registrar.MintRequest) { r.Component = "nope" }, vocab.ReasonComponentNotConfigured},
	{"spec names another component", func(r *registrar.MintRequest) { r.Spec.Component = "edge-proxy" }, vocab.ReasonSpecIdentityDisagreement},
	{"instance missing for many-per-host", func(r *registrar.MintRequest) { r.Instance = 0 }, vocab.ReasonServiceInstanceMismatch},
	{"instance above 999", func(r *registrar.MintRequest) { r.Instance = 1000 }, vocab.ReasonServiceInstanceMismatch},
	{"instance on one-per-host", func(r *registrar.MintRequest) { r.Component, r.Spec.Component = "edge-proxy", "edge-proxy" }, vocab.ReasonServiceInstanceMismatch},
	{"wrap ttl zero", func(r *registrar.MintRequest) { r.WrapTTLSeconds = 0 }, vocab.ReasonInvalidWrapTTL},
	{"wrap ttl above max", func(r *registrar.MintRequest) { r.WrapTTLSeconds = 1801 }, vocab.ReasonInvalidWrapTTL},
}

func TestPreDerivationRefusalsAreRecordedWhileTheBucketHasTokens(t *testing.T) {
	for _, tc := range preDerivationCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 32, 512, registrartest.FailingBackend{T: t})
			req := goodMint()
			tc.mut(&req)
			_, err := h.v.Mint(context.Background(), req)
			r := asRefused(t, err)
			if r.Reason != tc.reason || r.Limited || r.RegistrationID != "" || r.RequestID == "" {
				t.Fatalf("got %+v, want reason %v, not limited, no registration id, a request id", r, tc.reason)
			}
			recs := h.log.Records()
			if len(recs) != 2 || recs[0].Phase != audit.PhaseIntent || recs[1].Phase != audit.PhaseOutcome {
				t.Fatalf("records %+v, want intent then outcome", recs)
			}
			if o := recs[1].Outcome; o.Class != vocab.ClassRefused || o.Reason != tc.reason || recs[1].RequestID != r.RequestID {
				t.Fatalf("outcome %+v, want refused %v for request %s", o, tc.reason, r.RequestID)
			}
		})
	}
}

func TestPreDerivationFloodIsLimitedButKeepsItsRealRefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mut    func(*registrar.MintRequest)
		reason vocab.Reason
	}{
		{"non-DNS-label service name", func(r *registrar.MintRequest) { r.ServiceName = "Not A Label" }, vocab.ReasonInvalidServiceName},
		{"unconfigured component", func(r *registrar.MintRequest) { r.Component = "unconfigured" }, vocab.ReasonComponentNotConfigured},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const burst, flood = 3, 50
			h := newHarness(t, burst, 512, registrartest.FailingBackend{T: t})
			req := goodMint()
			tc.mut(&req)
			for i := range flood {
				_, err := h.v.Mint(context.Background(), req)
				var thr *registrar.ThrottledError
				if errors.As(err, &thr) {
					t.Fatalf("invocation %d answered the throttle; a pre-derivation refusal keeps its real answer", i)
				}
				r := asRefused(t, err)
				if r.Reason != tc.reason || r.Limited != (i >= burst) {
					t.Fatalf("invocation %d: got %+v, want %v, limited=%v", i, r, tc.reason, i >= burst)
				}
			}
			if got := len(h.log.Records()); got != 2*burst {
				t.Fatalf("%d records after the flood, want %d (intent+outcome for the burst only)", got, 2*burst)
			}
			evs := h.sink.all()
			if len(evs) != flood-burst {
				t.Fatalf("%d limited events, want one per limited invocation: %d", len(evs), flood-burst)
			}
			for _, ev := range evs {
				if ev.Bucket != vocab.PredecisionRefusal || ev.Verb != vocab.Mint || ev.Identity != req.CallerIdentity {
					t.Fatalf("event %+v, want predecision_refusal/mint/%s", ev, req.CallerIdentity)
				}
			}
		})
	}
}

// TestRefusalFloodDoesNotStarveAConcurrentMint is the isolation property
// operators count on during an attack: a flood of pre-derivation refusals
// from one identity drains that identity's predecision_refusal bucket and
// nothing else. The flood (200) is larger than both bursts (8 and 4), and
// the test confirms the refusal bucket is drained (the flood's last
// refusals are limited) before the well-formed mint, which then runs while
// the flood goes on. Were check point 1 to charge the admission bucket, the
// flood would have drained admission and the mint would be throttled.
func TestRefusalFloodDoesNotStarveAConcurrentMint(t *testing.T) {
	const prBurst, admBurst, flood = 8, 4, 200
	b := registrartest.NewBackend(t)
	h := newHarness(t, prBurst, admBurst, b)
	bad := goodMint()
	bad.ServiceName = "BAD"
	ctx := context.Background()
	limitedRefusals := 0
	for range flood {
		_, err := h.v.Mint(ctx, bad)
		var ref *registrar.RefusedError
		if !errors.As(err, &ref) {
			t.Fatalf("flood mint: %v, want a refusal", err)
		}
		if ref.Limited {
			limitedRefusals++
		}
	}
	if want := flood - prBurst; limitedRefusals != want {
		t.Fatalf("flood: %d limited refusals, want %d (the refusal bucket drained after its burst of %d)", limitedRefusals, want, prBurst)
	}
	if got := h.sink.count.Count(vocab.PredecisionRefusal); got != flood-prBurst {
		t.Fatalf("predecision_refusal counter %d before the good mint, want %d: the bucket is not drained", got, flood-prBurst)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range flood {
			h.v.Mint(ctx, bad)
		}
	})
	var res registrar.MintResult
	var err error
	wg.Go(func() { res, err = h.v.Mint(ctx, goodMint()) })
	wg.Wait()
	if err != nil || res.Outcome != registrar.FirstMint {
		t.Fatalf("well-formed mint during the flood: %+v, %v; want first_mint", res, err)
	}
	var intent, outcome bool
	for _, r := range h.log.Records() {
		if r.RequestID == res.RequestID {
			intent = intent || r.Phase == audit.PhaseIntent
			outcome = outcome || (r.Phase == audit.PhaseOutcome && r.Outcome.Class == vocab.ClassFirstMint)
		}
	}
	if !intent || !outcome {
		t.Fatalf("admitted mint recorded intent=%v outcome=%v, want both", intent, outcome)
	}
	if got := h.sink.count.Count(vocab.Admission); got != 0 {
		t.Fatalf("admission counter moved to %d during a refusal flood", got)
	}
}

func TestChargePrecedesIntentWriteOnBothArms(t *testing.T) {
	for _, arm := range []string{"pre-derivation", "admission"} {
		t.Run(arm, func(t *testing.T) {
			b := registrartest.NewBackend(t)
			h := newHarness(t, 32, 512, b)
			req := goodMint()
			if arm == "pre-derivation" {
				req.Component = "unconfigured"
			}
			// At the intent write the caller's entry must already exist:
			// the charge happened first.
			h.log.OnAppend = func(r *audit.Record) {
				if r.Phase == audit.PhaseIntent && h.lim.Stats().Entries != 1 {
					t.Errorf("intent written with %d limiter entries: the charge did not precede it", h.lim.Stats().Entries)
				}
			}
			// And the backend is reached only after the intent.
			b.Before = func() {
				if h.log.Count(audit.PhaseIntent) != 1 {
					t.Errorf("backend reached before the intent record")
				}
			}
			h.v.Mint(context.Background(), req)
			if h.log.Count(audit.PhaseIntent) != 1 {
				t.Fatalf("no intent written")
			}
		})
	}
}

func TestAdmissionThrottle(t *testing.T) {
	for _, verb := range []vocab.Verb{vocab.Mint, vocab.Deregister} {
		t.Run(verb.String(), func(t *testing.T) {
			b := registrartest.NewBackend(t)
			h := newHarness(t, 32, 2, b)
			ctx := context.Background()
			call := func() error {
				if verb == vocab.Mint {
					_, err := h.v.Mint(ctx, goodMint())
					return err
				}
				_, err := h.v.Deregister(ctx, goodDeregister())
				return err
			}
			for range 2 {
				if err := call(); err != nil {
					t.Fatalf("within the burst: %v", err)
				}
			}
			calls, records := b.Calls(), len(h.log.Records())
			err := call()
			var thr *registrar.ThrottledError
			if !errors.As(err, &thr) {
				t.Fatalf("got %T %v, want *ThrottledError", err, err)
			}
			if thr.RetryAfterSeconds < 1 || thr.RequestID == "" {
				t.Fatalf("throttle %+v, want retry-after ≥ 1 and a request id", thr)
			}
			var u *registrar.UnavailableError
			var r *registrar.RefusedError
			if errors.As(err, &u) || errors.As(err, &r) {
				t.Fatal("the throttle is also a permanent answer")
			}
			if b.Calls() != calls || len(h.log.Records()) != records {
				t.Fatalf("throttled invocation reached the backend (%d→%d calls) or wrote records (%d→%d)", calls, b.Calls(), records, len(h.log.Records()))
			}
			evs := h.sink.all()
			if len(evs) != 1 || evs[0].Bucket != vocab.Admission || evs[0].Verb != verb || evs[0].RetryAfterSeconds != thr.RetryAfterSeconds {
				t.Fatalf("events %+v, want one admission event for %v with the same retry-after", evs, verb)
			}
		})
	}
}

func TestThrottleRequiresNoBackend(t *testing.T) {
	h := newHarness(t, 32, 1, registrartest.FailingBackend{T: t})
	h.lim.Charge(context.Background(), "unix-peer:uid=1000", vocab.Mint, vocab.Admission) // drain
	_, err := h.v.Mint(context.Background(), goodMint())
	var thr *registrar.ThrottledError
	if !errors.As(err, &thr) {
		t.Fatalf("got %v, want the throttle", err)
	}
	if n := len(h.log.Records()); n != 0 {
		t.Fatalf("%d records written by a throttled invocation", n)
	}
}

func TestBringUpWaveIsNotThrottled(t *testing.T) {
	b := registrartest.NewBackend(t)
	h := newHarness(t, 32, 512, b)
	ctx := context.Background()
	for host := range 64 {
		for inst := range 8 {
			req := goodMint()
			req.Host = fmt.Sprintf("h%d", host)
			req.Instance = uint32(inst + 1)
			if _, err := h.v.Mint(ctx, req); err != nil {
				t.Fatalf("mint %s/%d: %v", req.Host, req.Instance, err)
			}
		}
	}
	if got := h.sink.count.Count(vocab.Admission); got != 0 {
		t.Fatalf("the reference wave of 512 mints was limited %d times", got)
	}
}

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

func TestSetComponentsStopsAcceptingARemovedComponent(t *testing.T) {
	h := newHarness(t, 32, 512, registrartest.NewBackend(t))
	if _, err := h.v.Mint(context.Background(), goodMint()); err != nil {
		t.Fatalf("mint before the change: %v", err)
	}
	next := maps.Clone(testComponents)
	delete(next, "review")
	if err := h.v.SetComponents(next); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := h.v.Mint(context.Background(), goodMint()); return err }(),
		func() error { _, err := h.v.Deregister(context.Background(), goodDeregister()); return err }(),
	} {
		if r := asRefused(t, err); r.Reason != vocab.ReasonComponentNotConfigured {
			t.Fatalf("after removing review: %+v, want component_not_configured", r)
		}
	}
	if _, err := h.v.Mint(context.Background(), func() registrar.MintRequest {
		m := goodMint()
		m.Component, m.Spec.Component, m.Instance = "edge-proxy", "edge-proxy", 0
		return m
	}()); err != nil {
		t.Fatalf("a kept component refused: %v", err)
	}
	if err := h.v.SetComponents(map[string]vocab.Multiplicity{"x": 0}); err == nil {
		t.Fatal("SetComponents accepted an invalid multiplicity")
	}
	if _, err := h.v.Mint(context.Background(), func() registrar.MintRequest {
		m := goodMint()
		m.Component, m.Spec.Component, m.Instance = "edge-proxy", "edge-proxy", 0
		m.Host = "h2"
		return m
	}()); err != nil {
		t.Fatalf("a refused SetComponents changed the table: %v", err)
	}
}

// New names the dependency it was not given, and refuses a zero wrap TTL.
func TestNewRefusesMissingDependencies(t *testing.T) {
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Second},
	}, limiter.Discard)
	if err != nil {
		t.Fatal(err)
	}
	good := registrar.Deps{Limiter: lim, Audit: &audittest.AuditLog{}, Backend: registrartest.NewBackend(t)}
	cfg := registrar.Config{Components: testComponents, MaxWrapTTLSeconds: 60}
	for _, c := range []struct {
		change func(*registrar.Config, *registrar.Deps)
		want   string
	}{
		{func(_ *registrar.Config, d *registrar.Deps) { d.Limiter = nil }, "nil limiter"},
		{func(_ *registrar.Config, d *registrar.Deps) { d.Audit = nil }, "nil audit log"},
		{func(_ *registrar.Config, d *registrar.Deps) { d.Backend = nil }, "nil backend"},
		{func(c *registrar.Config, _ *registrar.Deps) { c.MaxWrapTTLSeconds = 0 }, "wrap TTL"},
		{func(c *registrar.Config, _ *registrar.Deps) { c.Components = map[string]vocab.Multiplicity{"x": 9} }, "invalid multiplicity"},
	} {
		cc, dd := cfg, good
		c.change(&cc, &dd)
		if v, err := registrar.New(cc, dd); err == nil || v != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, %v; want an error naming %q", v, err, c.want)
		}
	}
	if _, err := registrar.New(cfg, good); err != nil {
		t.Fatalf("New with every dependency: %v", err)
	}
}
