package counting_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func newLimiter(t testing.TB, prBurst, admBurst uint32, interval time.Duration, sink limiter.Sink) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: prBurst, RefillInterval: interval},
		Admission:          limiter.BucketConfig{Burst: admBurst, RefillInterval: interval},
		Now:                func() limiter.Instant { return 0 }, // a stopped clock: nothing refills
	}, sink)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func charge(l *limiter.Limiter, id string, v vocab.Verb, b vocab.Bucket, n int) {
	for range n {
		l.Charge(context.Background(), id, v, b)
	}
}

// TestCountingSinkCountsOnlyItsBucket: each limited charge moves the
// counter of its own bucket, and only that one.
func TestCountingSinkCountsOnlyItsBucket(t *testing.T) {
	for _, b := range []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission} {
		t.Run(b.String(), func(t *testing.T) {
			s := counting.New()
			l := newLimiter(t, 32, 512, time.Second, s)
			burst := 32
			if b == vocab.Admission {
				burst = 512
			}
			charge(l, "c", vocab.Mint, b, burst+100)
			charge(l, "c", vocab.Deregister, b, burst+23)
			if got := s.Count(b); got != 123 {
				t.Fatalf("%v counter = %d, want 123", b, got)
			}
			if got := s.Count(1 - b); got != 0 {
				t.Fatalf("the other counter moved to %d", got)
			}
		})
	}
}

// forward is the trivial wrapping sink: it takes another sink and forwards
// every event, as the coalescing and OTel sinks do.
type forward struct {
	next limiter.Sink
	seen int
}

func (f *forward) Limited(ctx context.Context, ev limiter.Event) {
	f.seen++
	f.next.Limited(ctx, ev)
}

// TestForwardingWrapperStillMovesBothCounters: a sink that wraps the
// counting sink and forwards every event leaves both counts exact.
func TestForwardingWrapperStillMovesBothCounters(t *testing.T) {
	c := counting.New()
	w := &forward{next: c}
	l := newLimiter(t, 2, 4, time.Second, w)
	charge(l, "c", vocab.Mint, vocab.PredecisionRefusal, 12)
	charge(l, "c", vocab.Mint, vocab.Admission, 7)
	got := c.Counts()
	if got.PredecisionRefusal != 10 || got.Admission != 3 || w.seen != 13 {
		t.Fatalf("counts %+v, wrapper saw %d; want 10 and 3, 13 seen", got, w.seen)
	}
}

// TestShadowEventsAreNotCountedAsLimited: a shadow charge says the call
// would have been limited by candidate sizes; it was answered, so neither
// counter moves, while the enforced events around it still count.
func TestShadowEventsAreNotCountedAsLimited(t *testing.T) {
	s := counting.New()
	ctx := context.Background()
	for _, b := range []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission} {
		s.Limited(ctx, limiter.Event{Identity: "c", Verb: vocab.Mint, Bucket: b, Policy: "agents", Shadow: true})
		s.Limited(ctx, limiter.Event{Identity: "c", Verb: vocab.Mint, Bucket: b, Policy: "agents", Shadow: true})
	}
	s.Limited(ctx, limiter.Event{Identity: "c", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "agents"})
	if got := s.Counts(); got.PredecisionRefusal != 0 || got.Admission != 1 {
		t.Fatalf("counts %+v after four shadow events and one enforced admission event; want 0 and 1", got)
	}
}
