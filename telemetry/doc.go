// Package telemetry builds the daemon's OpenTelemetry providers and
// exporters from the [telemetry] configuration table, serves the
// Prometheus exposition, and declares and registers the metric instruments
// of every other package.
//
// # Where metrics live
//
// One convention, for every metric instrument of the daemon:
//
//   - Its name, unit, description, buckets and label keys are declared in
//     this package, and it is registered here, by a Register* function
//     (observable instruments read from a Stats func at each collection:
//     RegisterLimiter, RegisterCoalesce, RegisterWire, RegisterAuditStore,
//     RegisterCapacity, RegisterRestart, RegisterReload) or a New*Observer
//     constructor (synchronous instruments behind a small observer
//     interface the instrumented package declares: NewAuditObserver for audit.Observer, NewVerbObserver
//     for registrar.Observer, NewOpenBaoObserver for openbao.Observer,
//     NewWireObserver for server.Observer).
//   - Two histograms are recorded on every request a flood makes, the
//     wire's wait (NewWireObserver) and the verbs' duration
//     (NewVerbObserver), so they are no SDK instruments: each is counted
//     in atomics (internal/exacthist) and joins a Histograms, the Producer
//     Telemetry builds its readers with (Telemetry.Histograms); the
//     duration keeps each bucket's last sampled observation as its
//     exemplar, as the SDK's histogram did.
//   - The instrumented packages (limiter, coalesce, audit, wire, registrar,
//     backend/openbao) never import the OTel metric API: they expose a
//     Stats func or call their observer, which keeps them below this
//     package and testable without a meter.
//   - sinks/otelsink is the one exception, by definition: it is the
//     OpenTelemetry implementation of limiter.Sink, so its three counters
//     (registrar.limited.predecision_refusal, registrar.limited.admission,
//     registrar.shadow_limited) and its span events are declared and
//     registered there. New sets the MeterProvider's cardinality limit to
//     otelsink.MaxSeriesPerCounter, the most series its policy label can
//     make. It does not
//     import this package: that would link the wire, the backends and the
//     HTTP server into a sink the limiter's benchmarks build alone.
//   - Tracing spans stay in the package whose work they time (registrar's
//     invocation spans, backend/openbao's request spans): a span is opened
//     and closed around that work and carries its attributes. A package
//     that keeps spans also names the instrumentation scope, and its
//     metrics are registered here in that same scope (scopedMeter), so an
//     OTLP consumer sees a package's spans and metrics under one scope.
//
// Adding a metric: declare its name constant (with the Prometheus series
// in its comment) beside the others of its package, create it in the
// Register* or New*Observer of that package, add it to the Series list
// below, regenerate testdata/metrics_names.golden with -update, and add it
// to the docs' metrics page (docs/en and docs/ko); an alert on it goes in
// dashboards/ with a promtool test (see docs/en/architecture.md).
//
// # Providers and exporters
//
// New returns a Telemetry holding a MeterProvider and a TracerProvider
// whose resource carries service.name (telemetry.service_name) and, when
// given, service.version.
//
//   - Metrics are read by the OTel Prometheus exporter, registered on a
//     private registry (never the global one) and served on GET /metrics by
//     Handler; GET /healthz (liveness) and GET /readyz (readiness)
//     answer what the daemon sets with SetProbes. The daemon binds
//     telemetry.metrics_listen with Listen and runs Serve.
//   - OTLP/HTTP export is decided per signal (planExport): the full URL of
//     telemetry.otlp_traces_endpoint / otlp_metrics_endpoint ("none" for
//     off), else telemetry.otlp_endpoint (a base URL such as
//     http://collector:4318) plus /v1/traces and /v1/metrics, else the
//     standard OTEL_EXPORTER_OTLP_*ENDPOINT and OTEL_*_EXPORTER=none
//     variables. Spans are batched, metrics pushed every
//     MetricExportInterval (or OTEL_METRIC_EXPORT_INTERVAL), protobuf and
//     gzip-compressed; headers, timeout and TLS come from the standard
//     variables the exporters read, and are never logged. A signal with no
//     endpoint has no exporter: nothing is sent, nothing is logged about a
//     missing collector.
//   - New refuses a configuration (a *config.KeyError naming the key or
//     variable; an http:// endpoint to another host while a headers
//     variable is set is a *HeadersInClearError) by the same code as
//     Check, which `registrar-otel config check` calls: the check and a
//     start judge the table alike.
//   - The SDK's own errors and log lines go through the injected
//     *slog.Logger (InstallDiagnostics, Diagnostics), rate-limited per kind
//     of message to one per DiagnosticsInterval: a JSON log stays JSON.
//   - NewDriver is the load driver's telemetry: spans only, exported where
//     the daemon of the same configuration exports, flushed by Close.
//   - Root spans are sampled at telemetry.trace_sample_per_million in a
//     million (the SDK's traceidratio sampler); a span with a parent
//     follows its parent's decision (parent-based), so a caller's sampled
//     traceparent is always honoured. OTEL_TRACES_SAMPLER_ARG, when set, is
//     that sampler's argument instead, and OTEL_TRACES_SAMPLER, when set,
//     replaces the sampler, as the OpenTelemetry specification says.
//   - A counter incremented inside a sampled span keeps the span's trace id
//     as an exemplar. A scrape that asks for OpenMetrics
//     (Accept: application/openmetrics-text) shows it after the sample:
//     registrar_limited_admission_total{policy="default",verb="mint"} 7 # {span_id="…",trace_id="…"} 1
//   - Shutdown stops the metrics server and flushes both providers.
//
// # Series
//
// Names are a contract with the dashboards and alert rules. Labels are
// only closed sets (verb, bucket, result, phase, ...) and the caller
// policy, whose names the configuration bounds: never a caller identity or
// a request id. Series carry no otel_scope_* labels; target_info carries the
// resource. The series of this package and of sinks/otelsink exist from
// the first scrape (counters at zero, one series per label value), so an
// increase() over the first event is never lost; the histograms and the
// registrar's own series appear on first use.
//
// Build and runtime (Prometheus only):
//
//	registrar_build_info{version,revision,goversion}
//	    Always 1: internal/buildinfo as stamped by `make build`.
//	process_*, go_*
//	    client_golang's standard process and Go runtime collectors.
//
// Limited invocations (package sinks/otelsink), two counters never summed,
// and the shadow charges, never in either:
//
//	registrar_limited_predecision_refusal_total{policy,verb}
//	    Invocations that failed a pre-derivation check while the caller's
//	    predecision_refusal bucket was empty. They got their real refusal;
//	    only their audit records were suppressed. A rising rate means some
//	    caller floods malformed requests.
//	registrar_limited_admission_total{policy,verb}
//	    Invocations throttled at admission (answered RegistrarBusy with a
//	    retry-after). A rising rate means legitimate traffic is being held
//	    back: a bring-up wave may stall. Exemplars link to the traces.
//	registrar_shadow_limited_total{policy,verb,bucket}
//	    Calls their caller policy's shadow (candidate) sizes would have
//	    limited; they were answered as if the shadow did not exist. A
//	    rising rate is what the candidate sizes would refuse.
//
// policy is the caller policy whose sizes the bucket had ("default" for
// the [registrar] sizes); the series of the default policy exist from the
// start, those of a configured policy from its declaration
// (otelsink.Sink.DeclarePolicy).
//
// Invocations (NewVerbObserver, for package registrar):
//
//	registrar_invocations_total{verb,result}
//	    result is first_mint, idempotent_remint, identity_removed,
//	    idempotent_already_absent, refused, throttled or unavailable.
//	registrar_invocation_duration_seconds{verb,result}
//	    Histogram, 100 µs .. 10 s, with exemplars (a Histograms').
//	registrar_outcome_unrecordable_total{verb}
//	    Registry changes whose outcome record could not be written.
//	registrar_backend_partial_total{verb}
//	    Backend failures after the registry was, or may have been,
//	    changed; a retry of the same request converges.
//
// OpenBao backend (NewOpenBaoObserver, only with backend = "openbao"):
//
//	registrar_backend_request_duration_seconds{backend,operation}
//	    Histogram of every request to the server, 0.5 ms .. 30 s.
//	registrar_backend_request_errors_total{backend,operation,kind}
//	    Failed requests by kind (timeout, server_error, client_error,
//	    transport, bad_response, saturated).
//	registrar_openbao_token_expiry_timestamp_seconds (RegisterOpenBaoToken)
//	    Gauge: Unix time the backend's token lapses unless renewed, 0 if it
//	    never expires. Falling within hours of time() means renewal fails
//	    or the token is not renewable: RegistrarOpenBaoTokenExpiring.
//
// Limiter (RegisterLimiter):
//
//	registrar_limiter_entries{pool}
//	    Gauge: entries in each pool of the limiter map: pool="remote" (the
//	    certificate identities, capped at 256, limiter.MaxEntries) and
//	    pool="local" (the unix socket's callers, capped at 256,
//	    limiter.MaxLocalEntries). Near its cap, a pool's new keys are about
//	    to share that pool's overflow buckets.
//	registrar_limiter_overflow_charges_total{verb,bucket}
//	    Charges that fell on the shared overflow bucket of (verb, bucket)
//	    because the map was full of refilling entries. Should stay 0; any
//	    increase points at an identity unstable across connections.
//	registrar_limiter_reclaimed_entries_total
//	    Entries removed at full burst to keep the map small. Normal churn.
//
// Coalescer (RegisterCoalesce):
//
//	registrar_coalesce_open_windows
//	    Gauge: open coalescing windows, capped at 4096
//	    (coalesce.MaxOpenWindows).
//	registrar_coalesce_records_total{bucket}
//	    Counted "limited" audit records written, one per closed window.
//	registrar_coalesce_early_flushes_total
//	    Windows written early because the window map was at its cap.
//	registrar_coalesce_record_write_failures_total
//	    Counted records that could not be written: flood evidence lost.
//
// Capacities and the early-flush hand-off (RegisterCapacity):
//
//	registrar_limiter_capacity{pool}
//	    Gauge: each pool's entry cap (remote: limiter.MaxEntries, 256;
//	    local: limiter.MaxLocalEntries, 256); RegistrarLimiterSaturated
//	    compares registrar_limiter_entries of each pool with its own cap.
//	registrar_coalesce_window_capacity
//	    Gauge: the open-window cap (coalesce.MaxOpenWindows, 4096).
//	registrar_coalesce_handoff_pending
//	    Gauge: early-flushed windows waiting for the coalescer's writer.
//	registrar_coalesce_handoff_waits_total
//	    Limited calls that waited for the writer because the hand-off was
//	    full. Should stay 0.
//
// Restarts and the evidence checkpoint (RegisterRestart):
//
//	registrar_unclean_restarts_total
//	    1 when this process's start found the previous run's evidence
//	    checkpoint (no shutdown flush: SIGKILL, crash, OOM kill, power
//	    loss), else 0: limited invocations between the last checkpoint and
//	    the restart may be uncounted. RegistrarUncleanRestart fires on it.
//	registrar_last_unclean_restart_timestamp_seconds
//	    Gauge: that start's Unix time, 0 after a clean start.
//	registrar_coalesce_checkpoint_failures_total
//	    Checkpoint writes to registrar.state_dir that failed. Should stay
//	    0; while it rises a crash loses whole windows, not one tick.
//
// Configuration reloads (RegisterReload), named after Prometheus's own:
//
//	registrar_config_last_reload_successful
//	    Gauge: 1 at start and after a reload (SIGHUP or registrar-otel
//	    reload) that applied; 0 after one that was refused, with the old
//	    configuration still in force. RegistrarConfigReloadFailed fires on 0.
//	registrar_config_last_reload_success_timestamp_seconds
//	    Gauge: when the configuration in force was applied. The dashboard
//	    annotates each change.
//	registrar_config_reloads_total{result}
//	    Reloads by result, success or failure.
//
// Private directories (RegisterDirectories):
//
//	registrar_directory_unsafe{directory}
//	    Gauge: 1 while the audit record directory (audit),
//	    registrar.state_dir (state) or the socket's directory (socket),
//	    rechecked on every tick through the descriptor the daemon holds,
//	    is owned by neither root nor the daemon's uid or is group- or
//	    world-writable; every append is refused meanwhile, so the audit
//	    alerts fire. 0 when private.
//
// The wire (RegisterWire, Telemetry.WireObserver):
//
//	registrar_wire_connections{listener}
//	    Gauge: established connections of each listener (unix, tls).
//	registrar_wire_rejected_total{listener,reason}
//	    Connections and requests turned away before any verb, by
//	    server.Reason.
//	registrar_requests_in_flight{listener}
//	    Gauge: requests holding a seat of the fair dispatch, from their
//	    first bytes to their answer flushed. Near
//	    registrar.shared_in_flight while several identities call, and up
//	    to registrar.max_in_flight_per_identity while one calls alone.
//	registrar_request_wait_seconds{listener}
//	    Histogram of each served request's wait for its turn, 0 when
//	    seated at once; its count is the requests served. A rising p99
//	    means requests queue behind the shared seats: one identity is
//	    asking for more than its share (a flood, or a wave beside other
//	    callers). RegistrarRequestWaitHigh fires on it.
//	registrar_request_wait_timeouts_total{listener}
//	    Requests that waited past registrar.wait_timeout_ms and were
//	    answered RegistrarBusy without reaching a verb; not in the histogram.
//
// Audit store (NewAuditObserver):
//
//	registrar_audit_appends_total{phase}
//	    Successful appends; phase is intent, outcome, limited or admin.
//	registrar_audit_append_failures_total{phase}
//	    Failed appends. A failed intent refuses the mint.
//	registrar_audit_append_duration_seconds
//	    Histogram of every append's duration (write + fsync).
//
// Audit sealing (RegisterAuditStore; only while the store is sealed, or
// holds a chain and was opened without its key):
//
//	registrar_audit_seal_epoch
//	    Gauge: the sealing epoch. It rises at every start, rotation and
//	    stop and at least every 15 minutes; flat for longer, no seal.
//	registrar_audit_seal_last_seal_timestamp_seconds
//	    Gauge: Unix time of the last sealed record. More than 30 minutes
//	    (two epochs) ago fires RegistrarAuditSealStalled.
//	registrar_audit_seal_key_file_failures_total
//	    Evolved keys not written to the key file; while it rises the file
//	    holds an earlier epoch's key (forward security is weakened).
//
// # Reading the histogram buckets
//
// Each histogram exports cumulative buckets: _bucket{le="X"} counts the
// observations of at most X seconds, le="+Inf" counts them all and equals
// _count, and _sum is their total in seconds.
//
// registrar_audit_append_duration_seconds has the bounds 50, 100, 250,
// 500 µs; 1, 2.5, 5, 10, 25, 50, 100, 250, 500 ms; 1, 2.5, 5 s. An append
// is a write and an fsync: a healthy local SSD lands at or below
// le="0.001"; mass between le="0.01" and le="0.1" is a slow or network
// disk; anything above le="0.5" is storage trouble, which every admitted
// invocation waits on twice (intent and outcome). The +Inf bucket beyond
// 5 s holds appends that a client has likely given up on.
//
// registrar_invocation_duration_seconds (the registrar's) has the bounds
// 100, 250, 500 µs; 1 ms .. 10 s in 1-2.5-5 steps. A limited
// invocation writes nothing and lands in the lowest buckets; an admitted
// one costs two appends plus backend work.
//
// registrar_request_wait_seconds has the bounds 100, 250, 500 µs; 1 ms ..
// 5 s in 1-2.5-5 steps. A request seated at once waits 0 and lands in
// le="0.0001"; a flood's requests, held behind the shared seats, wait
// tens of microseconds to milliseconds; anything near
// registrar.wait_timeout_ms (2 s) is about to be answered RegistrarBusy.
//
// For a quantile, aggregate the buckets by le before the quantile:
// histogram_quantile(0.99, sum by (le) (rate(X_bucket[5m]))).
//
// # Concurrency
//
// Telemetry, the registered callbacks and the observers are safe for
// concurrent use.
package telemetry
