package telemetry

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
	"go.opentelemetry.io/otel"
)

// DiagnosticsInterval is how often one kind of OpenTelemetry SDK error (or
// warning) is logged: the first occurrence at once, repeats at most once
// per interval, each carrying how many were suppressed since the last.
// A collector that is down for an hour makes about 60 lines per signal,
// not one per export attempt.
const DiagnosticsInterval = time.Minute

// maxDiagnosticKinds bounds the kinds of message remembered; beyond it,
// quiet kinds are forgotten, or else every new kind shares one budget.
const maxDiagnosticKinds = 64

// Diagnostics routes the OpenTelemetry SDK's own errors and log lines
// (failed exports, dropped spans, invalid instrument names) to a
// *slog.Logger, so a JSON log stays JSON, rate-limited per kind of
// message (the message with its digits masked) by a logthrottle.Throttle.
//
// A Diagnostics is safe for concurrent use; the SDK calls it from its
// export goroutines.
type Diagnostics struct {
	logger   *slog.Logger
	throttle *logthrottle.Throttle
}

// NewDiagnostics returns a Diagnostics logging on logger (nil discards);
// now is the clock (nil means time.Now).
func NewDiagnostics(logger *slog.Logger, now func() time.Time) *Diagnostics {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Diagnostics{logger: logger, throttle: logthrottle.NewWith(logger, logthrottle.Options{
		Interval: DiagnosticsInterval,
		Now:      now,
		// The kinds come from the SDK's messages, an open set.
		MaxKeys: maxDiagnosticKinds,
		// A first line has never carried suppressed=0.
		OmitZero: true,
	})}
}

// InstallDiagnostics points the process-wide OpenTelemetry error handler
// (otel.SetErrorHandler) and internal logger (otel.SetLogger) at logger
// through a new Diagnostics. Without it the SDK writes plain lines with
// the standard library's log package. New calls it.
func InstallDiagnostics(logger *slog.Logger) *Diagnostics {
	d := NewDiagnostics(logger, nil)
	otel.SetErrorHandler(d)
	otel.SetLogger(d.Logger())
	return d
}

// Handle implements otel.ErrorHandler: a warning "telemetry: OpenTelemetry
// SDK error" with the error, rate-limited per kind.
func (d *Diagnostics) Handle(err error) {
	if err == nil {
		return
	}
	text := config.RedactText(err.Error())
	d.log(slog.LevelWarn, "telemetry: OpenTelemetry SDK error", text, slog.String("error", text))
}

func (d *Diagnostics) log(level slog.Level, msg, kindText string, attrs ...slog.Attr) {
	d.throttle.Log(context.Background(), diagKindOf(msg+"\x00"+kindText), level, msg, attrs...)
}

// diagKindOf masks the digits of a message, so "dropped 3 spans" and
// "dropped 7 spans" are one kind.
func diagKindOf(s string) string {
	var b strings.Builder
	digit := false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			if !digit {
				b.WriteByte('#')
			}
			digit = true
			continue
		}
		digit = false
		b.WriteRune(r)
	}
	return b.String()
}

// Logger returns the logr.Logger otel.SetLogger takes: the SDK's error
// lines at error level, its warnings (V(1)) at warn, its info and debug
// lines (V(4), V(8)) at debug; all rate-limited like Handle.
func (d *Diagnostics) Logger() logr.Logger {
	return logr.New(&diagSink{d: d})
}

// diagSink is the logr.LogSink behind Logger.
type diagSink struct {
	d      *Diagnostics
	name   string
	values []any
}

func (s *diagSink) Init(logr.RuntimeInfo) {}

func levelOf(v int) slog.Level {
	switch {
	case v <= 0:
		return slog.LevelInfo
	case v == 1:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}

func (s *diagSink) Enabled(v int) bool {
	return s.d.logger.Enabled(context.Background(), levelOf(v))
}

// attrs names the logger and the keys the SDK passed, never their values:
// the SDK repeats what it cannot parse (a malformed
// OTEL_EXPORTER_OTLP_HEADERS with the header value, an endpoint with its
// password), and no log line of the daemon may carry a header value, a
// URL's user-info or a query.
func (s *diagSink) attrs(kv []any) []slog.Attr {
	var out []slog.Attr
	if s.name != "" {
		out = append(out, slog.String("logger", s.name))
	}
	var keys []string
	for _, list := range [][]any{s.values, kv} {
		for i := 0; i < len(list); i += 2 {
			if k, ok := list[i].(string); ok {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) > 0 {
		out = append(out, slog.Any("withheld", keys))
	}
	return out
}

func (s *diagSink) Info(v int, msg string, kv ...any) {
	s.d.log(levelOf(v), "telemetry: OpenTelemetry SDK: "+config.RedactText(msg), "", s.attrs(kv)...)
}

func (s *diagSink) Error(err error, msg string, kv ...any) {
	attrs := s.attrs(kv)
	text := ""
	if err != nil {
		text = config.RedactText(err.Error())
		attrs = append(attrs, slog.String("error", text))
	}
	s.d.log(slog.LevelError, "telemetry: OpenTelemetry SDK: "+config.RedactText(msg), text, attrs...)
}

func (s *diagSink) WithValues(kv ...any) logr.LogSink {
	return &diagSink{d: s.d, name: s.name, values: append(append([]any(nil), s.values...), kv...)}
}

func (s *diagSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &diagSink{d: s.d, name: name, values: s.values}
}
