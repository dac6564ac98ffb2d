// Package coalesce turns limited invocations into counted audit records.
//
// The limiter stops a flood from filling the record store by not writing
// records, which would also make the flood invisible. The coalescing sink
// keeps the fact of it at a bounded cost: limited events sharing a key
// (caller identity, verb, limited bucket, caller policy, shadow) within one
// window are counted, and each closed window becomes one "limited" record
// in the same store, written through its ordinary fallible batch append. A
// sustained flood therefore costs at most one record per window per key
// (60 per hour per key at the default 60 s window), whatever its size.
//
// Shadow events (limiter.Event.Shadow: calls a caller policy's shadow
// sizes would have limited, none limited for that reason) are coalesced the
// same way into windows of their own, never merged with an enforced window
// of the same caller: their record says "shadow": true. The policy is part
// of the key too, so a reload that moves a caller to another policy closes
// nothing early but opens the caller's next window under the new policy;
// each record names the policy whose sizes its events had.
//
// Windows are opened by a key's first event (arrival-anchored) and closed
// on the daemon's existing tick (Tick): a window past its deadline is
// written with window_end at the deadline, however late the tick. The
// open-window map is capped (MaxOpenWindows, sized for a fleet of 1,024
// identities × 4 keys): at the cap the oldest window is flushed early, with
// window_end at the flush instant, rather than dropped or refused; Flush
// does the same for every open window at shutdown. So window_end −
// window_start never exceeds the window and is exactly the span the
// record's count covers.
//
// No record is ever written on the goroutine of the invocation that was
// limited: Limited only counts, under a lock, with no I/O. An early-flushed
// window is handed off (at most MaxPending of them wait) to the single
// writer Run, which the tick also drains; the tick and the shutdown flush
// write everything they close as one batch (one write, one fsync). If the
// hand-off is full, the limited call that would add to it waits until the
// writer (or the tick) takes the hand-off, then proceeds: the flood is slowed
// to the store's pace, nothing is lost, and admitted invocations never reach
// this path.
//
// A record that cannot be written is logged at warn and counted; it
// refuses no invocation (the callers were answered long ago) and adds no
// skip mode to the store.
//
// The package holds counted evidence whole, crashes included: a
// Checkpointer writes the windows not yet durable (Snapshot) on each tick
// to a checkpoint file in the state directory (checkpoint.go, the file
// format), and RecoverCheckpoint turns an unclean stop's checkpoint into
// ordinary counted records at the next start (recover.go). The daemon only
// opens the directory, wires them and ticks.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// MaxOpenWindows caps the open-window map, for the same reason the
// limiter caps its entry map: windows are keyed on the caller identity, and
// an identity unstable across connections must not become memory
// exhaustion through the mechanism built to record it. It is sized for a
// fleet, 1,024 identities × 4 keys (two verbs × two buckets), so a flood
// from a whole fleet keeps one window per key instead of flushing one
// record per invocation. Shadow windows share the cap: a fleet flooding
// both its enforced and its shadow buckets reaches it at 512 identities,
// past which the oldest windows are written early (more records, nothing
// lost). Memory: the window ring, the hand-off and the key map are
// preallocated and never grow, at most WindowBytes per window for the
// three together (1.25 MiB in all; 1.18 MiB measured with both full),
// plus the identity strings the windows hold (the policy names are the
// configuration's own strings).
const MaxOpenWindows = 4096

// MaxPending caps the hand-off: windows flushed early at the cap that wait
// for the writer. At the cap a limited call that would flush one more
// waits for the writer to take the hand-off.
const MaxPending = MaxOpenWindows

// WindowBytes is an upper bound on the fixed memory one window of
// MaxOpenWindows costs in the ring, the hand-off and the key map together
// (identity bytes excluded): the documented memory bound is
// MaxOpenWindows × WindowBytes, which a test checks against the heap. The
// key's policy and shadow mark took the 240 bytes measured before them to
// 303 (a string header and a flag in each of the three, and the map's
// larger slots).
const WindowBytes = 320

// Appender is where counted records are written: *audit.Store. AppendBatch
// returns one error per record, in order.
type Appender interface {
	AppendBatch(ctx context.Context, recs []*audit.Record) []error
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
	// policy is the caller policy, "" for the default one (Event.Policy ""
	// or "default": one window, the record omits the key).
	policy string
	verb   vocab.Verb
	bucket vocab.Bucket
	shadow bool
}

// keyOf is ev's window key.
func keyOf(ev *limiter.Event) key {
	policy := ev.Policy
	if policy == audit.DefaultPolicy {
		policy = ""
	}
	return key{identity: ev.Identity, policy: policy, verb: ev.Verb, bucket: ev.Bucket, shadow: ev.Shadow}
}

type window struct {
	key      key
	start    time.Time
	deadline time.Time
	count    uint64
}

// closed is a window taken out of the ring, with the instant it closes at
// (before clamping) and why.
type closed struct {
	w   window
	end time.Time
	why string // "deadline", "early" or "shutdown"
}

// Sink is the coalescing limiter.Sink. It is safe for concurrent use.
type Sink struct {
	next   limiter.Sink
	store  Appender
	window time.Duration // under mu: SetWindow changes it
	now    func() time.Time
	// wallClock: now is time.Now (Options.Now was nil), so an event's At
	// (the limiter's reading of that clock) may stand in for it.
	wallClock bool
	logger    *slog.Logger

	wake chan struct{} // capacity 1: the hand-off has something for Run

	mu   sync.Mutex
	room *sync.Cond // broadcast when the hand-off is taken
	// open maps a key to its open window's index in slots.
	open map[key]int32
	// slots is a ring of windows in opening order: the open ones, and ones
	// past their deadline that the next tick writes. Every window has the
	// same length and opens at an instant no earlier than notBefore, so
	// opening order is deadline order: the oldest window is always at
	// head, and Tick pops from the head.
	slots *[MaxOpenWindows]window
	head  int32
	n     int32
	// pend is the hand-off: a ring of windows flushed early, in order.
	pend  *[MaxPending]closed
	pHead int32
	pN    int32
	// notBefore is the latest instant a window was opened at, or windows
	// were closed at (a tick, an early flush, the shutdown flush): an
	// event's instant, read before mu, is moved up to it.
	notBefore time.Time
	// writing is the batch Run took from the hand-off and is writing: it
	// left the hand-off but is not durable yet, so Snapshot still reports
	// it (snapshot.go).
	writing []closed
	// gen counts changes to the windows not yet written (snapshot.go).
	gen uint64

	records       [vocab.NumBuckets]atomic.Uint64
	earlyFlushes  atomic.Uint64
	writeFailures atomic.Uint64
	handoffWaits  atomic.Uint64
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
		wake:   make(chan struct{}, 1),
		open:   make(map[key]int32, MaxOpenWindows),
		slots:  new([MaxOpenWindows]window),
		pend:   new([MaxPending]closed),
	}
	s.room = sync.NewCond(&s.mu)
	if s.next == nil {
		s.next = limiter.Discard
	}
	if s.now == nil {
		s.wallClock = true
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Limited forwards ev to the next sink, then counts it in its key's
// window, opening one if needed. At the cap, opening a window first hands
// the oldest one to the writer, flushed early at this instant. It never
// writes: the only wait is the full hand-off's (see the package doc).
func (s *Sink) Limited(ctx context.Context, ev limiter.Event) {
	s.next.Limited(ctx, ev)
	if !ev.Verb.Valid() || !ev.Bucket.Valid() {
		return
	}
	k := keyOf(&ev)
	// The event's instant: the limiter's reading of the clock when the
	// sink runs on the wall clock and the limiter passed one, else the
	// sink's own, read before the lock either way (a flood of one caller
	// takes this lock on every call; a clock read inside it was a third
	// of its hold time).
	now := ev.At
	if !s.wallClock || now.IsZero() {
		now = s.now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	for ; ; now = s.now() {
		// Read before the lock, now may precede an instant another call
		// opened a window at, or a tick or an early flush closed windows
		// at, meanwhile: it is moved up to it, so that windows open in
		// deadline order and none starts before a closed one ended.
		if now.Before(s.notBefore) {
			now = s.notBefore
		}
		if i, ok := s.open[k]; ok {
			if now.Before(s.slots[i].deadline) {
				s.slots[i].count++
				return
			}
			// Past its deadline but not yet written by a tick: it counted
			// every event up to its deadline and stays in the ring for the
			// tick; this event opens the key's next window.
			delete(s.open, k)
		}
		if s.n < MaxOpenWindows {
			s.push(k, now)
			return
		}
		if s.pN == MaxPending {
			// The writer is behind by a whole hand-off: wait for it
			// rather than lose a window or write here. The key may be
			// opened by another event meanwhile, so start over.
			s.handoffWaits.Add(1)
			s.kick()
			s.room.Wait()
			continue
		}
		s.pend[(s.pHead+s.pN)%MaxPending] = closed{w: s.pop(), end: now, why: "early"}
		s.pN++
		s.earlyFlushes.Add(1)
		s.push(k, now)
		s.kick()
		return
	}
}

// push opens k's window at now. s.mu is held and s.n < MaxOpenWindows.
func (s *Sink) push(k key, now time.Time) {
	s.notBefore = now // now ≥ notBefore: Limited clamps it
	i := (s.head + s.n) % MaxOpenWindows
	s.slots[i] = window{key: k, start: now, deadline: now.Add(s.window), count: 1}
	s.open[k] = i
	s.n++
}

// SetWindow sets the length of the windows opened from now on (a reload of
// registrar.rate_limit_coalesce_window_seconds); an open window keeps its
// deadline and its count. After a shortening, a window opened since is
// closed at its own deadline for counting (Limited opens the key's next
// window past it) and its record ends there, but it is written by the first
// Tick after the windows opened before it have closed too (the ring closes
// in opening order): at most the old length after the change.
func (s *Sink) SetWindow(d time.Duration) error {
	if d <= 0 {
		return errors.New("coalesce: SetWindow: window must be greater than 0")
	}
	s.mu.Lock()
	s.window = d
	s.mu.Unlock()
	return nil
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

// kick wakes Run without blocking.
func (s *Sink) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// takePending appends the hand-off to out, empties it and wakes the
// limited calls waiting for room. s.mu is held.
func (s *Sink) takePending(out []closed) []closed {
	for s.pN > 0 {
		out = append(out, s.pend[s.pHead])
		s.pend[s.pHead] = closed{}
		s.pHead = (s.pHead + 1) % MaxPending
		s.pN--
	}
	s.room.Broadcast()
	return out
}

// Run is the single writer of early-flushed windows: each time the
// hand-off receives one, it writes everything waiting there as one batch.
// The daemon runs it beside its tick loop until shutdown; without it the
// tick drains the hand-off. It returns when ctx is done, leaving what is
// still handed off to the next Tick or Flush.
func (s *Sink) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			s.mu.Lock()
			batch := s.takePending(nil)
			s.writing = batch
			s.mu.Unlock()
			s.writeAll(ctx, batch)
			s.mu.Lock()
			s.writing = nil
			s.gen++
			s.mu.Unlock()
		}
	}
}

// Tick writes, as one batch, every window whose deadline is at or before
// now, each with window_end at its deadline, and everything in the
// hand-off. It is called from the daemon's one tick loop.
//
// now must be a reading of the sink's clock (Options.Now), never ahead of
// it: the daemon passes the instant its ticker fired. A now ahead of the
// clock would close windows before their deadline had passed on the clock
// that counts into them.
func (s *Sink) Tick(ctx context.Context, now time.Time) {
	s.mu.Lock()
	batch := s.takePending(nil)
	for s.n > 0 && !s.slots[s.head].deadline.After(now) {
		w := s.pop()
		batch = append(batch, closed{w: w, end: w.deadline, why: "deadline"})
	}
	if len(batch) > 0 {
		s.gen++
	}
	if now.After(s.notBefore) {
		s.notBefore = now
	}
	s.mu.Unlock()
	s.writeAll(ctx, batch)
}

// Flush writes, as one batch, the hand-off and every open window with
// window_end at now: the shutdown flush, so a counted record is never lost
// to a restart.
func (s *Sink) Flush(ctx context.Context, now time.Time) {
	s.mu.Lock()
	batch := s.takePending(make([]closed, 0, s.pN+s.n))
	for s.n > 0 {
		batch = append(batch, closed{w: s.pop(), end: now, why: "shutdown"})
	}
	s.gen++
	if now.After(s.notBefore) {
		s.notBefore = now
	}
	s.mu.Unlock()
	s.writeAll(ctx, batch)
}

// record is c's counted record, written at ts. Its end is expressed in
// the window's start wall-clock frame plus the elapsed monotonic time,
// clamped to [start, start+window], so a wall-clock step can neither invert
// nor stretch the window a record claims.
func (s *Sink) record(c *closed, ts time.Time) *audit.Record {
	elapsed := max(0, min(c.end.Sub(c.w.start), c.w.deadline.Sub(c.w.start)))
	return &audit.Record{
		Phase:          audit.PhaseLimited,
		TS:             ts,
		Verb:           c.w.key.verb,
		CallerIdentity: c.w.key.identity,
		LimitedBucket:  c.w.key.bucket,
		Policy:         c.w.key.policy,
		Shadow:         c.w.key.shadow,
		Count:          c.w.count,
		WindowStart:    c.w.start,
		WindowEnd:      c.w.start.Add(elapsed),
	}
}

// writeAll appends batch's records in one batch. Each record that fails is
// counted; a failing batch is logged once, with how many records failed.
func (s *Sink) writeAll(ctx context.Context, batch []closed) {
	if len(batch) == 0 {
		return
	}
	ts := s.now()
	recs := make([]*audit.Record, len(batch))
	for i := range batch {
		recs[i] = s.record(&batch[i], ts)
	}
	// The invocations were answered long ago: a client hanging up must not
	// cancel the record of them.
	errs := s.store.AppendBatch(context.WithoutCancel(ctx), recs)
	var failed uint64
	var firstErr error
	first := 0
	for i := range batch {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = fmt.Errorf("coalesce: the store answered %d of %d records", len(errs), len(recs))
		}
		if err != nil {
			if failed == 0 {
				first, firstErr = i, err
			}
			failed++
			continue
		}
		s.records[batch[i].w.key.bucket].Add(1)
	}
	if failed == 0 {
		return
	}
	s.writeFailures.Add(failed)
	c := &batch[first]
	s.logger.LogAttrs(ctx, slog.LevelWarn, "counted record not written",
		slog.Uint64("records_failed", failed),
		slog.Int("batch", len(batch)),
		slog.String("close", c.why),
		slog.String("verb", c.w.key.verb.String()),
		slog.String("limited_bucket", c.w.key.bucket.String()),
		slog.String("policy", cmpOr(c.w.key.policy, audit.DefaultPolicy)),
		slog.Bool("shadow", c.w.key.shadow),
		slog.Uint64("count", c.w.count),
		slog.Any("error", firstErr))
}

// Stats is a point-in-time view for telemetry.
type Stats struct {
	// OpenWindows is the number of windows in the ring (open, or past
	// their deadline awaiting the tick), at most MaxOpenWindows.
	OpenWindows int
	// Pending is the number of early-flushed windows in the hand-off, at
	// most MaxPending.
	Pending int
	// Records counts counted records written, per bucket, since start,
	// shadow records included (they are counted records the store holds).
	Records [vocab.NumBuckets]uint64
	// EarlyFlushes counts windows flushed early at the cap.
	EarlyFlushes uint64
	// WriteFailures counts counted records that could not be written.
	WriteFailures uint64
	// HandoffWaits counts limited calls that found the hand-off full and
	// waited for the writer.
	HandoffWaits uint64
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	n, p := int(s.n), int(s.pN)
	s.mu.Unlock()
	st := Stats{OpenWindows: n, Pending: p, EarlyFlushes: s.earlyFlushes.Load(), WriteFailures: s.writeFailures.Load(), HandoffWaits: s.handoffWaits.Load()}
	for b := range st.Records {
		st.Records[b] = s.records[b].Load()
	}
	return st
}
