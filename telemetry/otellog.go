package telemetry

import (
	"context"
	"log/slog"
	"sync"

	"github.com/go-logr/logr"
	"github.com/registrar-otel/registrar-otel/config"
	"go.opentelemetry.io/otel"
)

// installMu serialises installing the process-wide OpenTelemetry hooks.
var installMu sync.Mutex

// InstallGlobalLogging routes the OpenTelemetry SDK's own diagnostics (the
// global logger and error handler, process-wide by the SDK's design) to
// logger, redacted: the SDK repeats its input when it cannot parse it (a
// malformed OTEL_EXPORTER_OTLP_HEADERS is logged with the header value, an
// endpoint with its password), and no log line of the daemon may carry a
// header value, a URL's user-info or a query. Key-value pairs are reduced
// to their keys; error texts pass through config.RedactText.
//
// The daemon calls it once, before New; it is safe for concurrent use,
// and a later call replaces the earlier logger.
func InstallGlobalLogging(logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	installMu.Lock()
	defer installMu.Unlock()
	otel.SetLogger(logr.New(&redactingSink{logger: logger}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.LogAttrs(context.Background(), slog.LevelWarn, "telemetry: OpenTelemetry error",
			slog.String("error", config.RedactText(err.Error())))
	}))
}

// redactingSink is a logr.LogSink that never logs a value it is given.
type redactingSink struct {
	logger *slog.Logger
	names  []string
}

var _ logr.LogSink = (*redactingSink)(nil)

func (s *redactingSink) Init(logr.RuntimeInfo) {}

// Enabled passes errors and warnings (V(0), V(1)); the SDK's info and debug
// chatter (V(4), V(8)) is dropped.
func (s *redactingSink) Enabled(level int) bool { return level <= 1 }

func (s *redactingSink) Info(level int, msg string, kv ...any) {
	lv := slog.LevelInfo
	if level <= 1 {
		lv = slog.LevelWarn
	}
	s.logger.LogAttrs(context.Background(), lv, "telemetry: OpenTelemetry SDK: "+config.RedactText(msg), keysOnly(kv)...)
}

func (s *redactingSink) Error(err error, msg string, kv ...any) {
	attrs := keysOnly(kv)
	if err != nil {
		attrs = append(attrs, slog.String("error", config.RedactText(err.Error())))
	}
	s.logger.LogAttrs(context.Background(), slog.LevelWarn, "telemetry: OpenTelemetry SDK: "+config.RedactText(msg), attrs...)
}

func (s *redactingSink) WithValues(...any) logr.LogSink { return s }

func (s *redactingSink) WithName(name string) logr.LogSink {
	return &redactingSink{logger: s.logger, names: append(append([]string(nil), s.names...), name)}
}

// keysOnly names the keys the SDK passed, without their values.
func keysOnly(kv []any) []slog.Attr {
	var keys []string
	for i := 0; i < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return []slog.Attr{slog.Any("withheld", keys)}
}
