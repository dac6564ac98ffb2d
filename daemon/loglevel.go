package daemon

import (
	"context"
	"log/slog"

	"github.com/registrar-otel/registrar-otel/config"
)

// Options are the settings of a daemon that do not come from its
// configuration. The zero value is what New uses.
type Options struct {
	// LogLevel is the level of the logger's handler, when the caller built
	// it with one (slog.HandlerOptions{Level: LogLevel}, as serve does):
	// the daemon sets it to registrar.log_level at start and to the new
	// value on each reload that applies, in place, so every logger derived
	// from it follows at once. Nil: the daemon filters the logger's records
	// by a level of its own, which can only drop what the handler would
	// have written (a handler at info writes no debug line whatever the
	// key says).
	LogLevel *slog.LevelVar
	// LogLevelFixed reports that the level was chosen on the command line
	// (serve --log-level): LogLevel keeps it for the life of the process,
	// and registrar.log_level is ignored at start and by every reload (a
	// reload whose file sets another level says so at WARN). Meaningless
	// without LogLevel.
	LogLevelFixed bool
}

// logLevel is the daemon's control of its log's level.
type logLevel struct {
	v     *slog.LevelVar
	fixed bool // serve --log-level: the key is ignored
}

// setupLogLevel returns the logger the daemon logs with and the control of
// its level, set from cfg unless the command line fixed it; with a fixed
// level, cfg's level is replaced by it, so the configuration in force (and
// a reload's Diff) says the level that is.
func setupLogLevel(cfg *config.Config, logger *slog.Logger, o Options) (*slog.Logger, logLevel) {
	ll := logLevel{v: o.LogLevel, fixed: o.LogLevelFixed && o.LogLevel != nil}
	if ll.v == nil {
		ll.v = new(slog.LevelVar)
		logger = slog.New(&levelFilter{next: logger.Handler(), level: ll.v})
	}
	if ll.fixed {
		cfg.Registrar.LogLevel = ll.v.Level()
	} else {
		ll.v.Set(cfg.Registrar.LogLevel)
	}
	return logger, ll
}

// pin replaces next's level by the command line's when it is fixed, and
// reports the file's value it overrode ("" when none was).
func (ll logLevel) pin(next *config.Config) (ignored string) {
	if !ll.fixed {
		return ""
	}
	fileLevel := next.Registrar.LogLevel
	next.Registrar.LogLevel = ll.v.Level()
	if fileLevel == ll.v.Level() {
		return ""
	}
	return config.LogLevelName(fileLevel)
}

// levelFilter drops the records below level before its handler sees them:
// the daemon's level control over a logger whose handler it did not build.
// Safe for concurrent use, as slog.LevelVar is.
type levelFilter struct {
	next  slog.Handler
	level *slog.LevelVar
}

func (f *levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.level.Level() && f.next.Enabled(ctx, l)
}

func (f *levelFilter) Handle(ctx context.Context, r slog.Record) error {
	return f.next.Handle(ctx, r)
}

func (f *levelFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelFilter{next: f.next.WithAttrs(as), level: f.level}
}

func (f *levelFilter) WithGroup(name string) slog.Handler {
	return &levelFilter{next: f.next.WithGroup(name), level: f.level}
}
