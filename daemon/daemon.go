// Package daemon wires the registrar daemon together and runs it: the audit
// store, the embedded backend, the limiter with its sink chain
// (coalesce → otelsink → counting), the shared health snapshot, the verbs,
// the wire listeners, telemetry, and the single maintenance tick loop.
//
// Run returns when its context is cancelled (SIGTERM/SIGINT in
// cmd/registrar-otel), after a graceful shutdown: the listeners stop
// accepting and in-flight invocations finish, the tick loop stops, every
// open coalescing window is flushed to a counted record, and the store,
// backend and telemetry providers are closed and flushed, in that order.
// While it runs, SIGHUP reopens the audit store's active file (logrotate's
// convention) and reloads the configuration (Reload): the live keys apply
// in place, whole or not at all.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/buildinfo"
	"github.com/registrar-otel/registrar-otel/internal/logthrottle"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// ShutdownTimeout is the shutdown's grace period: how long connections
// without an invocation in flight (idle, or still sending their request)
// stay open once shutdown starts. An invocation still running at its end
// keeps its connection until its answer is written (server.Server.Shutdown):
// it has written its intent record, and a caller left without the answer
// would send it again.
const ShutdownTimeout = 15 * time.Second

// Daemon is a configured, opened daemon. Build it with New, run it with Run.
type Daemon struct {
	cfg      config.Config
	logger   *slog.Logger
	logLevel logLevel // registrar.log_level, or serve --log-level (loglevel.go)

	tel       *telemetry.Telemetry
	metricsL  net.Listener
	store     *audit.Store
	capacity  *audit.CapacityProbe
	capLog    *logthrottle.Throttle // capacity state changes, per target state
	backend   closingBackend
	counts    *counting.Sink
	otelSink  *otelsink.Sink // the limited and shadow counters, per policy
	coalescer *coalesce.Sink
	stateDir  *os.File // registrar.state_dir, held open for the checkpoint, the sealing key and the guard
	// sealHead is the audit chain's head last logged (seal.go); the tick
	// goroutine's, then shutdown's.
	sealHead audit.SealHead
	ckpt     *coalesce.Checkpointer // the evidence checkpoint (evidence.go)
	// ckptFailing is the checkpoint's last failure, logged once ("" after
	// a write that succeeded); the tick goroutine's alone.
	ckptFailing string
	guard       *dirGuard         // the private directories' recheck on the tick (dirguard.go)
	recovery    coalesce.Recovery // what start found of the previous stop (evidence.go)
	limiter     *limiter.Limiter
	health      *health.Holder
	verbs       *registrar.Verbs
	// stockStale: the registrations were not counted from the registry
	// yet (the backend could not list them at start); the tick retries.
	stockStale atomic.Bool
	server     *server.Server
	listeners  []net.Listener

	closers []func() error // in reverse order of opening

	activated  bool          // the unix listener came from systemd (LISTEN_FDS)
	watchdog   time.Duration // WATCHDOG_USEC, 0 when off
	ticks      *tickClock    // the last completed maintenance pass, for /healthz
	stopping   atomic.Bool   // shutdown has begun: /readyz answers 503
	lastStatus string        // the last STATUS= sent while serving (set by Run, then the tick goroutine's)
	// backendUnready is the backend's last readiness failure seen by the
	// tick ("" while ready), so a change is logged once; the tick
	// goroutine's alone.
	backendUnready string

	reload reloadState // SIGHUP and registrar-otel reload (reload.go)

	seams seams // the clock, environment, notifier and ticker (seams.go)
}

// New opens every component. On error, whatever was opened is closed again
// and the error names the component. It is NewWithOptions with the zero
// Options: the daemon filters logger's records by registrar.log_level.
func New(cfg config.Config, logger *slog.Logger) (*Daemon, error) {
	return NewWithOptions(cfg, logger, Options{})
}

// NewWithOptions is New with the settings that do not come from the
// configuration: how the log level is controlled (Options).
func NewWithOptions(cfg config.Config, logger *slog.Logger, opts Options) (*Daemon, error) {
	return newDaemon(cfg, logger, opts, seams{})
}

// newDaemon is NewWithOptions with the seams (seams.go): the zero seams
// are the process's own.
func newDaemon(cfg config.Config, logger *slog.Logger, opts Options, s seams) (_ *Daemon, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger, level := setupLogLevel(&cfg, logger, opts)
	d := &Daemon{cfg: cfg, logger: logger, logLevel: level, seams: s.withDefaults()}
	d.reload.init(cfg, d.seams.load)
	defer func() {
		if err != nil {
			if d.ckpt != nil {
				// Nothing was served, so nothing is undurable: a failed
				// start is not an unclean stop.
				d.ckpt.Clear()
			}
			if d.activated && len(d.listeners) > 0 {
				closeWaiting(d.listeners[0]) // the socket unit's callers: see closeWaiting
			}
			d.close() // whatever was opened before the failure
		}
	}()
	r := cfg.Registrar

	// New routes the SDK's own diagnostics to the daemon's log,
	// rate-limited and redacted (they repeat what they cannot parse:
	// header values, URLs).
	d.tel, err = telemetry.New(context.Background(), cfg.Telemetry, telemetry.Options{
		Logger:         logger.With("component", "telemetry"),
		ServiceVersion: buildinfo.GetVersion(),
		StateDir:       cfg.Registrar.StateDir,
	})
	if err != nil {
		return nil, setup(fmt.Errorf("daemon: telemetry: %w", err), true)
	}
	d.closers = append(d.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		return d.tel.Shutdown(ctx)
	})
	mp, tp := d.tel.MeterProvider(), d.tel.TracerProvider()
	auditObs, err := telemetry.NewAuditObserver(mp)
	if err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}

	// The state directory first: the audit store's sealing key lives in
	// it (seal.go), and the store writes the evolved keys through it.
	sealKey, err := d.openStateDir(r)
	if err != nil {
		return nil, err
	}
	d.store, err = audit.Open(audit.Options{
		Dir:              r.AuditRecordDir,
		MaxFileBytes:     r.AuditMaxFileBytes,
		MaxRetainedFiles: r.AuditMaxRetainedFiles,
		MinRetention:     time.Duration(r.AuditMinRetentionSeconds) * time.Second,
		Logger:           logger.With("component", "audit"),
		Observer:         auditObs,
		Seal:             sealKey,
	})
	if err != nil {
		return nil, setup(fmt.Errorf("daemon: audit store (registrar.audit_record_dir %s): %w", r.AuditRecordDir, err), false)
	}
	d.closers = append(d.closers, func() error {
		// The stop seal changes the head after the last tick: log it too.
		err := d.store.Close()
		d.logSealHead(context.Background())
		return err
	})
	d.capacity, err = audit.NewCapacityProbe(d.store, r.AuditStoreReserveBytes)
	if d.capacity == nil {
		return nil, fmt.Errorf("daemon: audit capacity probe: %w", err)
	}
	if err != nil {
		logger.LogAttrs(context.Background(), slog.LevelWarn, "audit capacity probe failed; retried on every tick", slog.Any("error", err))
	}
	d.capLog = logthrottle.New(logger, time.Minute, nil)
	if err := telemetry.RegisterAuditStore(mp, d.capacity.Last, d.store.Stats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}

	// Before anything can count a limited invocation, and before any
	// listener exists: the previous run's checkpoint becomes counted
	// records, then the files are rewritten empty as this run's marker.
	if err := d.recoverEvidence(cfg, logger); err != nil {
		// The same exit-2 class as the backend's refusal (an unsafe state
		// directory was refused before the store opened, openStateDir).
		return nil, setup(err, false)
	}

	d.backend, err = openBackend(cfg, d.seams.environ(), logger.With("component", "backend"), tp, mp)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, d.backend.Close)

	// The sink chain: coalesce → otelsink → counting. Each wraps the next
	// and forwards every event, so the counting sink stays the single
	// per-bucket counter the health member reads.
	d.counts = counting.New()
	d.otelSink, err = otelsink.New(d.counts, mp)
	if err != nil {
		return nil, fmt.Errorf("daemon: otel sink: %w", err)
	}
	if err := declarePolicies(d.otelSink, r); err != nil {
		return nil, fmt.Errorf("daemon: otel sink: %w", err)
	}
	d.coalescer, err = coalesce.New(coalesce.Options{
		Next:   d.otelSink,
		Store:  d.store,
		Window: time.Duration(r.RateLimitCoalesceWindowSeconds) * time.Second,
		Logger: logger.With("component", "coalesce"),
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: coalescer: %w", err)
	}
	d.ckpt.Track(d.coalescer)
	lc, err := limiterConfig(r)
	if err != nil {
		return nil, fmt.Errorf("daemon: limiter: %w", err)
	}
	d.limiter, err = limiter.New(lc, d.coalescer)
	if err != nil {
		return nil, fmt.Errorf("daemon: limiter: %w", err)
	}
	d.health, err = health.NewHolder(health.LimiterSource(d.counts), health.AuditCapacitySource(d.capacity), health.RestartSource(restartMember(d.recovery)))
	if err != nil {
		return nil, fmt.Errorf("daemon: health: %w", err)
	}
	verbObs, err := telemetry.NewVerbObserver(mp, d.tel.Histograms())
	if err != nil {
		return nil, fmt.Errorf("daemon: verbs: %w", err)
	}
	auth, err := authority(r)
	if err != nil {
		return nil, fmt.Errorf("daemon: caller policies: %w", err)
	}
	warnAuthorization(context.Background(), logger.With("component", "config"), cfg)
	d.verbs, err = registrar.New(registrar.Config{
		Components:        r.Components,
		MaxWrapTTLSeconds: r.MaxWrapTTLSeconds,
		Authority:         auth,
	}, registrar.Deps{
		Limiter:        d.limiter,
		Audit:          d.store,
		Backend:        d.backend,
		Logger:         logger.With("component", "registrar"),
		TracerProvider: tp,
		Observer:       verbObs,
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: verbs: %w", err)
	}
	d.verbs.SetCeilings(r.MaxInstancesPerHost)
	if err := d.countRegistrations(context.Background(), r); err != nil {
		return nil, err
	}
	if err := telemetry.RegisterStock(mp, d.stockStats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}
	if err := telemetry.RegisterLimiter(mp, d.limiter.Stats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}
	if err := telemetry.RegisterCoalesce(mp, d.coalescer.Stats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}
	if err := telemetry.RegisterCapacity(mp, d.coalescer.Stats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}
	if err := telemetry.RegisterRestart(mp, d.restartStats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}
	if err := telemetry.RegisterReload(mp, d.reload.stats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}
	ms := func(v uint32) time.Duration { return time.Duration(v) * time.Millisecond }
	d.server, err = server.New(server.Options{
		Verbs:                  d.verbs,
		Health:                 d.health,
		Reload:                 d.reloadForWire,
		Logger:                 logger.With("component", "wire"),
		UnixMaxConns:           int(r.UnixMaxConns),
		TLSMaxConns:            int(r.TLSMaxConns),
		TLSHandshakeMaxConns:   int(r.TLSHandshakeMaxConns),
		TLSHandshakeTimeout:    ms(r.TLSHandshakeTimeoutMS),
		MaxConnsPerIdentity:    int(r.MaxConnsPerIdentity),
		ReadHeaderTimeout:      ms(r.ReadHeaderTimeoutMS),
		ReadBodyTimeout:        ms(r.ReadBodyTimeoutMS),
		IdleTimeout:            ms(r.IdleTimeoutMS),
		MaxInFlightPerIdentity: int(r.MaxInFlightPerIdentity),
		SharedInFlight:         int(r.SharedInFlight),
		WaitTimeout:            ms(r.WaitTimeoutMS),
		RefusalPace:            ms(r.RefusalPaceMS),
		Backup:                 backupOf(d.backend),
		Limits:                 d.limitsShow,
		LimitsReset:            d.limitsReset,
		Observer:               d.tel.WireObserver(),
		DisableFairDispatch:    d.seams.unfair,
	})
	if err != nil {
		return nil, fmt.Errorf("daemon: wire server: %w", err)
	}
	// Before the first connection: every unix caller is identified
	// through the ranges from its first call.
	sub, err := loadSubuids(cfg)
	if err != nil {
		return nil, setup(fmt.Errorf("daemon: subordinate uids: %w", err), true)
	}
	d.putSubuids(context.Background(), sub)
	if err := telemetry.RegisterWire(mp, d.server.Stats); err != nil {
		return nil, fmt.Errorf("daemon: telemetry: %w", err)
	}

	ul, err := d.listenUnix()
	if err != nil {
		return nil, err
	}
	d.listeners = append(d.listeners, ul)
	d.closers = append(d.closers, ignoreClosed(ul.Close))
	if d.guard, err = d.openDirGuard(); err != nil {
		return nil, err
	}
	if r.TLSListen != "" {
		tl, err := server.ListenTLS(r.TLSListen, r.TLSCertFile, r.TLSKeyFile, r.TLSClientCAFile)
		if err != nil {
			return nil, setup(fmt.Errorf("daemon: TLS listener (registrar.tls_listen %s, tls_cert_file, tls_key_file, tls_client_ca_file): %w", r.TLSListen, err), false)
		}
		d.listeners = append(d.listeners, tl)
		d.closers = append(d.closers, ignoreClosed(tl.Close))
	}
	if cfg.Telemetry.MetricsListen != "" {
		d.metricsL, err = d.tel.Listen(cfg.Telemetry.MetricsListen)
		if err != nil {
			return nil, setup(fmt.Errorf("daemon: metrics listener (telemetry.metrics_listen %s): %w", cfg.Telemetry.MetricsListen, err), false)
		}
		d.closers = append(d.closers, ignoreClosed(d.metricsL.Close))
	}
	d.watchdog, err = watchdogInterval()
	if err != nil {
		logger.LogAttrs(context.Background(), slog.LevelWarn, "WATCHDOG_USEC unreadable; the watchdog is off", slog.Any("error", err))
	}
	if d.seams.watchdog > 0 {
		d.watchdog = d.seams.watchdog
	}
	return d, nil
}

// listenUnix returns the unix listener: the one systemd handed over for
// registrar.socket_path when socket activated (its mode and group are the
// socket unit's), else one bound here, shared with registrar.socket_group
// when that is set.
func (d *Daemon) listenUnix() (net.Listener, error) {
	r := d.cfg.Registrar
	l, err := activatedUnix(r.SocketPath)
	if err != nil || l != nil {
		d.activated = l != nil
		return l, err
	}
	var g server.SocketGroup
	if r.SocketGroup != "" {
		if g, err = LookupSocketGroup(r.SocketGroup); err != nil {
			return nil, &SetupError{Err: fmt.Errorf("daemon: unix listener: %w", err)}
		}
	}
	l, err = server.ListenUnixGroup(r.SocketPath, g)
	if err != nil {
		return nil, setup(fmt.Errorf("daemon: unix listener (registrar.socket_path %s): %w", r.SocketPath, err), errors.Is(err, server.ErrSocketGroup))
	}
	return l, nil
}

// LookupSocketGroup resolves registrar.socket_group, a name or a numeric
// gid, in the host's group database; a group that does not exist is a
// *config.KeyError naming the key and the group. serve refuses to start on
// it (a SetupError, exit 2) and config check reports it.
func LookupSocketGroup(name string) (server.SocketGroup, error) {
	var g *user.Group
	var err error
	if _, numErr := strconv.Atoi(name); numErr == nil {
		g, err = user.LookupGroupId(name)
	} else {
		g, err = user.LookupGroup(name)
	}
	if err != nil {
		return server.SocketGroup{}, &config.KeyError{Key: "registrar.socket_group", Value: name, Rule: "must name a group that exists on this host (" + err.Error() + ")"}
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return server.SocketGroup{}, &config.KeyError{Key: "registrar.socket_group", Value: name, Rule: "has a non-numeric gid " + g.Gid}
	}
	return server.SocketGroup{Name: g.Name, GID: gid}, nil
}

// SocketAddr returns the unix listener's address.
func (d *Daemon) SocketAddr() net.Addr { return d.listeners[0].Addr() }

// MetricsAddr returns the metrics listener's address, or nil when
// telemetry.metrics_listen is empty.
func (d *Daemon) MetricsAddr() net.Addr {
	if d.metricsL == nil {
		return nil
	}
	return d.metricsL.Addr()
}

// close closes every opened component in reverse order, logging failures.
func (d *Daemon) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		if err := d.closers[i](); err != nil {
			d.logger.LogAttrs(context.Background(), slog.LevelWarn, "close failed", slog.Any("error", err))
		}
	}
	d.closers = nil
}

// ignoreClosed wraps a listener's Close: after Shutdown it is already
// closed, which is not a failure.
func ignoreClosed(f func() error) func() error {
	return func() error {
		if err := f(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	}
}
