// Package counting provides the default limited-invocation sink: two uint64
// counters, one per vocab.Bucket, counting limited invocations since the
// process started.
//
// The two counters are never summed anywhere: a rising predecision_refusal
// count says someone is flooding malformed input while those callers still
// got their real answers; a rising admission count says legitimate traffic is
// being held back and a bring-up may be stalling.
//
// The production sink chain wraps this sink (coalesce → otelsink → counting);
// it is the single per-bucket counter in the tree, and the registrar_health
// limiter member reads it.
//
// A shadow event (limiter.Event.Shadow) is not counted: it says a call
// would have been limited by its policy's candidate (shadow) sizes, and
// the call was answered as if the shadow did not exist. The health
// snapshot's counts are of invocations that were limited, so they stay
// what they would be without a shadow; shadow charges are counted by
// otelsink (registrar_shadow_limited_total) and in the counted evidence.
package counting

import (
	"context"
	"sync/atomic"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Sink counts limited invocations per bucket. The zero value is ready to
// use. It is safe for concurrent use and Limited does not allocate.
type Sink struct {
	counts [vocab.NumBuckets]atomic.Uint64
}

var _ limiter.Sink = (*Sink)(nil)

// New returns a Sink with both counters at zero.
func New() *Sink { return new(Sink) }

// Limited counts ev against its bucket. A shadow event, or one with an
// invalid bucket, is ignored.
func (s *Sink) Limited(_ context.Context, ev limiter.Event) {
	if !ev.Shadow && ev.Bucket.Valid() {
		s.counts[ev.Bucket].Add(1)
	}
}

// Count returns the number of limited invocations on bucket b since start
// (0 for an invalid bucket).
func (s *Sink) Count(b vocab.Bucket) uint64 {
	if !b.Valid() {
		return 0
	}
	return s.counts[b].Load()
}

// Counts is a read of both counters.
type Counts struct {
	PredecisionRefusal uint64
	Admission          uint64
}

// Counts reads both counters. Each is read atomically; the pair is not a
// single atomic snapshot, which no reader needs.
func (s *Sink) Counts() Counts {
	return Counts{
		PredecisionRefusal: s.counts[vocab.PredecisionRefusal].Load(),
		Admission:          s.counts[vocab.Admission].Load(),
	}
}
