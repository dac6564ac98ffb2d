package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

const ruleLogLevel = `must be one of "debug", "info", "warn", "error"`

// logLevels are the four levels registrar.log_level and serve --log-level
// accept, by their spelling.
var logLevels = []struct {
	name  string
	level slog.Level
}{
	{"debug", slog.LevelDebug},
	{"info", slog.LevelInfo},
	{"warn", slog.LevelWarn},
	{"error", slog.LevelError},
}

// ErrInvalidLogLevel is returned (wrapped) by ParseLogLevel.
var ErrInvalidLogLevel = errors.New(`config: a log level must be one of "debug", "info", "warn", "error"`)

// ParseLogLevel parses a log level as registrar.log_level and serve
// --log-level spell it: "debug", "info", "warn" or "error", in any case
// (as slog.Level's UnmarshalText reads them), without surrounding space
// and without slog's "+N"/"-N" offsets, which name no documented level.
func ParseLogLevel(s string) (slog.Level, error) {
	for _, l := range logLevels {
		if strings.EqualFold(s, l.name) {
			return l.level, nil
		}
	}
	return 0, fmt.Errorf("%w, got %s", ErrInvalidLogLevel, strconv.Quote(s))
}

// LogLevelName is the configuration spelling of a level ("debug", "info",
// "warn", "error"); for any other level, slog's own ("INFO+2").
func LogLevelName(l slog.Level) string {
	if name, ok := logLevelName(l); ok {
		return name
	}
	return l.String()
}

func logLevelName(l slog.Level) (string, bool) {
	for _, x := range logLevels {
		if x.level == l {
			return x.name, true
		}
	}
	return "", false
}

// logLevel decodes registrar.log_level: a string ParseLogLevel reads.
func (d *decoder) logLevel(key string, v any) (slog.Level, bool) {
	s, ok := d.string(key, v)
	if !ok {
		return 0, false
	}
	l, err := ParseLogLevel(s)
	if err != nil {
		d.fail(key, v, ruleLogLevel)
		return 0, false
	}
	return l, true
}

func checkLogLevel(_ *Config, key string, l slog.Level, add func(*KeyError)) {
	if _, ok := logLevelName(l); !ok {
		add(&KeyError{Key: key, Value: l.String(), Rule: ruleLogLevel})
	}
}
