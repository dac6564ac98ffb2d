package vocab

// Bucket names where an invocation was when the limiter was charged. It has
// exactly two values, shared by the limiter, the counted audit record's
// limited_bucket, the health member and the metrics.
//
// Bucket never carries the verb layer's fine-grained refusal reason: that
// reason is unknown where the limiter is charged, and a key that varied with
// it would let a caller multiply its budget by varying its refusal.
type Bucket uint8

const (
	// PredecisionRefusal is charged when the pure pre-derivation checks
	// failed: the cheapest thing a caller can make the daemon do. A limited
	// invocation here still gets its real, permanent refusal.
	PredecisionRefusal Bucket = iota
	// Admission is charged when every pre-derivation check passed, before
	// the intent write and before any backend work. A limited invocation
	// here is throttled (answered RegistrarBusy with a retry-after).
	Admission

	// NumBuckets is the number of buckets, for arrays indexed by Bucket.
	NumBuckets = 2
)

var buckets = NewEnum[Bucket]("Bucket", "bucket", []string{
	PredecisionRefusal: "predecision_refusal",
	Admission:          "admission",
})

// Valid reports whether b is one of the two buckets.
func (b Bucket) Valid() bool { return buckets.Valid(b) }

// String returns the bucket's spelling on every surface:
// "predecision_refusal" or "admission" (Bucket(N) for an invalid value).
func (b Bucket) String() string { return buckets.String(b) }

// MarshalText implements encoding.TextMarshaler; an invalid bucket is an
// error.
func (b Bucket) MarshalText() ([]byte, error) { return buckets.MarshalText(b) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// two spellings.
func (b *Bucket) UnmarshalText(text []byte) error { return buckets.UnmarshalText(b, text) }

// ParseBucket parses "predecision_refusal" or "admission".
func ParseBucket(s string) (Bucket, error) { return buckets.Parse(s) }
