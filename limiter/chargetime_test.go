package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
)

// TestChargeTimeChargesAtTheGivenInstantOnTheDefaultClock: on the default
// clock the caller's time.Now reading is the charge instant (an hour
// later refills the bucket without an hour passing); with an injected
// clock it is ignored and the limiter's own clock decides.
func TestChargeTimeChargesAtTheGivenInstantOnTheDefaultClock(t *testing.T) {
	cfg := limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}
	ctx := context.Background()
	l, err := limiter.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if d := l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, t0); !d.Allowed {
		t.Fatal("first charge denied")
	}
	if d := l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, t0.Add(time.Minute)); d.Allowed || d.RetryAfterSeconds != 3540 {
		t.Fatalf("a minute later: %+v, want denied with retry after 3540 s", d)
	}
	if d := l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, t0.Add(time.Hour)); !d.Allowed {
		t.Fatalf("an hour later (by the given instant): %+v, want allowed", d)
	}

	cfg.Now = func() limiter.Instant { return 0 }
	l, err = limiter.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, t0)
	if d := l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, t0.Add(time.Hour)); d.Allowed {
		t.Fatal("an injected clock standing still: the given instant refilled the bucket")
	}
}

type lastEvent struct{ ev limiter.Event }

func (s *lastEvent) Limited(_ context.Context, ev limiter.Event) { s.ev = ev }

// TestChargeTimeEventsCarryTheInstant: a limited ChargeTime passes its
// instant on to the sinks (the coalescing sink opens its window there);
// Charge, and ChargeTime on an injected clock, pass none.
func TestChargeTimeEventsCarryTheInstant(t *testing.T) {
	cfg := limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}
	ctx := context.Background()
	for _, injected := range []bool{false, true} {
		if injected {
			cfg.Now = func() limiter.Instant { return 0 }
		}
		sink := &lastEvent{}
		l, err := limiter.New(cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, t0)
		l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, t0)
		if want := !injected; sink.ev.At.Equal(t0) != want || (injected && !sink.ev.At.IsZero()) {
			t.Errorf("injected clock %v: event At %v, want %v", injected, sink.ev.At, map[bool]string{true: "t0", false: "zero"}[want])
		}
		l.Charge(ctx, "a", limiter.Mint, limiter.Admission)
		if !sink.ev.At.IsZero() {
			t.Errorf("injected clock %v: Charge's event carries At %v, want zero", injected, sink.ev.At)
		}
	}
}

// TestChargeTimeIgnoresAWallOnlyTime: a time without a monotonic reading
// (t.UTC(), t.Round(0), a parsed time) never reaches a bucket. With burst 1
// and an hour's refill, a drained bucket stays drained when the next charge
// is given a wall-only time an hour (or a day) later: the limiter reads its
// own clock, which has not moved an hour.
func TestChargeTimeIgnoresAWallOnlyTime(t *testing.T) {
	cfg := limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          limiter.BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}
	ctx := context.Background()
	parsed, err := time.Parse(time.RFC3339, time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		at   func(now time.Time) time.Time
	}{
		{"UTC", func(now time.Time) time.Time { return now.UTC().Add(time.Hour) }},
		{"Round(0)", func(now time.Time) time.Time { return now.Round(0).Add(time.Hour) }},
		{"parsed", func(time.Time) time.Time { return parsed }},
		{"a day back, wall only", func(now time.Time) time.Time { return now.Round(0).Add(-24 * time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &lastEvent{}
			l, err := limiter.New(cfg, sink)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if d := l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, now); !d.Allowed {
				t.Fatal("first charge denied")
			}
			at := tc.at(now)
			d := l.ChargeTime(ctx, "a", limiter.Mint, limiter.Admission, at)
			if d.Allowed {
				t.Fatalf("charge at wall-only %v after draining: allowed, want limited (a wall time minted a token)", at)
			}
			if d.RetryAfterSeconds < 3500 || d.RetryAfterSeconds > 3600 {
				t.Fatalf("retry after %d s, want about an hour (the limiter's own clock)", d.RetryAfterSeconds)
			}
			if sink.ev.At.Equal(at) || sink.ev.At.IsZero() {
				t.Fatalf("event At %v, want the limiter's own clock reading, not the wall-only %v", sink.ev.At, at)
			}
		})
	}
}
