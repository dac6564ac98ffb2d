package limiter

import (
	"context"
	"testing"
	"time"
	"unsafe"
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
	if d := l.ChargeAt(ctx, "c", Mint, Admission, monotonicSince(now)); !d.Allowed {
		t.Fatalf("first charge %+v, want admitted", d)
	}
	if d := l.ChargeAt(ctx, "c", Mint, Admission, monotonicSince(stepWall(t, now, 24*time.Hour))); d.Allowed {
		t.Fatalf("admitted after a wall step of a day: %+v", d)
	}
}

// TestOverflowBucketsAreSizedPerBucket gives the two buckets different
// bursts and intervals: each overflow bucket admits its own bucket's burst,
// refills at its own interval and reports its own retry-after.
func TestOverflowBucketsAreSizedPerBucket(t *testing.T) {
	const prBurst, admBurst = 2, 7
	prInt, admInt := 3*time.Second, 5*time.Second
	for _, v := range []Verb{Mint, Deregister} {
		l := mustNew(t, cfg(prBurst, prInt, admBurst, admInt), nil)
		saturateDrained(t, l, 0)
		for _, tc := range []struct {
			b        Bucket
			burst    int
			interval time.Duration
			retry    uint64
		}{{PredecisionRefusal, prBurst, prInt, 3}, {Admission, admBurst, admInt, 5}} {
			n := 0
			var last Decision
			for i := range 20 {
				last = chargeChecked(t, l, "absent-"+tc.b.String()+string(rune('a'+i)), v, tc.b, 0)
				if !last.Overflow {
					t.Fatalf("%v/%v: charge %d not on the overflow bucket", v, tc.b, i)
				}
				if !last.Allowed {
					break
				}
				n++
			}
			if n != tc.burst || last.RetryAfterSeconds != tc.retry {
				t.Fatalf("%v/%v overflow admitted %d then retry-after %d; want its own burst %d and interval %d s", v, tc.b, n, last.RetryAfterSeconds, tc.burst, tc.retry)
			}
			at := Instant(tc.interval)
			if d := chargeChecked(t, l, "later-"+tc.b.String(), v, tc.b, at); !d.Allowed {
				t.Fatalf("%v/%v overflow not refilled after its own interval: %+v", v, tc.b, d)
			}
			if d := chargeChecked(t, l, "later2-"+tc.b.String(), v, tc.b, at); d.Allowed {
				t.Fatalf("%v/%v overflow gave two tokens for one interval: %+v", v, tc.b, d)
			}
		}
	}
}
