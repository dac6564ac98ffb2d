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
// entry per key for its lifetime.
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
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Throttle{logger: logger, interval: interval, now: now, state: make(map[string]*cause)}
}

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
	t.logger.LogAttrs(ctx, level, msg, append(attrs, slog.Uint64(SuppressedKey, n))...)
	return true
}
