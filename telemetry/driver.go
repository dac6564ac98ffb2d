package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
)

// DriverServiceName is the service.name of the load driver's spans, so a
// trace backend tells the wave's root span from the daemon's spans.
const DriverServiceName = "registrar-otel-load"

// DriverFlushTimeout bounds how long a driver waits, when it finishes, for
// its spans to reach the collector.
const DriverFlushTimeout = 10 * time.Second

// Driver is the telemetry of a client-side tool (`load wave`, `load
// flood`): spans only, every one sampled, exported where the daemon sending
// the same configuration would export its own spans. Build it with
// NewDriver and end it with Close, which flushes. A Driver is safe for
// concurrent use.
type Driver struct {
	*Telemetry
}

// NewDriver resolves the driver's traces endpoint exactly as New does for
// the daemon, from cfg (the [telemetry] table of --config) and the
// OTEL_EXPORTER_OTLP_* variables, unless override (an --otlp-endpoint flag:
// a base URL, /v1/traces appended) is set, which wins. No metric exporter
// and no metrics listener are built, so a traces-only collector sees no
// metric export. Errors name the key, variable or flag at fault.
func NewDriver(ctx context.Context, cfg config.Telemetry, override string, logger *slog.Logger) (*Driver, error) {
	dcfg := config.Telemetry{
		OTLPEndpoint:          cfg.OTLPEndpoint,
		OTLPTracesEndpoint:    cfg.OTLPTracesEndpoint,
		ServiceName:           DriverServiceName,
		TraceSamplePerMillion: config.MaxTraceSamplePerMillion,
	}
	if override != "" {
		dcfg.OTLPEndpoint, dcfg.OTLPTracesEndpoint = override, ""
	}
	t, err := New(ctx, dcfg, Options{Logger: logger, TracesOnly: true, SampleAll: true})
	if err != nil {
		if override != "" {
			return nil, fmt.Errorf("--otlp-endpoint %q: %w", override, err)
		}
		return nil, err
	}
	return &Driver{t}, nil
}

// Close exports every finished span (the wave's root span among them) and
// shuts the providers down, waiting at most DriverFlushTimeout. Its error
// says when the export failed (the collector refused or did not answer):
// the spans were then not delivered. It is safe on a nil Driver.
func (d *Driver) Close() error {
	if d == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), DriverFlushTimeout)
	defer cancel()
	var flushErr error
	if d.tracesURL != "" {
		if err := d.tp.ForceFlush(ctx); err != nil {
			flushErr = fmt.Errorf("exporting the spans to %s: %s", d.tracesURL, config.RedactText(err.Error()))
		}
	}
	return errors.Join(flushErr, d.Shutdown(ctx))
}
