package limiter

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

const sec = Instant(time.Second)

// recorder is a Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Limited(_ context.Context, ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func cfg(prBurst uint32, prInterval time.Duration, admBurst uint32, admInterval time.Duration) Config {
	return Config{
		PredecisionRefusal: BucketConfig{Burst: prBurst, RefillInterval: prInterval},
		Admission:          BucketConfig{Burst: admBurst, RefillInterval: admInterval},
	}
}

// defaults mirrors the shipped configuration: refusal 32 per 1 s, admission
// 512 per 500 ms.
func defaults() Config { return cfg(32, time.Second, 512, 500*time.Millisecond) }

func mustNew(t testing.TB, c Config, s Sink) *Limiter {
	t.Helper()
	l, err := New(c, s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// pair is one of an identity's four (verb, bucket) keys.
type pair struct {
	v vocab.Verb
	b vocab.Bucket
}

// everyPair lists the four.
var everyPair = []pair{{vocab.Mint, vocab.Admission}, {vocab.Mint, vocab.PredecisionRefusal}, {vocab.Deregister, vocab.Admission}, {vocab.Deregister, vocab.PredecisionRefusal}}

// admitted charges n times at now and returns how many were allowed.
func admitted(l *Limiter, id string, v vocab.Verb, b vocab.Bucket, now Instant, n int) int {
	got := 0
	for range n {
		if l.ChargeAt(context.Background(), id, v, b, now).Allowed {
			got++
		}
	}
	return got
}

func TestNewRejectsZeroBurstAndInterval(t *testing.T) {
	for _, c := range []Config{
		cfg(0, time.Second, 1, time.Second),
		cfg(1, 0, 1, time.Second),
		cfg(1, time.Second, 0, time.Second),
		cfg(1, time.Second, 1, -time.Second),
	} {
		if _, err := New(c, nil); err == nil {
			t.Errorf("New(%+v) = nil error, want ErrInvalidConfig", c)
		}
	}
}

func TestFreshLimiterAdmitsFullBurstThenLimits(t *testing.T) {
	l := mustNew(t, defaults(), nil)
	if got := admitted(l, "unix-peer:uid=0", vocab.Mint, vocab.Admission, 0, 600); got != 512 {
		t.Fatalf("admitted %d of 600 at one instant, want the burst 512", got)
	}
	d := l.ChargeAt(context.Background(), "unix-peer:uid=0", vocab.Mint, vocab.Admission, 0)
	if d.Allowed || d.RetryAfterSeconds != 1 {
		t.Fatalf("after the burst got %+v, want limited with retry-after 1 s (500 ms rounded up)", d)
	}
}

func TestRestartedLimiterStartsFull(t *testing.T) {
	l := mustNew(t, defaults(), nil)
	admitted(l, "c", vocab.Mint, vocab.Admission, 0, 512)
	// Nothing is persisted: a new limiter (a restart) starts full.
	l = mustNew(t, defaults(), nil)
	if got := admitted(l, "c", vocab.Mint, vocab.Admission, 0, 512); got != 512 {
		t.Fatalf("restarted limiter admitted %d, want 512", got)
	}
}

// dualClock has a wall reading and a monotonic reading that move
// independently, as they do when an operator or NTP steps the wall clock.
type dualClock struct {
	wall time.Time
	mono Instant
}

func TestBucketsAndVerbsAreIndependent(t *testing.T) {
	for _, drained := range everyPair {
		t.Run(drained.v.String()+"/"+drained.b.String(), func(t *testing.T) {
			l := mustNew(t, cfg(4, time.Second, 4, time.Second), nil)
			admitted(l, "c", drained.v, drained.b, 0, 100)
			for _, v := range []vocab.Verb{vocab.Mint, vocab.Deregister} {
				for _, b := range []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission} {
					want := 4
					if v == drained.v && b == drained.b {
						want = 0
					}
					if got := admitted(l, "c", v, b, 0, 4); got != want {
						t.Errorf("%v/%v admitted %d, want %d", v, b, got, want)
					}
				}
			}
			// Another identity is untouched too.
			if got := admitted(l, "other", drained.v, drained.b, 0, 4); got != 4 {
				t.Errorf("another identity admitted %d, want 4", got)
			}
		})
	}
}

func TestRefusalFloodNeverTouchesAdmission(t *testing.T) {
	rec := &recorder{}
	l := mustNew(t, defaults(), rec)
	ctx := context.Background()
	for i := range 100_000 {
		l.ChargeAt(ctx, "attacker", vocab.Mint, vocab.PredecisionRefusal, Instant(i)*Instant(time.Millisecond))
	}
	if got := admitted(l, "attacker", vocab.Mint, vocab.Admission, 100*sec, 512); got != 512 {
		t.Fatalf("after a refusal flood the same identity's admission bucket admitted %d, want 512", got)
	}
	for _, ev := range rec.events {
		if ev.Bucket != vocab.PredecisionRefusal {
			t.Fatalf("refusal flood produced an event on %v", ev.Bucket)
		}
	}
}

func TestLegitimateBringUpWaveIsNotThrottled(t *testing.T) {
	// The reference wave, 64 hosts × 8 modules, from the single control
	// plane identity, all at once.
	rec := &recorder{}
	l := mustNew(t, defaults(), rec)
	if got := admitted(l, "registrar-client:spiffe://ctl", vocab.Mint, vocab.Admission, 0, 64*8); got != 512 {
		t.Fatalf("bring-up wave admitted %d of 512", got)
	}
	if rec.len() != 0 {
		t.Fatalf("bring-up wave produced %d limited events, want 0", rec.len())
	}
}

func TestLargerWaveCompletesInSizedTime(t *testing.T) {
	// 1600 mints at the defaults take (1600−512)×500/1000 = 544 s extra.
	l := mustNew(t, defaults(), nil)
	ctx := context.Background()
	now, done := Instant(0), 0
	for done < 1600 {
		d := l.ChargeAt(ctx, "c", vocab.Mint, vocab.Admission, now)
		if d.Allowed {
			done++
			continue
		}
		now += Instant(d.RetryAfter())
	}
	if got := time.Duration(now); got < 544*time.Second || got > 544*time.Second+time.Second {
		t.Fatalf("1600 mints completed after %v, want 544 s (+ at most 1 s of rounding)", got)
	}
}

// TestConcurrentChargesRespectBurst: charges racing on one key admit
// exactly the burst, and every other charge is one limited event.
func TestConcurrentChargesRespectBurst(t *testing.T) {
	rec := &recorder{}
	l := mustNew(t, cfg(1, time.Hour, 1000, time.Hour), rec)
	const workers = 8
	results := make(chan int, workers)
	for range workers {
		go func() {
			n := 0
			for range 500 {
				if l.Charge(context.Background(), "c", vocab.Mint, vocab.Admission).Allowed {
					n++
				}
			}
			results <- n
		}()
	}
	total := 0
	for range workers {
		total += <-results
	}
	if total != 1000 || rec.len() != 3000 {
		t.Fatalf("%d workers admitted %d and limited %d, want exactly the burst 1000 and 3000", workers, total, rec.len())
	}
}
