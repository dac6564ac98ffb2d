package loadgen

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// Pacing a wave by the registrar's RateLimit fields (WaveOptions.Pace):
// every call of a wave is one identity's, charged to one admission bucket,
// so the workers share one pacer, which lets a call through only when the
// latest answers say the bucket holds a token for it.
//
// The pacer counts calls, not tokens. An answer X with r tokens left says
// that after X's charge the bucket held r; every call charged after X is
// one that had not finished when X was sent (a call that finished before
// X was sent was charged before it). So if a calls had finished when X was
// sent, the wave's calls numbered 1 .. a+1+r all find a token, whatever
// order the server charged them in and the answers came back in: allowed
// is the largest such a+1+r seen. Refills only add tokens, so this errs on
// the side of waiting.
//
// When every allowed call has been sent and all have finished (none in
// flight can raise allowed), the bucket is empty as far as the pacer
// knows, and it waits one refill before letting one more call through: the
// policy's w/q (QuotaPolicy.Interval, never shorter than the bucket's
// refill interval, since the registrar rounds w up), or, for a policy the
// answer did not describe, the longest t of the answers since the last
// wait (t is the time until the bucket's next token, rounded up). The wait
// starts after the last answer arrived, so after every charge: the bucket
// has gained a token by its end. An answer without a usable RateLimit
// field raises nothing, so without the fields the wave goes one call at a
// time, and a 429 is retried after its retry_after as unpaced.

// Pacing is what pacing a wave cost.
type Pacing struct {
	// Wait is the time the wave stood still waiting for the bucket to
	// refill (every call allowed had been answered), and Waits how many
	// times it did.
	Wait  time.Duration
	Waits uint64
	// Uninformed counts answers without a usable RateLimit field (absent
	// or malformed): each let the next call through only after it.
	Uninformed uint64
}

// pacer spaces one identity's calls by its answers' RateLimit fields. It
// is safe for concurrent use.
type pacer struct {
	sleep func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	sent      uint64 // calls let through
	finished  uint64 // calls answered or failed
	allowed   uint64 // calls 1..allowed find a token
	refill    time.Duration
	refilling bool
	changed   chan struct{} // closed and replaced when the state changes
	stats     Pacing
}

// ticket is a call let through: how many calls had finished then.
type ticket struct{ finished uint64 }

func newPacer(sleep func(ctx context.Context, d time.Duration) error) *pacer {
	// The first call goes alone: until its answer, nothing is known.
	return &pacer{sleep: sleep, allowed: 1, changed: make(chan struct{})}
}

// broadcast wakes every waiting acquire; p.mu is held.
func (p *pacer) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// acquire waits until one more call may be sent, or ctx is done.
func (p *pacer) acquire(ctx context.Context) (ticket, error) {
	p.mu.Lock()
	for {
		if err := ctx.Err(); err != nil {
			p.mu.Unlock()
			return ticket{}, err
		}
		if p.sent < p.allowed {
			p.sent++
			t := ticket{finished: p.finished}
			p.mu.Unlock()
			return t, nil
		}
		if p.sent == p.finished && !p.refilling {
			// Every call allowed is answered: wait for the bucket (no
			// wait when no answer said how long: one call at a time).
			d := p.refill
			var err error
			if d > 0 {
				p.refilling = true
				p.mu.Unlock()
				err = p.sleep(ctx, d)
				p.mu.Lock()
				p.refilling = false
			}
			if err == nil {
				p.allowed = max(p.allowed, p.sent+1)
				p.refill = 0
				if d > 0 {
					p.stats.Wait += d
					p.stats.Waits++
				}
			}
			p.broadcast()
			if err != nil {
				p.mu.Unlock()
				return ticket{}, err
			}
			continue
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ticket{}, ctx.Err()
		}
		p.mu.Lock()
	}
}

// done records the answer of a call let through with t; resp is nil for a
// call that got no answer.
func (p *pacer) done(t ticket, resp *wire.Response) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished++
	switch remaining, refill, ok := budget(resp); {
	case ok:
		p.allowed = max(p.allowed, t.finished+1+remaining)
		p.refill = max(p.refill, refill)
	case resp != nil:
		p.stats.Uninformed++
	}
	p.broadcast()
}

// budget reads an answer's RateLimit fields: the fewest tokens any of its
// policies has left, and the wait for one more token under the policy
// that has the fewest (its w/q, else its t). ok is false when the answer
// has no usable RateLimit field.
func budget(resp *wire.Response) (remaining uint64, refill time.Duration, ok bool) {
	if resp == nil || resp.RateLimit == nil {
		return 0, 0, false
	}
	for i, l := range resp.RateLimit.Limits {
		wait := time.Duration(math.MaxInt64) // t seconds, saturated
		if l.EffectiveWindow < uint64(math.MaxInt64/time.Second) {
			wait = time.Duration(l.EffectiveWindow) * time.Second
		}
		if resp.RateLimitPolicy != nil {
			if p, known := resp.RateLimitPolicy.Lookup(l.Name); known && p.Interval() > 0 {
				wait = p.Interval()
			}
		}
		switch {
		case i == 0 || l.Remaining < remaining:
			remaining, refill = l.Remaining, wait
		case l.Remaining == remaining:
			refill = max(refill, wait)
		}
	}
	return remaining, refill, true
}

// report returns what pacing cost so far.
func (p *pacer) report() *Pacing {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	return &s
}
