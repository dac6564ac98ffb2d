package limiter_test

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
	}, sink)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func charge(l *limiter.Limiter, id string, v vocab.Verb, b vocab.Bucket, n int) {
	for range n {
		l.ChargeAt(context.Background(), id, v, b, 0)
	}
}

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

func TestConcurrentChargesRespectBurst(t *testing.T) {
	c := counting.New()
	l := newLimiter(t, 1, 1000, time.Hour, c)
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
	if total != 1000 || c.Count(vocab.Admission) != 3000 {
		t.Fatalf("%d workers admitted %d and limited %d, want exactly the burst 1000 and 3000", workers, total, c.Count(vocab.Admission))
	}
}
