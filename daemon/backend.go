package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// closingBackend is a registrar.Backend the daemon closes on shutdown.
type closingBackend interface {
	registrar.Backend
	Close() error
}

// openBackend opens the backend registrar.backend selects: the embedded
// bbolt registry in registrar.state_dir (the default), or the OpenBao
// server of the [openbao] table, with the token read from
// openbao.token_file or BAO_TOKEN / VAULT_TOKEN (never logged).
func openBackend(cfg config.Config, environ []string, logger *slog.Logger, tp trace.TracerProvider, mp metric.MeterProvider) (closingBackend, error) {
	r := cfg.Registrar
	switch r.Backend {
	case config.BackendOpenBao:
		o := cfg.OpenBao
		token, src, err := o.ReadToken(environ)
		if err != nil {
			// A missing or unreadable token file, a bad token: the
			// operator must fix it; a restart reads the same.
			return nil, setup(fmt.Errorf("daemon: openbao backend: %w", err), true)
		}
		var opts openbao.Options
		if o.CAFile != "" {
			if opts.RootCAs, err = config.LoadCAFile(o.CAFile); err != nil {
				return nil, setup(fmt.Errorf("daemon: openbao backend: %w", err), true)
			}
		}
		opts.Addresses, opts.Token = o.Addresses(), token
		opts.ReadinessGrace = time.Duration(o.ReadinessGraceMS) * time.Millisecond
		opts.KVMount, opts.KVPrefix, opts.AppRoleMount = o.KVMount, o.KVPrefix, o.AppRoleMount
		opts.RequestTimeout = time.Duration(o.RequestTimeoutMS) * time.Millisecond
		opts.MaxInFlight = o.MaxInFlight
		// The token is re-read through the same function, on SIGHUP
		// (RereadToken) and when the token file changes (the tick).
		opts.ReadToken = func() (string, error) {
			tok, _, err := o.ReadToken(environ)
			return tok, err
		}
		opts.TokenFile = o.TokenFile
		opts.SecretIDTTL = time.Duration(o.SecretIDTTLSeconds) * time.Second
		opts.SecretIDNumUses = o.SecretIDNumUses
		opts.Logger = logger
		opts.TracerProvider = tp
		if opts.Observer, err = telemetry.NewOpenBaoObserver(mp); err != nil {
			return nil, fmt.Errorf("daemon: openbao backend: %w", err)
		}
		b, err := openbao.New(opts)
		if err != nil {
			return nil, setup(fmt.Errorf("daemon: openbao backend (openbao.address %s): %w", o.Address, err), false)
		}
		if err := telemetry.RegisterOpenBaoToken(mp, b.TokenStats); err != nil {
			return nil, fmt.Errorf("daemon: openbao backend: %w", err)
		}
		// Learn the token's expiry at start, in the background: a server
		// that is down or hanging neither fails nor delays the daemon's
		// start (the first mint says what is wrong), so only log it. Close
		// waits for it.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), opts.RequestTimeout)
			defer cancel()
			if err := b.CheckToken(ctx, time.Now(), true); err != nil && !errors.Is(err, openbao.ErrClosed) {
				logger.Warn("openbao token lookup failed at start", "error", err.Error())
			}
		}()
		logger.Info("openbao backend ready", "token_from", src.String(), "kv_mount", o.KVMount, "kv_prefix", o.KVPrefix, "approle_mount", o.AppRoleMount)
		return b, nil
	default:
		b, err := embedded.Open(r.StateDir, embedded.Options{Logger: logger})
		if err != nil {
			return nil, setup(fmt.Errorf("daemon: embedded backend (registrar.state_dir %s): %w", r.StateDir, err), false)
		}
		return b, nil
	}
}

// backupOf is the wire server's Backup: the embedded backend's snapshot
// (registrar-otel backup), or nil for a backend with no local registry.
func backupOf(b closingBackend) func(ctx context.Context, w io.Writer) (int64, error) {
	bb, ok := b.(interface {
		Backup(io.Writer) (int64, error)
	})
	if !ok {
		return nil
	}
	return func(_ context.Context, w io.Writer) (int64, error) { return bb.Backup(w) }
}
