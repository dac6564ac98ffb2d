package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

// ErrRestartRequired is wrapped by a reload's error when a key that needs
// a restart changed.
var ErrRestartRequired = errors.New("daemon: a restart-only key changed")

// ErrReloadInvalid is wrapped by a reload's error when the configuration
// read did not validate as it would at start.
var ErrReloadInvalid = errors.New("daemon: the configuration does not validate")

// reloadState is the reload path's state. mu serializes reloads and
// guards applied; the counters are read by the telemetry callback.
type reloadState struct {
	mu sync.Mutex
	// applied is the configuration in force: the start's, then each
	// reload's that applied. Restart-only keys stay the start's.
	applied config.Config

	lastOK          atomic.Bool
	lastSuccessUnix atomic.Int64 // nanoseconds since the Unix epoch
	successes       atomic.Uint64
	failures        atomic.Uint64
	// now is the wall clock of the success timestamp, load the loader
	// (seams.load).
	now  func() time.Time
	load func(path string, environ []string, logger *slog.Logger) (config.Config, error)
}

func (r *reloadState) init(cfg config.Config, load func(string, []string, *slog.Logger) (config.Config, error)) {
	r.applied = cfg.Clone()
	r.now, r.load = time.Now, load
	r.lastOK.Store(true)
	r.lastSuccessUnix.Store(r.now().UnixNano())
}

func (r *reloadState) stats() telemetry.ReloadStats {
	return telemetry.ReloadStats{
		LastSuccessful:         r.lastOK.Load(),
		LastSuccessUnixSeconds: float64(r.lastSuccessUnix.Load()) / 1e9,
		Successes:              r.successes.Load(),
		Failures:               r.failures.Load(),
	}
}

// tokenRereader is the OpenBao backend's token re-read (issue 26 defines
// it on *openbao.Backend): it reads the token again from its sources and
// keeps the old token when that fails. The daemon calls whichever of the
// two shapes the backend has.
type tokenRereader interface {
	RereadToken(ctx context.Context) error
}

type openbaoReloader interface {
	Reload(ctx context.Context, cfg config.OpenBao) error
}

// Reload re-reads the configuration file the daemon started with (none:
// the embedded defaults) and the environment, validates them exactly as
// start does (config.Load, and for the openbao backend the token and CA
// files), and then applies the result whole or keeps the old one whole:
// a key that needs a restart (config.ReloadClass) refuses the whole
// reload, naming it. Applied live, in this order: the OpenBao token
// re-read (a failure refuses the reload, the old token kept), then the
// limiter's sizes (existing buckets re-expressed, never minting: see
// limiter.ReconfigureAt), the coalescing window for windows opened from
// now on, the audit capacity reserve, the body-read timeout for requests
// whose headers end from now on, the components table, the subordinate
// uid ranges (registrar.subuid_file, read again whether or not the key
// changed, for the connections accepted from then on) and the log level
// (unless serve --log-level fixed it: Options). Nothing
// after the token re-read can fail: every value was validated before.
//
// It returns the changed keys and, for a refused reload, an error that
// wraps ErrReloadInvalid or ErrRestartRequired and joins every reason. It
// logs one line either way (INFO with the changed keys, old → new, secrets
// redacted; ERROR with the reasons) and counts the result. Reloads are
// serialized. Safe for concurrent use with the request path: a charge
// waits at most for one limiter shard's re-expression.
func (d *Daemon) Reload(ctx context.Context) ([]config.Change, error) {
	rs := &d.reload
	rs.mu.Lock()
	defer rs.mu.Unlock()
	changes, err := d.reloadLocked(ctx)
	if err != nil {
		rs.lastOK.Store(false)
		rs.failures.Add(1)
		d.logger.LogAttrs(ctx, slog.LevelError, "configuration reload refused; the previous configuration stays in force",
			slog.String("config", rs.applied.Source), slog.String("errors", oneLineErrors(err)))
		return changes, err
	}
	rs.lastOK.Store(true)
	rs.lastSuccessUnix.Store(rs.now().UnixNano())
	rs.successes.Add(1)
	attrs := []slog.Attr{slog.String("config", rs.applied.Source), slog.Int("changed", len(changes))}
	for _, c := range changes {
		attrs = append(attrs, slog.String(c.Key, c.Old+" → "+c.New))
	}
	// registrar.log_level, the last live key: the line is written at the
	// more verbose of the old and the new level, so a change either way
	// is announced, and the new level is in force once it is. A level
	// fixed by serve --log-level was put back in applied by pin: it does
	// not move.
	lv, level := d.logLevel.v, rs.applied.Registrar.LogLevel
	lv.Set(min(lv.Level(), level))
	d.logger.LogAttrs(ctx, slog.LevelInfo, "configuration reloaded", attrs...)
	lv.Set(level)
	warnAuthorization(ctx, d.logger.With("component", "config"), rs.applied)
	return changes, nil
}

func (d *Daemon) reloadLocked(ctx context.Context) ([]config.Change, error) {
	rs := &d.reload
	path := rs.applied.Source
	if path == config.SourceDefaults {
		path = ""
	}
	environ := d.seams.environ()
	unknown := &unknownKeys{next: d.logger.With("component", "config").Handler(), mu: &sync.Mutex{}, errs: new([]error)}
	next, err := rs.load(path, environ, slog.New(unknown))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReloadInvalid, err)
	}
	if err := unknown.err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReloadInvalid, err)
	}
	if _, err := next.CheckFiles(environ); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReloadInvalid, err)
	}
	// Read again, changed or not, and put in force only with the rest.
	sub, err := loadSubuids(next)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReloadInvalid, err)
	}
	if ignored := d.logLevel.pin(&next); ignored != "" {
		d.logger.LogAttrs(ctx, slog.LevelWarn, "registrar.log_level not applied: serve --log-level fixes the level for the life of the process",
			slog.String("registrar.log_level", ignored), slog.String("log_level", config.LogLevelName(next.Registrar.LogLevel)))
	}
	changes := config.Diff(rs.applied, next)
	if keys := config.RestartOnlyChanges(changes); len(keys) > 0 {
		errs := make([]error, len(keys))
		for i, k := range keys {
			errs[i] = fmt.Errorf("%s changed: it needs a restart, so nothing of this reload was applied", k)
		}
		return changes, fmt.Errorf("%w: %w", ErrRestartRequired, errors.Join(errs...))
	}
	if next.Registrar.Backend == config.BackendOpenBao {
		if err := d.rereadToken(ctx, next.OpenBao); err != nil {
			return changes, fmt.Errorf("openbao.token_file: re-reading the token failed, the old token stays: %w", err)
		}
	}
	if err := d.apply(next); err != nil {
		// Unreachable: every value was validated by config.Load. Report
		// it rather than claim a whole reload.
		return changes, fmt.Errorf("daemon: applying a validated configuration: %w", err)
	}
	d.putSubuids(ctx, sub)
	rs.applied = next.Clone()
	return changes, nil
}

// unknownKeys forwards config.Load's log to the daemon's and collects the
// unknown keys it names. A reload refuses them (config check --strict's
// rule), where a start keeps them with a warning: a misspelt live key
// would otherwise be a reload that reports success and changes nothing,
// in the middle of the incident it was meant to end.
type unknownKeys struct {
	next slog.Handler
	mu   *sync.Mutex
	errs *[]error
}

func (u *unknownKeys) Enabled(context.Context, slog.Level) bool { return true }

func (u *unknownKeys) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "unknown configuration key") {
		var key, hint string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "key":
				key = a.Value.String()
			case "did_you_mean":
				hint = "; did you mean " + a.Value.String() + "?"
			}
			return true
		})
		u.lock()
		*u.errs = append(*u.errs, fmt.Errorf("%s is not a known key (a reload refuses unknown keys, as config check --strict does)%s", key, hint))
		u.mu.Unlock()
	}
	if u.next.Enabled(ctx, r.Level) {
		return u.next.Handle(ctx, r)
	}
	return nil
}

func (u *unknownKeys) lock() { u.mu.Lock() }

func (u *unknownKeys) WithAttrs(as []slog.Attr) slog.Handler {
	u.lock()
	defer u.mu.Unlock()
	return &unknownKeys{next: u.next.WithAttrs(as), mu: u.mu, errs: u.errs}
}

func (u *unknownKeys) WithGroup(g string) slog.Handler {
	u.lock()
	defer u.mu.Unlock()
	return &unknownKeys{next: u.next.WithGroup(g), mu: u.mu, errs: u.errs}
}

func (u *unknownKeys) err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return errors.Join(*u.errs...)
}

// rereadToken calls the backend's token re-read, if it has one.
func (d *Daemon) rereadToken(ctx context.Context, o config.OpenBao) error {
	switch b := d.backend.(type) {
	case openbaoReloader:
		return b.Reload(ctx, o)
	case tokenRereader:
		return b.RereadToken(ctx)
	}
	return nil
}

// apply puts the live keys of next in force.
func (d *Daemon) apply(next config.Config) error {
	r, old := next.Registrar, d.reload.applied.Registrar
	var auth *callers.Authority
	if !reflect.DeepEqual(r.Callers, old.Callers) {
		// Built first: a policy table that cannot be put in force leaves
		// the limiter's sizes as they were too.
		var err error
		if auth, err = authority(r); err != nil {
			return err
		}
	}
	if r.DefaultSizes() != old.DefaultSizes() || !reflect.DeepEqual(r.Callers, old.Callers) || r.Instances != old.Instances {
		lc, err := limiterConfig(r)
		if err != nil {
			return err
		}
		if err := d.limiter.Reconfigure(lc); err != nil {
			return err
		}
		if err := declarePolicies(d.otelSink, r); err != nil {
			// The limits are in force; only the new policies' series
			// wait for their first event to appear.
			d.logger.LogAttrs(context.Background(), slog.LevelWarn, "caller policies' limited series not declared at zero",
				slog.String("error", err.Error()))
		}
	}
	if err := d.coalescer.SetWindow(time.Duration(r.RateLimitCoalesceWindowSeconds) * time.Second); err != nil {
		return err
	}
	d.capacity.SetReserve(r.AuditStoreReserveBytes)
	if err := d.server.SetReadBodyTimeout(time.Duration(r.ReadBodyTimeoutMS) * time.Millisecond); err != nil {
		return err
	}
	if err := d.server.SetFairness(server.Fairness{
		MaxInFlightPerIdentity: int(r.MaxInFlightPerIdentity),
		SharedInFlight:         int(r.SharedInFlight),
		WaitTimeout:            time.Duration(r.WaitTimeoutMS) * time.Millisecond,
		RefusalPace:            time.Duration(r.RefusalPaceMS) * time.Millisecond,
	}); err != nil {
		return err
	}
	if err := d.verbs.SetComponents(r.Components); err != nil {
		return err
	}
	if auth != nil {
		d.verbs.SetAuthority(auth)
	}
	d.verbs.SetCeilings(r.MaxInstancesPerHost)
	return nil
}

// declarePolicies creates, at zero, the limited series of every policy of
// r and the shadow series of every policy with shadow sizes, so a panel or
// an alert reads 0 from the first collection rather than no data until the
// policy's first limited call. A policy removed by a reload keeps its
// series (a counter's series does not go back), frozen at its last value.
func declarePolicies(s *otelsink.Sink, r config.Registrar) error {
	var errs []error
	for _, p := range r.Callers {
		if err := s.DeclarePolicy(p.Name, p.Shadow != nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// limiterConfig is the limiter's sizes from the [registrar] table: the
// default sizes, and each [registrar.callers.<name>] policy with its
// matcher, each this daemon's share of it when registrar.instances
// registrars share the budget (config.CallerSizes.Share). The error is
// the matcher's, which a validated configuration never gets.
func limiterConfig(r config.Registrar) (limiter.Config, error) {
	sizes := func(s config.CallerSizes) limiter.Sizes { return limiterSizes(s.Share(r.Instances)) }
	def := sizes(r.DefaultSizes())
	lc := limiter.Config{
		PredecisionRefusal: def.PredecisionRefusal,
		Admission:          def.Admission,
		// The unix socket's callers get the local pool, apart from the
		// certificate identities (issue 27); fixed at New, so a reload
		// keeps it (Reconfigure does not look at Local).
		Local: server.IsUnixIdentity,
	}
	if len(r.Callers) == 0 {
		return lc, nil
	}
	m, err := r.CallersMatcher()
	if err != nil {
		return limiter.Config{}, err
	}
	lc.Match = m.Match
	lc.Policies = make([]limiter.Policy, len(r.Callers))
	for i, p := range r.Callers {
		lc.Policies[i] = limiter.Policy{Name: p.Name, Sizes: sizes(p.Sizes)}
		if p.Shadow != nil {
			sh := sizes(*p.Shadow)
			lc.Policies[i].Shadow = &sh
		}
	}
	return lc, nil
}

// limiterSizes is one daemon's share of a policy's four sizes as the
// limiter takes them. A share's interval is at most MaxUint32 ms ×
// config.MaxInstances, well inside a time.Duration.
func limiterSizes(s config.Share) limiter.Sizes {
	return limiter.Sizes{
		PredecisionRefusal: limiter.BucketConfig{
			Burst:          s.PredecisionRefusalBurst,
			RefillInterval: time.Duration(s.PredecisionRefusalRefillIntervalMS) * time.Millisecond,
		},
		Admission: limiter.BucketConfig{
			Burst:          s.AdmissionBurst,
			RefillInterval: time.Duration(s.AdmissionRefillIntervalMS) * time.Millisecond,
		},
	}
}

// reloadForWire is the wire server's Reload: the same path as SIGHUP.
func (d *Daemon) reloadForWire(ctx context.Context) wire.ReloadResult {
	changes, err := d.Reload(ctx)
	res := wire.ReloadResult{Applied: err == nil}
	for _, c := range changes {
		res.Changes = append(res.Changes, wire.ReloadChange{Key: c.Key, Old: c.Old, New: c.New, RestartOnly: !c.Live})
	}
	if err != nil {
		res.Errors = splitErrors(err)
	}
	return res
}

// splitErrors flattens joined errors into their messages, without the
// sentinel prefixes, as config check lists them.
func splitErrors(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				if x != ErrReloadInvalid && x != ErrRestartRequired {
					walk(x)
				}
			}
			return
		}
		out = append(out, e.Error())
	}
	walk(err)
	return out
}

func oneLineErrors(err error) string { return strings.Join(splitErrors(err), "; ") }
