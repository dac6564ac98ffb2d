package coalesce

import (
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// OpenWindow is a window whose counted record is not durable yet, as
// Snapshot reports it: open or past its deadline in the ring, flushed early
// and waiting in the hand-off, or being written by Run. It is what the
// checkpoint holds (checkpoint.go): the key, the start and
// the count, and nothing of the limiter's buckets.
type OpenWindow struct {
	Identity string
	Verb     vocab.Verb
	Bucket   vocab.Bucket
	// Policy is the caller policy, "" for the default one.
	Policy string
	// Shadow: the window counts shadow charges.
	Shadow bool
	// Start is the window's start, as its record's window_start.
	Start time.Time
	// Count is the number of limited invocations counted so far, ≥ 1.
	Count uint64
}

// Snapshot appends to dst every window not yet durable (see OpenWindow),
// oldest first, and returns it with the sink's change generation: a number
// that moves whenever a window opens, counts, closes or becomes durable, so
// a caller that wrote the snapshot of generation g need not write again
// while Snapshot keeps returning g. It takes the sink's lock once, for a
// copy of at most 3 × MaxOpenWindows entries (ring, hand-off, the batch
// being written), and does no I/O.
func (s *Sink) Snapshot(dst []OpenWindow) ([]OpenWindow, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	put := func(w *window) {
		dst = append(dst, OpenWindow{Identity: w.key.identity, Verb: w.key.verb, Bucket: w.key.bucket, Policy: w.key.policy, Shadow: w.key.shadow, Start: w.start, Count: w.count})
	}
	for i := range s.writing {
		put(&s.writing[i].w)
	}
	for i := range s.pN {
		put(&s.pend[(s.pHead+i)%MaxPending].w)
	}
	for i := range s.n {
		put(&s.slots[(s.head+i)%MaxOpenWindows])
	}
	return dst, s.gen
}

// Generation returns the change generation Snapshot would return, without
// copying anything.
func (s *Sink) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Record returns w's counted record closed at end and written at ts, with
// the same field set as every record the sink writes: window_end is end,
// clamped to [start, start+window].
// It is how recovery (recover.go) turns a recovered window into the record the sink
// would have written.
func (w OpenWindow) Record(length time.Duration, end, ts time.Time) *audit.Record {
	s := Sink{window: length}
	k := keyOf(&limiter.Event{Identity: w.Identity, Verb: w.Verb, Bucket: w.Bucket, Policy: w.Policy, Shadow: w.Shadow})
	c := closed{w: window{key: k, start: w.Start, count: w.Count}, end: end}
	return s.record(&c, ts)
}
