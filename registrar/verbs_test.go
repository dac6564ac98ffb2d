package registrar_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
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
