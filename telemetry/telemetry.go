package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The configuration keys named in New's and Listen's errors.
const (
	keyMetricsListen = "telemetry.metrics_listen"
	keyOTLPEndpoint  = "telemetry.otlp_endpoint"
	keyServiceName   = "telemetry.service_name"
	keyTraceSample   = "telemetry.trace_sample_per_million"
)

// OTLP/HTTP signal paths, appended to telemetry.otlp_endpoint the way
// OTEL_EXPORTER_OTLP_ENDPOINT is treated by every OpenTelemetry SDK (the
// per-signal endpoints are used as they are).
const (
	tracesPath  = "v1/traces"
	metricsPath = "v1/metrics"
)

// MetricExportInterval is how often metrics are pushed over OTLP when a
// metrics endpoint is set and OTEL_METRIC_EXPORT_INTERVAL (milliseconds) is
// not. Prometheus scrapes are independent of it.
const MetricExportInterval = 30 * time.Second

// readHeaderTimeout bounds a scraper that connects and never sends its
// request headers.
const readHeaderTimeout = 10 * time.Second

// The metrics listener's other bounds, so that no number of idle or slow
// connections to it (any local uid can reach it) takes the descriptors the
// verbs need (issue 27: 500 idle connections under a 512-descriptor limit
// failed every mint):
//
//   - MetricsMaxConns caps its open connections; one accepted beyond the
//     cap is closed at once, so it holds a descriptor for no longer than
//     the accept. A Prometheus server keeps one connection per target.
//   - metricsReadTimeout bounds reading a whole request, metricsWriteTimeout
//     writing the answer (a scrape's own timeout is 10 s), metricsIdleTimeout
//     a kept-alive connection between scrapes.
const (
	MetricsMaxConns     = 16
	metricsReadTimeout  = 10 * time.Second
	metricsWriteTimeout = 30 * time.Second
	metricsIdleTimeout  = 60 * time.Second
)

// Options are the parts of New's input that do not come from the
// configuration file.
type Options struct {
	// Logger receives the metrics server's and the exposition's errors;
	// nil discards them.
	Logger *slog.Logger
	// ServiceVersion becomes the service.version resource attribute; ""
	// leaves it out.
	ServiceVersion string
	// ExtraReaders are added to the MeterProvider beside the Prometheus
	// exporter (and the OTLP reader). For tests: a ManualReader. They read
	// the instruments; the histograms of Histograms reach only the readers
	// New builds.
	ExtraReaders []sdkmetric.Reader
	// ExtraSpanProcessors are added to the TracerProvider beside the OTLP
	// batch processor. For tests: a tracetest.SpanRecorder.
	ExtraSpanProcessors []sdktrace.SpanProcessor
	// SampleAll samples every span, whatever the configuration and the
	// OTEL_TRACES_SAMPLER variables say: the load driver's traces are the
	// point of its run.
	SampleAll bool
	// StateDir is the daemon's registrar.state_dir, from which the default
	// service.instance.id is derived (InstanceID); "" leaves the
	// attribute out unless telemetry.service_instance_id or
	// OTEL_RESOURCE_ATTRIBUTES sets it (a client-side tool).
	StateDir string
	// Getenv reads the standard OTEL_* variables; nil means os.Getenv.
	Getenv func(string) string
	// TracesOnly builds no OTLP metric exporter whatever the configuration
	// says: for a client-side tool whose only telemetry is its spans.
	TracesOnly bool
	// KeepGlobalDiagnostics leaves the process-wide OpenTelemetry error
	// handler and logger alone; by default New points them at Logger
	// (InstallDiagnostics).
	KeepGlobalDiagnostics bool
}

// Telemetry owns the daemon's OpenTelemetry providers, the Prometheus
// exposition and, when configured, the OTLP/HTTP exporters.
//
// A Telemetry is safe for concurrent use. Build it with New; release it with
// Shutdown, which flushes both providers.
type Telemetry struct {
	logger   *slog.Logger
	registry *prometheus.Registry
	mp       *sdkmetric.MeterProvider
	tp       *sdktrace.TracerProvider
	handler  http.Handler
	// tracesURL is where spans are exported (redacted), "" when no span
	// exporter was built.
	tracesURL string
	probes    atomic.Pointer[Probes]
	// hists produces the histograms recorded on every request to every
	// reader New builds; wire's wait histogram is one of them.
	hists *Histograms
	wire  *WireObserver

	mu       sync.Mutex
	closed   bool
	servers  []*http.Server
	shutOnce sync.Once
	shutErr  error
}

// New builds the providers from cfg:
//
//   - a MeterProvider whose readers are the OTel Prometheus exporter,
//     registered on a private prometheus.Registry served by Handler (with
//     registrar_build_info and the standard process_* and go_* collectors),
//     and, when a metrics endpoint is resolved, a periodic OTLP/HTTP reader
//     pushing to it every MetricExportInterval;
//   - a TracerProvider sampling parent-based with the OTel SDK's
//     traceidratio sampler at cfg.TraceSamplePerMillion in a million for
//     root spans (OTEL_TRACES_SAMPLER_ARG, when set, is that sampler's
//     argument instead, and OTEL_TRACES_SAMPLER, when set, replaces the
//     sampler as the SDK specifies), exporting in batches when a traces
//     endpoint is resolved.
//
// Each signal's endpoint is resolved on its own (see planExport): the
// per-signal key (a full URL, or "none"), else telemetry.otlp_endpoint
// plus /v1/<signal>, else the standard OTEL_EXPORTER_OTLP_* variables. A
// signal with no endpoint builds no exporter: nothing is sent and nothing
// is logged about an absent collector. Counters incremented inside a
// sampled span carry its trace id as an exemplar.
//
// New points the process-wide OpenTelemetry error handler and logger at
// o.Logger (see InstallDiagnostics) unless o.KeepGlobalDiagnostics.
//
// New does not listen: the daemon calls Listen and Serve when
// cfg.MetricsListen is set. Errors name the configuration key or
// environment variable at fault (as *config.KeyError).
func New(ctx context.Context, cfg config.Telemetry, o Options) (*Telemetry, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	plan, sampler, errs := checkConfig(cfg, getenv)
	if len(errs) > 0 {
		return nil, fmt.Errorf("telemetry: %w", errors.Join(errs...))
	}
	if o.SampleAll {
		sampler = sdktrace.AlwaysSample()
	}
	if o.TracesOnly {
		plan.metrics = signal{}
	}
	if !o.KeepGlobalDiagnostics {
		InstallDiagnostics(logger)
	}
	instanceID, _ := InstanceID(cfg.ServiceInstanceID, o.StateDir, getenv)
	res, err := newResource(ctx, cfg.ServiceName, o.ServiceVersion, instanceID, logger)
	if err != nil {
		return nil, err
	}

	t := &Telemetry{logger: logger, registry: prometheus.NewRegistry()}
	if err := registerProcessCollectors(t.registry); err != nil {
		return nil, err
	}
	// The histograms recorded on every request are a producer's, not
	// instruments (Histograms): each reader New builds is given it.
	t.hists = NewHistograms()
	if t.wire, err = NewWireObserver(t.hists); err != nil {
		return nil, err
	}

	promExporter, err := otelprom.New(
		otelprom.WithRegisterer(t.registry),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// Every series would otherwise carry otel_scope_name/version/schema_url
		// labels: noise to an operator, and the instrument names are unique.
		otelprom.WithoutScopeInfo(),
		otelprom.WithProducer(t.hists),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: Prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(promExporter),
		// The SDK's default, stated so that OTEL_METRICS_EXEMPLAR_FILTER
		// cannot switch off the trace links the dashboards rely on.
		sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter),
		// Room for every series the limited sink may make (one per caller
		// policy, verb and bucket, bounded by otelsink.MaxPolicies), above
		// the SDK's default of 2,000 per instrument, which would fold a
		// large configuration's policies into one overflow series. Every
		// other instrument is bounded far below it by its closed label sets.
		sdkmetric.WithCardinalityLimit(otelsink.MaxSeriesPerCounter + 1),
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if sampler != nil {
		topts = append(topts, sdktrace.WithSampler(sampler))
	}
	mexp, texp, err := newExporters(ctx, plan, getenv)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if mexp != nil {
		ro := []sdkmetric.PeriodicReaderOption{sdkmetric.WithProducer(t.hists)}
		if getenv("OTEL_METRIC_EXPORT_INTERVAL") == "" {
			ro = append(ro, sdkmetric.WithInterval(MetricExportInterval))
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, ro...)))
	}
	if texp != nil {
		topts = append(topts, sdktrace.WithBatcher(texp))
		t.tracesURL = config.RedactURL(plan.traces.url)
	}
	for _, r := range o.ExtraReaders {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	for _, sp := range o.ExtraSpanProcessors {
		topts = append(topts, sdktrace.WithSpanProcessor(sp))
	}
	t.mp = sdkmetric.NewMeterProvider(mopts...)
	t.tp = sdktrace.NewTracerProvider(topts...)
	t.handler = t.newHandler()
	if plan.traces.url != "" || plan.metrics.url != "" {
		// The URLs only: headers (credentials) are never logged.
		logger.Info("telemetry: OTLP/HTTP export enabled",
			slog.String("traces", plan.traces.describe()), slog.String("metrics", plan.metrics.describe()))
	}
	return t, nil
}

// Check applies to cfg, and to the standard OTEL_* variables getenv reads
// (nil means os.Getenv), every rule New refuses a configuration by: the
// keys, where each signal goes (planExport, with its rule on headers over
// http://), the trace sampler variables, and the OTLP exporters' own, by
// building each exporter New would build and shutting it down unused
// (nothing is sent: an exporter connects only to export). It returns nil,
// or every error at once (errors.Join), each naming the key or the
// variable at fault (a *config.KeyError, or an error wrapping one such as
// *HeadersInClearError); credentials are never echoed.
//
// `registrar-otel config check` calls it, so that the check and a start
// judge the [telemetry] table by the same code.
func Check(ctx context.Context, cfg config.Telemetry, getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	plan, _, errs := checkConfig(cfg, getenv)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	mexp, texp, err := newExporters(ctx, plan, getenv)
	if err != nil {
		return err
	}
	if mexp != nil {
		_ = mexp.Shutdown(ctx)
	}
	if texp != nil {
		_ = texp.Shutdown(ctx)
	}
	return nil
}

// checkConfig validates cfg, naming every broken key (or OTEL_*
// environment variable) at once, and returns where each signal goes and
// the root sampler (nil: the SDK's, from OTEL_TRACES_SAMPLER). New and
// Check share it.
func checkConfig(cfg config.Telemetry, getenv func(string) string) (exportPlan, sdktrace.Sampler, []error) {
	var errs []error
	if strings.TrimSpace(cfg.ServiceName) == "" {
		errs = append(errs, &config.KeyError{Key: keyServiceName, Value: cfg.ServiceName, Rule: "must be a non-empty string"})
	}
	if n := cfg.TraceSamplePerMillion; n > config.MaxTraceSamplePerMillion {
		errs = append(errs, &config.KeyError{Key: keyTraceSample, Value: uint64(n), Rule: "must be at most 1000000 (every root trace)"})
	}
	plan, perrs := planExport(cfg, getenv)
	errs = append(errs, perrs...)
	sampler, err := rootSampler(cfg, getenv)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return exportPlan{}, nil, errs
	}
	return plan, sampler, nil
}

// newExporters builds the OTLP/HTTP exporter of each signal plan exports,
// nil for a signal it does not. Headers, timeout, TLS and compression come
// from the standard OTEL_EXPORTER_OTLP_* variables, which the exporters
// read themselves; gzip is the default when no compression variable is
// set. An exporter that refuses what the variables say (an http:// URL
// with OTEL_EXPORTER_OTLP_CERTIFICATE set) is a *config.KeyError naming
// where the URL came from.
func newExporters(ctx context.Context, plan exportPlan, getenv func(string) string) (sdkmetric.Exporter, sdktrace.SpanExporter, error) {
	var mexp sdkmetric.Exporter
	if u := plan.metrics.url; u != "" {
		mo := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(u)}
		if getenv("OTEL_EXPORTER_OTLP_COMPRESSION") == "" && getenv("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION") == "" {
			mo = append(mo, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
		}
		var err error
		if mexp, err = otlpmetrichttp.New(ctx, mo...); err != nil {
			return nil, nil, exporterError(plan.metrics, "metric", err)
		}
	}
	var texp sdktrace.SpanExporter
	if u := plan.traces.url; u != "" {
		to := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u)}
		if getenv("OTEL_EXPORTER_OTLP_COMPRESSION") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION") == "" {
			to = append(to, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		var err error
		if texp, err = otlptracehttp.New(ctx, to...); err != nil {
			if mexp != nil {
				_ = mexp.Shutdown(ctx)
			}
			return nil, nil, exporterError(plan.traces, "span", err)
		}
	}
	return mexp, texp, nil
}

// exporterError is an OTLP exporter's refusal of s's URL, keyed by where
// the URL came from; neither the URL's credentials nor the SDK's words
// about them are echoed.
func exporterError(s signal, what string, err error) error {
	return config.SecretKeyError(s.from, s.url,
		"cannot be exported to: the OTLP/HTTP "+what+" exporter refuses it ("+config.RedactText(err.Error())+")")
}

// signalURL appends the signal's path to the endpoint's own path:
// http://c:4318 → http://c:4318/v1/traces; http://c/otlp → http://c/otlp/v1/traces.
func signalURL(base *url.URL, signal string) string {
	u := *base
	u.Path = path.Join("/", base.Path, signal)
	u.RawPath = ""
	return u.String()
}

// newResource describes the daemon: OTEL_RESOURCE_ATTRIBUTES first, then
// the SDK's own attributes, then service.name (and service.version, and
// service.instance.id when instanceID is not ""), which therefore always
// come from the configuration (instanceID is InstanceID's, which has
// already given OTEL_RESOURCE_ATTRIBUTES its place).
func newResource(ctx context.Context, serviceName, serviceVersion, instanceID string, logger *slog.Logger) (*resource.Resource, error) {
	attrs := []resource.Option{
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithSchemaURL(semconv.SchemaURL),
	}
	service := []attribute.KeyValue{semconv.ServiceName(serviceName)}
	if serviceVersion != "" {
		service = append(service, semconv.ServiceVersion(serviceVersion))
	}
	if instanceID != "" {
		service = append(service, semconv.ServiceInstanceID(instanceID))
	}
	res, err := resource.New(ctx, append(attrs, resource.WithAttributes(service...))...)
	if err != nil {
		if res == nil || !errors.Is(err, resource.ErrPartialResource) {
			return nil, fmt.Errorf("telemetry: building the resource: %w", err)
		}
		// A malformed OTEL_RESOURCE_ATTRIBUTES drops its bad entries only.
		logger.Warn("telemetry: resource partly built", slog.Any("error", err))
	}
	return res, nil
}

// MeterProvider returns the provider every instrument is created on.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.mp }

// WireObserver returns the server.Observer whose wait histogram the
// readers of t collect (registrar_request_wait_seconds).
func (t *Telemetry) WireObserver() *WireObserver { return t.wire }

// Histograms returns the producer every reader of t is built with: an
// observer given it (NewVerbObserver) has its histograms collected by
// them.
func (t *Telemetry) Histograms() *Histograms { return t.hists }

// TracerProvider returns the provider the verbs' spans are created on.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// Handler returns the metrics listener's handler:
//
//   - GET /metrics: the Prometheus exposition, in the OpenMetrics format
//     (with exemplars) when the scraper's Accept header asks for it, else
//     the classic text format;
//   - GET /healthz, the liveness probe: 200 "ok" while Probes.Live
//     answers nil (always, until SetProbes is called), else 503 with the
//     reason; a failure means the process should be restarted;
//   - GET /readyz, the readiness probe: 200 "ready" while Probes.Ready
//     answers nil, else 503 with the reason; a failure means callers
//     should not be sent here now (starting, stopping, stalled).
func (t *Telemetry) Handler() http.Handler { return t.handler }

// Probes are the answers of /healthz and /readyz: nil for 200, an error
// (its text the body) for 503. A nil func answers nil.
type Probes struct {
	Live, Ready func() error
}

// SetProbes sets what /healthz and /readyz answer. Safe for concurrent
// use with the handler.
func (t *Telemetry) SetProbes(p Probes) { t.probes.Store(&p) }

// probe answers one probe request.
func (t *Telemetry) probe(w http.ResponseWriter, ok string, pick func(*Probes) func() error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if p := t.probes.Load(); p != nil {
		if f := pick(p); f != nil {
			if err := f(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(err.Error() + "\n"))
				return
			}
		}
	}
	_, _ = w.Write([]byte(ok))
}

func (t *Telemetry) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorLog:          promLogger{t.logger},
		// A metric that fails to collect is logged and left out; the rest
		// of the scrape is still served.
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		t.probe(w, "ok", func(p *Probes) func() error { return p.Live })
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		// Before SetProbes the daemon is still opening: not ready.
		if t.probes.Load() == nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("starting\n"))
			return
		}
		t.probe(w, "ready", func(p *Probes) func() error { return p.Ready })
	})
	return mux
}

// promLogger adapts slog to promhttp.Logger.
type promLogger struct{ l *slog.Logger }

func (p promLogger) Println(v ...any) {
	p.l.Warn("telemetry: metrics exposition", slog.String("error", strings.TrimSpace(fmt.Sprintln(v...))))
}

// Listen binds the metrics listener on addr (telemetry.metrics_listen,
// host:port; port 0 picks a free port, read it from the listener's Addr).
// Serve it with Serve.
func (t *Telemetry) Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", &config.KeyError{Key: keyMetricsListen, Value: addr, Rule: "could not be listened on: " + err.Error()})
	}
	return l, nil
}

// ErrClosed is returned by Serve after Shutdown has begun.
var ErrClosed = errors.New("telemetry: shut down")

// Serve serves Handler on l until Shutdown, then returns nil. It closes l.
// Any other error is the listener's failure. Serve after Shutdown closes l
// and returns ErrClosed.
func (t *Telemetry) Serve(l net.Listener) error {
	srv := &http.Server{
		Handler:           t.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		ErrorLog:          slog.NewLogLogger(t.logger.Handler(), slog.LevelWarn),
	}
	l = &cappedListener{Listener: l, max: MetricsMaxConns}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = l.Close()
		return ErrClosed
	}
	t.servers = append(t.servers, srv)
	t.mu.Unlock()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("telemetry: serving metrics on %s: %w", l.Addr(), err)
	}
	return nil
}

// ForceFlush exports every finished span and the current metrics through
// the OTLP exporters (a no-op for Prometheus, which is pulled).
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	return errors.Join(t.tp.ForceFlush(ctx), t.mp.ForceFlush(ctx))
}

// TracesEndpoint is the URL spans are exported to (credentials redacted),
// or "" when no span exporter exists: spans then go nowhere.
func (t *Telemetry) TracesEndpoint() string { return t.tracesURL }

// Shutdown stops the metrics server (waiting, within ctx, for in-flight
// scrapes), then flushes and shuts down the TracerProvider and the
// MeterProvider, in that order, so the last spans and the final metric
// values reach the collector. It is safe on a nil Telemetry and idempotent:
// later calls return the first call's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.shutOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		servers := t.servers
		t.servers = nil
		t.mu.Unlock()
		var errs []error
		for _, srv := range servers {
			if err := srv.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("telemetry: stopping the metrics server: %w", err))
			}
		}
		if err := t.tp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry: shutting down the tracer provider: %w", err))
		}
		if err := t.mp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry: shutting down the meter provider: %w", err))
		}
		t.shutErr = errors.Join(errs...)
	})
	return t.shutErr
}
