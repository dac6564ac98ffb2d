// Package logthrottle keeps a repeated log line from flooding the log: at
// most one line per cause key per interval, the next one carrying how many
// were suppressed in between.
//
// A failing disk makes every append fail; a flood makes every connection
// misbehave. Logging each one would bury the first, useful line and turn the
// log itself into a resource an attacker can exhaust. A Throttle logs the
// first occurrence of a cause at once, counts the repeats inside the
// interval, and logs the first occurrence after the interval with the
// attribute suppressed=<n>.
//
//	t := logthrottle.New(logger, time.Minute, nil)
//	t.Log(ctx, "rotate", slog.LevelError, "audit rotation failed", slog.Any("error", err))
//
// Cause keys must come from a fixed, small set chosen by the caller (an
// operation name, a phase), never from input: the Throttle keeps one small
// entry per key for its lifetime. Keys drawn from an open set (the
// OpenTelemetry SDK's own messages) need a bound: NewWith with
// Options.MaxKeys.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// SuppressedKey is the attribute carrying, on an emitted line, how many
// lines of the same cause were suppressed since the previous one emitted.
const SuppressedKey = "suppressed"

// Throttle rate-limits log lines per cause key. The zero value is not
// usable; build one with New. A Throttle is safe for concurrent use.
type Throttle struct {
	logger   *slog.Logger
	interval time.Duration
	now      func() time.Time
	maxKeys  int  // 0: unbounded
	omitZero bool // no suppressed=0 attribute

	mu    sync.Mutex
	state map[string]*cause
}

type cause struct {
	last       time.Time // when the last line of this cause was emitted
	suppressed uint64    // lines suppressed since then
}

// New returns a Throttle logging to logger (nil discards), at most one line
// per cause key per interval (interval ≤ 0 logs every line, with
// suppressed=0), reading time from now (nil means time.Now).
func New(logger *slog.Logger, interval time.Duration, now func() time.Time) *Throttle {
	return NewWith(logger, Options{Interval: interval, Now: now})
}

// Options are a Throttle's settings: New's, and the ones only NewWith
// takes.
type Options struct {
	// Interval is the least time between two lines of one cause key
	// (≤ 0 logs every line).
	Interval time.Duration
	// Now is the clock (nil means time.Now).
	Now func() time.Time
	// MaxKeys, when positive, bounds the cause keys remembered, for keys
	// drawn from an open set. A new key beyond the bound first evicts the
	// quiet keys (their last line an interval ago or more, nothing
	// suppressed since); if none is quiet, the new keys share one overflow
	// cause, rate-limited like any other.
	MaxKeys int
	// OmitZero leaves the suppressed attribute off a line when nothing was
	// suppressed before it, for logs that have always read that way.
	OmitZero bool
}

// NewWith returns a Throttle logging to logger (nil discards) with the
// settings o.
func NewWith(logger *slog.Logger, o Options) *Throttle {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Throttle{logger: logger, interval: o.Interval, now: o.Now, maxKeys: o.MaxKeys, omitZero: o.OmitZero,
		state: make(map[string]*cause)}
}

// overflowKey is the cause the keys beyond Options.MaxKeys share; the NUL
// keeps it apart from any key a caller spells.
const overflowKey = "\x00overflow"

// Log emits msg at level with attrs, plus suppressed=<n>, unless a line of
// the same key was emitted less than the interval ago; then it only counts
// it. It reports whether the line was emitted. A line below the logger's
// level is neither emitted nor counted.
func (t *Throttle) Log(ctx context.Context, key string, level slog.Level, msg string, attrs ...slog.Attr) bool {
	if !t.logger.Enabled(ctx, level) {
		return false
	}
	n, ok := t.Allow(key)
	if !ok {
		return false
	}
	if n > 0 || !t.omitZero {
		attrs = append(attrs, slog.Uint64(SuppressedKey, n))
	}
	t.logger.LogAttrs(ctx, level, msg, attrs...)
	return true
}

// elapsed reports whether a line of c may be emitted at now. A clock
// stepped back past the last line counts as elapsed.
func (t *Throttle) elapsed(c *cause, now time.Time) bool {
	d := now.Sub(c.last)
	return t.interval <= 0 || d < 0 || d >= t.interval
}

// causeOf returns key's cause, and whether it was just added (a new cause
// emits at once). Under Options.MaxKeys a new key beyond the bound evicts
// the quiet causes, or else shares the overflow cause. t.mu is held.
func (t *Throttle) causeOf(key string, now time.Time) (*cause, bool) {
	if c, ok := t.state[key]; ok {
		return c, false
	}
	if t.maxKeys > 0 && len(t.state) >= t.maxKeys {
		for k, c := range t.state {
			if c.suppressed == 0 && t.elapsed(c, now) {
				delete(t.state, k)
			}
		}
		if len(t.state) >= t.maxKeys {
			key = overflowKey
			if c, ok := t.state[key]; ok {
				return c, false
			}
		}
	}
	c := &cause{}
	t.state[key] = c
	return c, true
}
