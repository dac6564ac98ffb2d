package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestTokensNeverExceedBurst(t *testing.T) {
	l := mustNew(t, cfg(5, time.Second, 5, time.Second), nil)
	admitted(l, "c", vocab.Mint, vocab.Admission, 0, 5)
	// A long idle accrues far more than the burst; only the burst is usable.
	if got := admitted(l, "c", vocab.Mint, vocab.Admission, 1000*sec, 100); got != 5 {
		t.Fatalf("after a long idle admitted %d, want the burst 5", got)
	}
	// And time spent full earns no credit: right after, only whole
	// intervals since the drain count.
	if got := admitted(l, "c", vocab.Mint, vocab.Admission, 1000*sec+sec-1, 1); got != 0 {
		t.Fatalf("admitted %d just under one interval after the drain, want 0", got)
	}
}

func TestDrainedAtBoundaryGetsNoSecondBurst(t *testing.T) {
	// A fixed window would hand out a second full budget right after the
	// boundary; a token bucket hands out only what accrued.
	l := mustNew(t, cfg(10, time.Second, 10, time.Second), nil)
	if got := admitted(l, "c", vocab.Mint, vocab.Admission, sec-1, 10); got != 10 {
		t.Fatalf("first burst admitted %d, want 10", got)
	}
	for _, at := range []Instant{sec, sec + 1, 2*sec - 2} {
		if got := admitted(l, "c", vocab.Mint, vocab.Admission, at, 10); got != 0 {
			t.Fatalf("at %v admitted %d, want 0 (no interval elapsed since the drain)", time.Duration(at), got)
		}
	}
	if got := admitted(l, "c", vocab.Mint, vocab.Admission, 2*sec-1, 10); got != 1 {
		t.Fatalf("one interval after the drain admitted %d, want exactly 1", got)
	}
}

func TestPartialIntervalsAreBanked(t *testing.T) {
	// Burst 2, so the bucket is never full during the walk: a bucket that
	// reaches its burst banks nothing (time spent full earns no credit).
	l := mustNew(t, cfg(2, time.Second, 2, time.Second), nil)
	ctx := context.Background()
	admitted(l, "c", vocab.Mint, vocab.Admission, 0, 2) // drain
	steps := []struct {
		at   Instant
		want bool
	}{
		{600 * Instant(time.Millisecond), false},  // 0.6 s: nothing yet
		{1200 * Instant(time.Millisecond), true},  // 1 token; 0.2 s banked
		{1900 * Instant(time.Millisecond), false}, // 0.9 s since 1.0
		{2000 * Instant(time.Millisecond), true},  // banked 0.2 s + 0.8 s = 1 interval
	}
	for _, s := range steps {
		if got := l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, s.at).Allowed; got != s.want {
			t.Fatalf("at %v: allowed = %v, want %v", time.Duration(s.at), got, s.want)
		}
	}
}

// refModel is an exact reference token bucket kept as credit in
// nanoseconds: credit accrues continuously, capped at burst×interval, and a
// charge spends one interval of credit. It shares no code with the limiter.
type refModel struct {
	burst, interval int64
	credit          int64
	last            int64
}

func (m *refModel) charge(now int64) bool {
	if now > m.last {
		m.credit += now - m.last
		m.last = now
	}
	if limit := m.burst * m.interval; m.credit > limit {
		m.credit = limit
	}
	if m.credit >= m.interval {
		m.credit -= m.interval
		return true
	}
	return false
}

func TestOddIntervalsMatchExactReference(t *testing.T) {
	for _, tc := range []struct {
		name     string
		burst    uint32
		interval time.Duration
		horizon  time.Duration
	}{
		{"13s", 7, 13 * time.Second, 10 * 24 * time.Hour},
		{"1h", 3, time.Hour, 365 * 24 * time.Hour},
		{"333ms", 512, 333 * time.Millisecond, 6 * time.Hour},
		{"1ms", 2, time.Millisecond, 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustNew(t, cfg(tc.burst, tc.interval, tc.burst, tc.interval), nil)
			ref := &refModel{burst: int64(tc.burst), interval: int64(tc.interval), credit: int64(tc.burst) * int64(tc.interval)}
			rng := rand.New(rand.NewPCG(1, uint64(tc.interval)))
			var now int64
			var got, want int64
			// Charges arrive at irregular steps averaging a third of an
			// interval: the bucket alternates between drained and refilling,
			// which is where rounding loss would show.
			for now < int64(tc.horizon) {
				now += rng.Int64N(int64(tc.interval) * 2 / 3)
				a := l.ChargeAt(context.Background(), "c", vocab.Mint, vocab.Admission, Instant(now)).Allowed
				r := ref.charge(now)
				if a != r {
					t.Fatalf("at %v: limiter allowed=%v, reference allowed=%v", time.Duration(now), a, r)
				}
				if a {
					got++
				}
				if r {
					want++
				}
			}
			// Over the horizon exactly burst + horizon/interval tokens can
			// ever exist; with demand above the rate and a burst of at least
			// 2 the bucket is never full after the first burst, so none is
			// lost: a design that floors the rate would fall short here.
			max := int64(tc.burst) + now/int64(tc.interval)
			if got > max || got < max-int64(tc.burst)-1 {
				t.Fatalf("admitted %d over %v, want within [%d, %d]", got, time.Duration(now), max-int64(tc.burst)-1, max)
			}
			t.Logf("admitted %d over %v (reference %d, ceiling %d)", got, time.Duration(now), want, max)
		})
	}
}

func TestOutOfOrderInstantAddsNoTokens(t *testing.T) {
	l := mustNew(t, cfg(2, time.Second, 2, time.Second), nil)
	ctx := context.Background()
	admitted(l, "c", vocab.Mint, vocab.Admission, 10*sec, 2) // drained at 10 s
	e, ok := l.lookup("c", vocab.Mint, vocab.Admission)
	if !ok {
		t.Fatal("entry missing after charges")
	}
	before := e.tb.accruedAt
	// A charge whose clock was read earlier (outside the lock, under
	// contention) presents an instant before the last accrual.
	d := l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, 3*sec)
	if d.Allowed {
		t.Fatal("an earlier instant was admitted from a drained bucket")
	}
	if got := e.tb.accruedAt; got != before {
		t.Fatalf("accruedAt moved from %v to %v on an earlier instant", before, got)
	}
	// The retry-after is measured from the caller's own instant.
	if d.RetryAfterSeconds != 8 {
		t.Fatalf("retry-after at 3 s for a token due at 11 s = %d, want 8", d.RetryAfterSeconds)
	}
	if l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, 11*sec-1).Allowed {
		t.Fatal("admitted before one interval after the drain")
	}
	if !l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, 11*sec).Allowed {
		t.Fatal("not admitted one interval after the drain")
	}
}

func TestRetryAfter(t *testing.T) {
	ms := Instant(time.Millisecond)
	for _, tc := range []struct {
		interval time.Duration
		after    Instant // time since the drain
		want     uint64
	}{
		{500 * time.Millisecond, 0, 1},               // 0.5 s rounds up to 1
		{500 * time.Millisecond, 499 * ms, 1},        // 1 ns left: floor 1
		{1500 * time.Millisecond, 0, 2},              // 1.5 s rounds up to 2
		{1500 * time.Millisecond, 600 * ms, 1},       // 0.9 s → 1
		{1500 * time.Millisecond, 400 * ms, 2},       // 1.1 s → 2
		{13 * time.Second, 0, 13},                    //
		{13 * time.Second, 12*sec + 1, 1},            //
		{time.Hour, 0, 3600},                         //
		{time.Hour, Instant(time.Hour) - ms, 1},      //
		{time.Hour, Instant(30 * time.Minute), 1800}, //
	} {
		t.Run(fmt.Sprintf("%v+%v", tc.interval, time.Duration(tc.after)), func(t *testing.T) {
			l := mustNew(t, cfg(1, tc.interval, 1, tc.interval), nil)
			ctx := context.Background()
			l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, 0) // drain at 0
			now := tc.after
			d := l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, now)
			if d.Allowed {
				t.Fatalf("admitted at %v, want limited", time.Duration(now))
			}
			if d.RetryAfterSeconds != tc.want {
				t.Fatalf("retry-after = %d s, want %d s", d.RetryAfterSeconds, tc.want)
			}
			if d.RetryAfter() != time.Duration(tc.want)*time.Second {
				t.Fatalf("RetryAfter() = %v, want %d s", d.RetryAfter(), tc.want)
			}
			// Waiting exactly the returned retry-after is enough.
			if next := l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, now+Instant(d.RetryAfter())); !next.Allowed {
				t.Fatalf("a charge after waiting the retry-after was limited: %+v", next)
			}
		})
	}
}

func TestRetryAfterTracksAccrual(t *testing.T) {
	// At the shipped admission interval (500 ms) the retry-after is always 1
	// s; with a 10 s interval it counts down as the bucket accrues.
	l := mustNew(t, cfg(1, time.Second, 3, 10*time.Second), nil)
	ctx := context.Background()
	admitted(l, "c", vocab.Mint, vocab.Admission, 0, 3)
	var got []uint64
	for at := Instant(0); at < 10*sec; at += 2 * sec {
		got = append(got, l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, at).RetryAfterSeconds)
	}
	want := []uint64{10, 8, 6, 4, 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("retry-after every 2 s = %v, want %v", got, want)
	}
}
