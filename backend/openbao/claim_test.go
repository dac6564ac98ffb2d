package openbao

import (
	"context"
	"errors"
	"testing"
	"time"
)

func claimBackend(t *testing.T, now *time.Time) *Backend {
	t.Helper()
	b, err := New(Options{Address: "http://127.0.0.1:1", Token: "t", RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.claims.now = func() time.Time { return *now }
	b.claims.sleep = func(context.Context, time.Duration) error { return nil }
	b.claims.init()
	return b
}

// A claim is free when there is none, when it is this registrar's own (a
// dead call of its own: the per-id lock serialises its live ones), when
// it has expired by this registrar's clock (at the expiry instant
// included), and when its expiry does not parse (no registrar writes
// that: taking it over beats blocking the id forever); else it is held by
// another until its expiry.
func TestAClaimIsHeldOnlyByAnotherRegistrarUntilItsExpiry(t *testing.T) {
	now := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	b := claimBackend(t, &now)
	exp := now.Add(time.Second)
	for _, c := range []struct {
		name        string
		owner, exps string
		want        claimState
	}{
		{"none", "", "", claimFree},
		{"own", b.claims.nonce, exp.Format(time.RFC3339Nano), claimFree},
		{"another's, live", "other", exp.Format(time.RFC3339Nano), claimByOther},
		{"another's, expiring now", "other", now.Format(time.RFC3339Nano), claimFree},
		{"another's, expired", "other", now.Add(-time.Nanosecond).Format(time.RFC3339Nano), claimFree},
		{"another's, unparsable", "other", "soon", claimFree},
	} {
		got, until := b.claimOf(&binding{claimOwner: c.owner, claimExpires: c.exps})
		if got != c.want {
			t.Errorf("%s: claimOf = %v, want %v", c.name, got, c.want)
		}
		if got == claimByOther && !until.Equal(exp) {
			t.Errorf("%s: held until %s, want %s", c.name, until, exp)
		}
	}
}

// The claim's life covers a holder's budget plus one request timeout plus
// the clock skew, and is never under MinClaimTTL.
func TestTheClaimOutlivesItsHoldersLastRequestByTheSkew(t *testing.T) {
	now := time.Now()
	for _, timeout := range []time.Duration{time.Second, 5 * time.Second, 30 * time.Second} {
		b := claimBackend(t, &now)
		b.timeout = timeout
		ttl, budget := b.claimTTL(), b.claimBudget()
		if ttl < MinClaimTTL || ttl < 2*ClockSkew+4*timeout {
			t.Errorf("timeout %s: claim TTL %s, want at least %s and 2 × skew + 4 timeouts", timeout, ttl, MinClaimTTL)
		}
		if budget+timeout+ClockSkew != ttl || budget < 2*timeout {
			t.Errorf("timeout %s: budget %s, want TTL %s − timeout − skew, and room for two requests", timeout, budget, ttl)
		}
	}
}

// A holder stops before a step once its budget is spent (at the deadline
// included), and a test's step hook stops it first.
func TestAHolderStopsAtItsDeadline(t *testing.T) {
	now := time.Now()
	b := claimBackend(t, &now)
	h := held{deadline: now.Add(time.Second)}
	if err := b.before(h, "id", "role_write"); err != nil {
		t.Fatalf("before the deadline: %v", err)
	}
	now = h.deadline
	if err := b.before(h, "id", "role_write"); !errors.Is(err, errClaimLapsed) {
		t.Errorf("at the deadline: %v, want errClaimLapsed", err)
	}
	stop := errors.New("stop")
	b.claims.step = func(id, step string) error { return stop }
	now = time.Time{}
	if err := b.before(h, "id", "role_write"); !errors.Is(err, stop) {
		t.Errorf("with a step hook: %v, want its error", err)
	}
}

// A waiter gives up with ErrClaimHeld, a saturated *RequestError that made
// no request, once one request timeout has passed by its clock; before,
// it sleeps at most until the claim's expiry, and its pauses double from
// 2 ms to 50 ms.
func TestAWaiterGivesUpAfterOneRequestTimeout(t *testing.T) {
	now := time.Now()
	b := claimBackend(t, &now)
	var slept []time.Duration
	b.claims.sleep = func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		now = now.Add(d)
		return nil
	}
	var w waiter
	exp := now.Add(time.Hour)
	var err error
	for range 1000 {
		if err = b.wait(context.Background(), &w, "id", exp); err != nil {
			break
		}
	}
	var re *RequestError
	if !errors.Is(err, ErrClaimHeld) || !errors.As(err, &re) || re.Kind != KindSaturated || re.Op != OpBindingClaim {
		t.Fatalf("after waiting: %v, want ErrClaimHeld as a saturated binding_claim *RequestError", err)
	}
	var total time.Duration
	for _, d := range slept {
		total += d
	}
	if total != b.timeout {
		t.Errorf("waited %s in all, want one request timeout %s", total, b.timeout)
	}
	if slept[0] != 2*time.Millisecond || slept[1] != 4*time.Millisecond || slept[10] != 50*time.Millisecond {
		t.Errorf("pauses %v…, want 2 ms doubling to 50 ms", slept[:11])
	}

	// A claim expiring sooner is waited for until its expiry only.
	w, slept = waiter{}, nil
	_ = b.wait(context.Background(), &w, "id", now.Add(time.Millisecond))
	if len(slept) != 1 || slept[0] != time.Millisecond {
		t.Errorf("slept %v for a claim expiring in 1 ms, want 1 ms", slept)
	}

	// A cancelled context ends the wait.
	b.claims.sleep = sleepCtx
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = waiter{}
	if err := b.wait(ctx, &w, "id", now.Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Errorf("with a cancelled context: %v, want context.Canceled", err)
	}
}
