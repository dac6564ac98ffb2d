// Package coalesce turns limited invocations into counted audit records.
//
// The limiter stops a flood from filling the record store by not writing
// records, which would also make the flood invisible. The coalescing sink
// keeps the fact of it at a bounded cost: limited events sharing a key
// (caller identity, verb, limited bucket) within one window are counted,
// and each closed window becomes one "limited" record in the same store,
// written through its ordinary fallible Append. A sustained flood therefore
// costs at most one record per window per key (60 per hour per key at the
// default 60 s window), whatever its size.
//
// Windows are opened by a key's first event (arrival-anchored) and closed
// on the daemon's existing tick (Tick): a window past its deadline is
// written with window_end at the deadline, however late the tick. The
// open-window map is capped (MaxOpenWindows): at the cap the oldest window
// is flushed early, with window_end at the flush instant, rather than
// dropped or refused; Flush does the same for every open window at
// shutdown. So window_end − window_start never exceeds the window and is
// exactly the span the record's count covers.
//
// A record that cannot be written is logged at warn and counted; it
// refuses no invocation (the callers were answered long ago) and adds no
// skip mode to the store.
package coalesce

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// MaxOpenWindows caps the open-window map, for the same reason the
// limiter caps its entry map: windows are keyed on the caller identity, and
// an identity unstable across connections must not become memory
// exhaustion through the mechanism built to record it.
const MaxOpenWindows = 256

// Appender is where counted records are written: *audit.Store.
type Appender interface {
	Append(ctx context.Context, r *audit.Record) error
}

// Options configure a Sink.
type Options struct {
	// Next receives every event first; nil means limiter.Discard. In
	// production it is the OTel sink wrapping the counting sink, which stays
	// the single per-bucket counter in the tree.
	Next limiter.Sink
	// Store receives the counted records. Required.
	Store Appender
	// Window is registrar.rate_limit_coalesce_window_seconds. Required, > 0.
	Window time.Duration
	// Now reads the clock that opens windows; nil means time.Now. Its
	// readings should carry a monotonic reading (time.Now does).
	Now func() time.Time
	// Logger receives write failures; nil discards.
	Logger *slog.Logger
}

type key struct {
	identity string
	verb     limiter.Verb
	bucket   limiter.Bucket
}

type window struct {
	key      key
	start    time.Time
	deadline time.Time
	count    uint64
}

// Sink is the coalescing limiter.Sink. It is safe for concurrent use.
type Sink struct {
	next   limiter.Sink
	store  Appender
	window time.Duration
	now    func() time.Time
	logger *slog.Logger

	mu sync.Mutex
	// open maps a key to its open window's index in slots.
	open map[key]int32
	// slots is a ring of windows in opening order: the open ones, and ones
	// past their deadline that the next tick writes. Every window has the
	// same length, so opening order is deadline order: the oldest window is
	// always at head, and Tick pops from the head.
	slots [MaxOpenWindows]window
	head  int32
	n     int32

	records       [limiter.NumBuckets]atomic.Uint64
	earlyFlushes  atomic.Uint64
	writeFailures atomic.Uint64
}

var _ limiter.Sink = (*Sink)(nil)

// New returns a coalescing sink.
func New(o Options) (*Sink, error) {
	if o.Store == nil {
		return nil, errors.New("coalesce: New: nil store")
	}
	if o.Window <= 0 {
		return nil, errors.New("coalesce: New: window must be greater than 0")
	}
	s := &Sink{
		next:   o.Next,
		store:  o.Store,
		window: o.Window,
		now:    o.Now,
		logger: o.Logger,
		open:   make(map[key]int32, MaxOpenWindows),
	}
	if s.next == nil {
		s.next = limiter.Discard
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Limited forwards ev to the next sink, then counts it in its key's
// window, opening one if needed. At the cap, opening a window first
// flushes the oldest one early; that one record is written on the calling
// goroutine, after the lock is released.
func (s *Sink) Limited(ctx context.Context, ev limiter.Event) {
	s.next.Limited(ctx, ev)
	if !ev.Verb.Valid() || !ev.Bucket.Valid() {
		return
	}
	k := key{ev.Identity, ev.Verb, ev.Bucket}
	now := s.now()
	s.mu.Lock()
	if i, ok := s.open[k]; ok {
		if now.Before(s.slots[i].deadline) {
			s.slots[i].count++
			s.mu.Unlock()
			return
		}
		// Past its deadline but not yet written by a tick: it counted
		// every event up to its deadline and stays in the ring for the
		// tick; this event opens the key's next window.
		delete(s.open, k)
	}
	var evicted window
	early := s.n == MaxOpenWindows
	if early {
		evicted = s.pop()
	}
	i := (s.head + s.n) % MaxOpenWindows
	s.slots[i] = window{key: k, start: now, deadline: now.Add(s.window), count: 1}
	s.open[k] = i
	s.n++
	s.mu.Unlock()
	if early {
		s.earlyFlushes.Add(1)
		s.write(ctx, &evicted, now, "early")
	}
}

// pop removes the oldest window. s.mu is held and s.n > 0.
func (s *Sink) pop() window {
	w := s.slots[s.head]
	if i, ok := s.open[w.key]; ok && i == s.head {
		delete(s.open, w.key)
	}
	s.slots[s.head] = window{}
	s.head = (s.head + 1) % MaxOpenWindows
	s.n--
	return w
}

// Tick writes every window whose deadline is at or before now, each with
// window_end at its deadline. It is called from the daemon's one tick loop.
func (s *Sink) Tick(ctx context.Context, now time.Time) {
	var due [MaxOpenWindows]window
	d := 0
	s.mu.Lock()
	for s.n > 0 && !s.slots[s.head].deadline.After(now) {
		due[d] = s.pop()
		d++
	}
	s.mu.Unlock()
	for i := range due[:d] {
		s.write(ctx, &due[i], due[i].deadline, "deadline")
	}
}

// Flush writes every open window with window_end at now: the shutdown
// flush, so a counted record is never lost to a restart.
func (s *Sink) Flush(ctx context.Context, now time.Time) {
	var all [MaxOpenWindows]window
	d := 0
	s.mu.Lock()
	for s.n > 0 {
		all[d] = s.pop()
		d++
	}
	s.mu.Unlock()
	for i := range all[:d] {
		s.write(ctx, &all[i], now, "shutdown")
	}
}

// write appends w's counted record closing at end. end is expressed in
// w.start's wall-clock frame plus the elapsed monotonic time, clamped to
// [start, start+window], so a wall-clock step can neither invert nor
// stretch the window a record claims.
func (s *Sink) write(ctx context.Context, w *window, end time.Time, why string) {
	elapsed := end.Sub(w.start)
	elapsed = max(0, min(elapsed, s.window))
	r := &audit.Record{
		Phase:          audit.PhaseLimited,
		TS:             s.now(),
		Verb:           w.key.verb,
		CallerIdentity: w.key.identity,
		LimitedBucket:  w.key.bucket,
		Count:          w.count,
		WindowStart:    w.start,
		WindowEnd:      w.start.Add(elapsed),
	}
	// The invocations were answered long ago: a client hanging up must not
	// cancel the record of them.
	if err := s.store.Append(context.WithoutCancel(ctx), r); err != nil {
		s.writeFailures.Add(1)
		s.logger.LogAttrs(ctx, slog.LevelWarn, "counted record not written",
			slog.String("close", why),
			slog.String("verb", w.key.verb.String()),
			slog.String("limited_bucket", w.key.bucket.String()),
			slog.Uint64("count", w.count),
			slog.Any("error", err))
		return
	}
	s.records[w.key.bucket].Add(1)
}

// Stats is a point-in-time view for telemetry.
type Stats struct {
	// OpenWindows is the number of open windows, at most MaxOpenWindows.
	OpenWindows int
	// Records counts counted records written, per bucket, since start.
	Records [limiter.NumBuckets]uint64
	// EarlyFlushes counts windows flushed early at the cap.
	EarlyFlushes uint64
	// WriteFailures counts counted records that could not be written.
	WriteFailures uint64
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	n := int(s.n)
	s.mu.Unlock()
	st := Stats{OpenWindows: n, EarlyFlushes: s.earlyFlushes.Load(), WriteFailures: s.writeFailures.Load()}
	for b := range st.Records {
		st.Records[b] = s.records[b].Load()
	}
	return st
}
