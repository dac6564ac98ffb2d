package limiter

import (
	"context"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The limiter's clock: Instants on the runtime's monotonic clock, and the
// charge at a reading the caller has just taken.

// Instant is a reading of a monotonic clock in nanoseconds since an arbitrary
// origin. The limiter's arithmetic is done on Instants only, never on wall
// time, so a wall-clock step cannot mint tokens.
type Instant int64

// processOrigin is the origin of MonotonicNow. time.Since uses the monotonic
// reading time.Now attaches, so MonotonicNow ignores wall-clock steps.
var processOrigin = time.Now()

// MonotonicNow reads the runtime's monotonic clock. It is the limiter's
// default clock. time.Since reads only the monotonic clock when its
// argument carries a monotonic reading (processOrigin does), so this costs
// one clock read, not time.Now's two (wall and monotonic): on the
// development VM about 30 ns against 60.
func MonotonicNow() Instant { return Instant(time.Since(processOrigin)) }

// monotonicSince is now's Instant: its distance from processOrigin on the
// monotonic clock both carry, whatever their wall readings say.
func monotonicSince(now time.Time) Instant { return Instant(now.Sub(processOrigin)) }

// Now reads the limiter's clock.
func (l *Limiter) Now() Instant { return l.now() }

// ChargeTime is Charge for a caller that has just read the clock: t, a
// time.Now reading, stands in for the limiter's own clock read when the
// limiter runs on its default clock (MonotonicNow), and a limited charge's
// Event carries it as At. Only t's monotonic reading is used: a t without
// one (t.UTC(), t.Round(0), a parsed or constructed time; t == t.Round(0))
// is not trusted, and the limiter reads its own clock instead, so no
// wall-clock reading, and no step of the wall clock, ever reaches a
// bucket. A limiter built with Config.Now reads that clock, as Charge
// does, and its events carry no At. The daemon's verbs pass the instant
// the invocation arrived: on a virtual machine a clock read costs about
// 50 ns, and the invocation has read the clock for its duration already.
// An instant a little in the past is allowed for (it is clamped, never
// moving a bucket's accrual backwards).
//
// There is no exported way to charge at an instant the caller makes up:
// the limiter's instants come from its own clock or from a monotonic
// reading of the runtime's.
func (l *Limiter) ChargeTime(ctx context.Context, identity string, verb vocab.Verb, bucket vocab.Bucket, t time.Time) Decision {
	c := l.Caller(identity)
	return l.ChargeCaller(ctx, &c, verb, bucket, t)
}

// ChargeCaller is ChargeTime for a Caller prepared once (Limiter.Caller):
// the charge of a present key then neither hashes the identity nor asks
// which pool or policy it has.
//
// A zero t asks for the limiter's own clock (MonotonicNow: one monotonic
// read) and gives events no At.
func (l *Limiter) ChargeCaller(ctx context.Context, c *Caller, verb vocab.Verb, bucket vocab.Bucket, t time.Time) Decision {
	return l.charge(ctx, c, verb, bucket, 0, t, true)
}

// instantOf is the instant of a charge ChargeCaller was asked to make at t,
// and the reading an event carries as At. charge reads the default clock
// itself for a zero t; here a zero t, like any t without a monotonic
// reading, reads it too.
func (l *Limiter) instantOf(t time.Time) (Instant, time.Time) {
	switch {
	case !l.wallClock:
		return l.now(), time.Time{}
	case t == t.Round(0):
		// No monotonic reading: t.Sub would subtract wall readings, and a
		// wall step would mint (or drain) tokens. Read the clock instead.
		t = time.Now()
	}
	return monotonicSince(t), t
}
