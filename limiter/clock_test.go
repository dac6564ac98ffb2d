package limiter

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// stepWall returns t with its wall reading moved by d (whole seconds) and
// its monotonic reading unchanged: what time.Now returns after an operator
// or NTP steps the wall clock. It relies on time.Time's layout (a wall word
// holding, with the monotonic flag set, seconds since 1885 above 30 bits
// of nanoseconds, and the monotonic reading in ext), which the test checks.
func stepWall(t *testing.T, tm time.Time, d time.Duration) time.Time {
	t.Helper()
	const hasMonotonic, nsecShift = 1 << 63, 30
	p := (*struct {
		wall uint64
		ext  int64
		loc  *time.Location
	})(unsafe.Pointer(&tm))
	if p.wall&hasMonotonic == 0 {
		t.Fatalf("%v carries no monotonic reading", tm)
	}
	stepped := tm
	q := (*struct {
		wall uint64
		ext  int64
		loc  *time.Location
	})(unsafe.Pointer(&stepped))
	q.wall += uint64(d/time.Second) << nsecShift
	if got := stepped.Round(0).Sub(tm.Round(0)); got != d {
		t.Fatalf("stepping the wall reading moved it by %v, want %v (time.Time's layout changed?)", got, d)
	}
	return stepped
}

// TestProductionClockIgnoresAWallClockStep steps the wall reading a day
// forward and an hour back with the monotonic reading unchanged: the
// limiter's production clock reads the same instant, so the step mints no
// tokens and drains none.
func TestProductionClockIgnoresAWallClockStep(t *testing.T) {
	now := time.Now()
	for _, step := range []time.Duration{24 * time.Hour, -time.Hour} {
		if a, b := monotonicSince(now), monotonicSince(stepWall(t, now, step)); a != b {
			t.Fatalf("a wall step of %v moved the limiter's clock from %d to %d", step, a, b)
		}
	}
	// MonotonicNow is monotonicSince of the current reading.
	a := MonotonicNow()
	b := monotonicSince(time.Now())
	c := MonotonicNow()
	if !(a <= b && b <= c) || c-a > Instant(time.Second) {
		t.Fatalf("MonotonicNow %d, %d around monotonicSince %d: not the same clock", a, c, b)
	}
	// And through the limiter: a drained bucket on the production clock's
	// arithmetic gains nothing from a day's wall step.
	l := mustNew(t, cfg(1, time.Hour, 1, time.Hour), nil)
	ctx := context.Background()
	if d := l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, monotonicSince(now)); !d.Allowed {
		t.Fatalf("first charge %+v, want admitted", d)
	}
	if d := l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, monotonicSince(stepWall(t, now, 24*time.Hour))); d.Allowed {
		t.Fatalf("admitted after a wall step of a day: %+v", d)
	}
}

func TestWallClockJumpAddsNoTokens(t *testing.T) {
	clk := &dualClock{wall: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	c := defaults()
	// The limiter's clock is an Instant: there is no way to hand it a wall
	// reading. The production clock, MonotonicNow, is time.Since of an
	// origin carrying a monotonic reading (asserted below).
	c.Now = func() Instant { return clk.mono }
	l := mustNew(t, c, nil)
	ctx := context.Background()
	for range 512 {
		l.Charge(ctx, "c", vocab.Mint, vocab.Admission)
	}
	clk.wall = clk.wall.Add(24 * time.Hour) // wall clock jumps a day ahead
	clk.mono += Instant(time.Millisecond)   // 1 ms of real time passes
	if d := l.Charge(ctx, "c", vocab.Mint, vocab.Admission); d.Allowed {
		t.Fatalf("admitted after a wall-clock jump: %+v", d)
	}
	if !strings.Contains(processOrigin.String(), "m=") {
		t.Fatalf("MonotonicNow's origin %v carries no monotonic reading", processOrigin)
	}
	if a, b := MonotonicNow(), MonotonicNow(); b < a {
		t.Fatalf("MonotonicNow went backwards: %d then %d", a, b)
	}
}

// TestChargeTimeChargesAtTheGivenInstantOnTheDefaultClock: on the default
// clock the caller's time.Now reading is the charge instant (an hour
// later refills the bucket without an hour passing); with an injected
// clock it is ignored and the limiter's own clock decides.
func TestChargeTimeChargesAtTheGivenInstantOnTheDefaultClock(t *testing.T) {
	cfg := Config{
		PredecisionRefusal: BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}
	ctx := context.Background()
	l := mustNew(t, cfg, nil)
	t0 := time.Now()
	if d := l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, t0); !d.Allowed {
		t.Fatal("first charge denied")
	}
	if d := l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, t0.Add(time.Minute)); d.Allowed || d.RetryAfterSeconds != 3540 {
		t.Fatalf("a minute later: %+v, want denied with retry after 3540 s", d)
	}
	if d := l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, t0.Add(time.Hour)); !d.Allowed {
		t.Fatalf("an hour later (by the given instant): %+v, want allowed", d)
	}

	cfg.Now = func() Instant { return 0 }
	l = mustNew(t, cfg, nil)
	l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, t0)
	if d := l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, t0.Add(time.Hour)); d.Allowed {
		t.Fatal("an injected clock standing still: the given instant refilled the bucket")
	}
}

type lastEvent struct{ ev Event }

func (s *lastEvent) Limited(_ context.Context, ev Event) { s.ev = ev }

// TestChargeTimeEventsCarryTheInstant: a limited ChargeTime passes its
// instant on to the sinks (the coalescing sink opens its window there);
// Charge, and ChargeTime on an injected clock, pass none.
func TestChargeTimeEventsCarryTheInstant(t *testing.T) {
	cfg := Config{
		PredecisionRefusal: BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          BucketConfig{Burst: 1, RefillInterval: time.Hour},
	}
	ctx := context.Background()
	for _, injected := range []bool{false, true} {
		if injected {
			cfg.Now = func() Instant { return 0 }
		}
		sink := &lastEvent{}
		l := mustNew(t, cfg, sink)
		t0 := time.Now()
		l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, t0)
		l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, t0)
		if want := !injected; sink.ev.At.Equal(t0) != want || (injected && !sink.ev.At.IsZero()) {
			t.Errorf("injected clock %v: event At %v, want %v", injected, sink.ev.At, map[bool]string{true: "t0", false: "zero"}[want])
		}
		l.Charge(ctx, "a", vocab.Mint, vocab.Admission)
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
	cfg := Config{
		PredecisionRefusal: BucketConfig{Burst: 1, RefillInterval: time.Hour},
		Admission:          BucketConfig{Burst: 1, RefillInterval: time.Hour},
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
			l := mustNew(t, cfg, sink)
			now := time.Now()
			if d := l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, now); !d.Allowed {
				t.Fatal("first charge denied")
			}
			at := tc.at(now)
			d := l.ChargeTime(ctx, "a", vocab.Mint, vocab.Admission, at)
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
