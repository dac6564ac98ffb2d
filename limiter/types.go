package limiter

import (
	"context"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Event describes one limited charge: the invocation's audit records were
// suppressed. The limiter publishes exactly one Event per limited charge and
// none for an admitted one.
type Event struct {
	// Identity is the caller identity exactly as the transport produced it.
	Identity string
	// Verb is the invoked verb.
	Verb vocab.Verb
	// Bucket is the bucket that had no token.
	Bucket vocab.Bucket
	// RetryAfterSeconds is the time until that bucket holds one token,
	// rounded up to whole seconds, at least 1.
	RetryAfterSeconds uint64
	// Overflow reports that the charge fell on the shared overflow bucket of
	// (Verb, Bucket) because the entry map was saturated with drained entries.
	Overflow bool
	// Policy is the name of the caller policy whose sizes the charged
	// bucket had ("default" for the [registrar] sizes). The set of names is
	// bounded by the configuration, so it may label a metric; the identity
	// may not.
	Policy string
	// Shadow reports a shadow charge: the call would have been limited by
	// its policy's shadow sizes, and was not limited by the enforced ones
	// for that reason (the enforced decision is reported, if limited, by an
	// event of its own with Shadow false). A sink that counts limited
	// invocations must not count a shadow event as one.
	Shadow bool
	// At is the clock reading the charge was made at, when the charger
	// passed one (Limiter.ChargeTime on the default clock); zero
	// otherwise. A sink on the wall clock may use it instead of reading
	// the clock again.
	At time.Time
}

// Sink receives limited-invocation events. The limiter holds exactly one
// Sink and calls it after its own lock is released, on the invoking
// goroutine, with the invocation's context (which carries its span).
//
// Sinks compose by wrapping: an implementation may take another Sink and
// forward every event to it. Implementations must be safe for concurrent use
// and must not block for long: Limited runs on the request path.
type Sink interface {
	Limited(ctx context.Context, ev Event)
}

// Discard is a Sink that does nothing.
var Discard Sink = discard{}

type discard struct{}

func (discard) Limited(context.Context, Event) {}
