package config

import (
	"errors"
	"log/slog"
	"testing"
)

func TestParseLogLevelAcceptsTheFourLevelsInAnyCase(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "DEBUG": slog.LevelDebug, "Info": slog.LevelInfo,
		"info": slog.LevelInfo, "warn": slog.LevelWarn, "WARN": slog.LevelWarn, "error": slog.LevelError,
	} {
		got, err := ParseLogLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "verbose", "warning", " info", "info+2", "debug-4", "0", "trace"} {
		if _, err := ParseLogLevel(in); !errors.Is(err, ErrInvalidLogLevel) {
			t.Errorf("ParseLogLevel(%q) error = %v, want ErrInvalidLogLevel", in, err)
		}
	}
}

func TestLogLevelKeyLoadsFromTheFileAndTheEnvironment(t *testing.T) {
	if got := Default().Registrar.LogLevel; got != slog.LevelInfo {
		t.Fatalf("default log level %v, want info", got)
	}
	if got := mustLoadBytes(t, "[registrar]\nlog_level = \"warn\"\n").Registrar.LogLevel; got != slog.LevelWarn {
		t.Errorf("file log_level = \"warn\": %v", got)
	}
	cfg := mustLoadBytes(t, "[registrar]\nlog_level = \"warn\"\n", "REGISTRAR_OTEL_REGISTRAR__LOG_LEVEL=DEBUG")
	if got := cfg.Registrar.LogLevel; got != slog.LevelDebug {
		t.Errorf("the environment's DEBUG over the file's warn: %v, want debug", got)
	}
	if got := LogLevelName(cfg.Registrar.LogLevel); got != "debug" {
		t.Errorf("LogLevelName = %q, want the file's spelling \"debug\"", got)
	}
}

func TestABadLogLevelNamesTheKeyTheValueAndTheRule(t *testing.T) {
	for _, c := range []struct{ doc, env, want string }{
		{"[registrar]\nlog_level = \"verbose\"\n", "",
			`registrar.log_level must be one of "debug", "info", "warn", "error", got "verbose"`},
		{"[registrar]\nlog_level = 4\n", "", `registrar.log_level must be a string, got 4`},
		{"", "REGISTRAR_OTEL_REGISTRAR__LOG_LEVEL=info+2",
			`registrar.log_level must be one of "debug", "info", "warn", "error", got "info+2" (from environment variable REGISTRAR_OTEL_REGISTRAR__LOG_LEVEL)`},
	} {
		var env []string
		if c.env != "" {
			env = []string{c.env}
		}
		if got := loadErrors(t, c.doc, env...); got != c.want+"\n" {
			t.Errorf("%q %q: errors:\n%swant:\n%s", c.doc, c.env, got, c.want)
		}
	}
	cfg := Default()
	cfg.Registrar.LogLevel = slog.LevelInfo + 2
	var ke *KeyError
	if err := cfg.Validate(); !errors.As(err, &ke) || ke.Key != "registrar.log_level" {
		t.Fatalf("Validate of level INFO+2: %v, want a KeyError naming registrar.log_level", err)
	}
}

func TestALogLevelChangeIsALiveChangeSpeltAsTheFileSpellsIt(t *testing.T) {
	old := Default()
	new := old.Clone()
	new.Registrar.LogLevel = slog.LevelDebug
	got := Diff(old, new)
	want := Change{Key: "registrar.log_level", Old: "info", New: "debug", Live: true}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Diff = %+v, want [%+v]", got, want)
	}
	if ReloadClass("registrar.log_level") != Live {
		t.Fatalf("registrar.log_level is %q, want live", ReloadClass("registrar.log_level"))
	}
}
