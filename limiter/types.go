package limiter

import (
	"context"
	"fmt"
	"time"
)

// Verb is one of the registrar's two verbs. The zero value is Mint.
//
// Verb marshals to and from its wire spelling ("mint", "deregister") as text,
// so it can be used directly in JSON payloads and audit records.
type Verb uint8

// The two verbs. There are exactly two; NumVerbs sizes per-verb arrays.
const (
	Mint Verb = iota
	Deregister

	// NumVerbs is the number of verbs, for arrays indexed by Verb.
	NumVerbs = 2
)

// Valid reports whether v is one of the two verbs.
func (v Verb) Valid() bool { return v < NumVerbs }

// String returns the verb's spelling on every surface: "mint" or "deregister".
func (v Verb) String() string {
	switch v {
	case Mint:
		return "mint"
	case Deregister:
		return "deregister"
	}
	return fmt.Sprintf("Verb(%d)", uint8(v))
}

// MarshalText implements encoding.TextMarshaler. An invalid verb is an error,
// never a made-up spelling.
func (v Verb) MarshalText() ([]byte, error) {
	if !v.Valid() {
		return nil, fmt.Errorf("limiter: invalid verb %d", uint8(v))
	}
	return []byte(v.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// two spellings.
func (v *Verb) UnmarshalText(b []byte) error {
	p, err := ParseVerb(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// ParseVerb parses "mint" or "deregister" (exact spelling, no case folding).
func ParseVerb(s string) (Verb, error) {
	switch s {
	case "mint":
		return Mint, nil
	case "deregister":
		return Deregister, nil
	}
	return 0, fmt.Errorf("limiter: unknown verb %q (want \"mint\" or \"deregister\")", s)
}

// Bucket names where an invocation was when the limiter was charged. It has
// exactly two values, and is exported so the evidence code (the counted audit
// record's limited_bucket, the health member, the metrics) reuses it rather
// than declaring its own.
//
// Bucket never carries the verb layer's fine-grained refusal reason: that
// reason is unknown where the limiter is charged, and a key that varied with it
// would let a caller multiply its budget by varying its refusal.
type Bucket uint8

const (
	// PredecisionRefusal is charged when the pure pre-derivation checks
	// failed: the cheapest thing a caller can make the daemon do. A limited
	// invocation here still gets its real, permanent refusal.
	PredecisionRefusal Bucket = iota
	// Admission is charged when every pre-derivation check passed, before
	// the intent write and before any backend work. A limited invocation here
	// is throttled (answered RegistrarBusy with a retry-after).
	Admission

	// NumBuckets is the number of buckets, for arrays indexed by Bucket.
	NumBuckets = 2
)

// Valid reports whether b is one of the two buckets.
func (b Bucket) Valid() bool { return b < NumBuckets }

// String returns the bucket's spelling on every surface:
// "predecision_refusal" or "admission".
func (b Bucket) String() string {
	switch b {
	case PredecisionRefusal:
		return "predecision_refusal"
	case Admission:
		return "admission"
	}
	return fmt.Sprintf("Bucket(%d)", uint8(b))
}

// MarshalText implements encoding.TextMarshaler.
func (b Bucket) MarshalText() ([]byte, error) {
	if !b.Valid() {
		return nil, fmt.Errorf("limiter: invalid bucket %d", uint8(b))
	}
	return []byte(b.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// two spellings.
func (b *Bucket) UnmarshalText(text []byte) error {
	p, err := ParseBucket(string(text))
	if err != nil {
		return err
	}
	*b = p
	return nil
}

// ParseBucket parses "predecision_refusal" or "admission".
func ParseBucket(s string) (Bucket, error) {
	switch s {
	case "predecision_refusal":
		return PredecisionRefusal, nil
	case "admission":
		return Admission, nil
	}
	return 0, fmt.Errorf("limiter: unknown bucket %q (want \"predecision_refusal\" or \"admission\")", s)
}

// Event describes one limited charge: the invocation's audit records were
// suppressed. The limiter publishes exactly one Event per limited charge and
// none for an admitted one.
type Event struct {
	// Identity is the caller identity exactly as the transport produced it.
	Identity string
	// Verb is the invoked verb.
	Verb Verb
	// Bucket is the bucket that had no token.
	Bucket Bucket
	// RetryAfterSeconds is the time until that bucket holds one token,
	// rounded up to whole seconds, at least 1.
	RetryAfterSeconds uint64
	// Overflow reports that the charge fell on the shared overflow bucket of
	// (Verb, Bucket) because the entry map was saturated with drained entries.
	Overflow bool
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
