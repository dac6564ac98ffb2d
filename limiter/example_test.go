package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func Example() {
	counts := counting.New()
	// A clock that moves only when told to: the example walks fixed steps.
	var now limiter.Instant
	l, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: 2, RefillInterval: 1500 * time.Millisecond},
		Now:                func() limiter.Instant { return now },
	}, counts)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	id := "unix-peer:uid=1000"
	for i := range 3 {
		d := l.Charge(ctx, id, vocab.Mint, vocab.Admission)
		fmt.Printf("charge %d: allowed=%v retry_after=%ds\n", i+1, d.Allowed, d.RetryAfterSeconds)
	}
	// Waiting the returned retry-after is enough.
	now += limiter.Instant(2 * time.Second)
	d := l.Charge(ctx, id, vocab.Mint, vocab.Admission)
	fmt.Printf("after 2 s: allowed=%v\n", d.Allowed)
	fmt.Printf("limited: predecision_refusal=%d admission=%d\n",
		counts.Count(vocab.PredecisionRefusal), counts.Count(vocab.Admission))
	// Output:
	// charge 1: allowed=true retry_after=0s
	// charge 2: allowed=true retry_after=0s
	// charge 3: allowed=false retry_after=2s
	// after 2 s: allowed=true
	// limited: predecision_refusal=0 admission=1
}
