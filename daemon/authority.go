package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// operators are the identities that are unrestricted unless a policy names
// them exactly: root and the daemon's own uid on the unix socket (the uids
// the admin endpoints admit too, server.DefaultAdminAllowed).
func operators() []string {
	uids := operatorUIDs()
	ids := make([]string, len(uids))
	for i, uid := range uids {
		ids[i] = server.UnixIdentity(uid)
	}
	return ids
}

// operatorUIDs are the operators' uids: root, and the daemon's own when
// it is not root. No subordinate uid range maps to them or from them
// (subuid.go).
func operatorUIDs() []uint32 {
	uids := []uint32{0}
	if uid := os.Geteuid(); uid != 0 {
		uids = append(uids, uint32(uid))
	}
	return uids
}

// authority is what each caller may do under r: its caller policies, their
// scope, owner scope and ceiling, with the operators unrestricted. Every
// other identity that matches no policy is refused no_policy. The error is
// callers.NewAuthority's, which a validated configuration never gets.
func authority(r config.Registrar) (*callers.Authority, error) {
	return callers.NewAuthority(r.CallerPolicies(), r.CallerRules(), operators())
}

// hasCeilings reports whether r sets an instance ceiling.
func hasCeilings(r config.Registrar) bool {
	if len(r.MaxInstancesPerHost) > 0 {
		return true
	}
	for _, p := range r.Callers {
		if p.MaxRegistrations != 0 {
			return true
		}
	}
	return false
}

// countRegistrations counts the registry's registrations for the ceilings
// and the gauges, before the first verb is served: the counts live in
// memory only, so this is also their recovery after a crash. With a
// ceiling configured a backend that cannot be listed refuses the start
// (a ceiling counted from nothing would admit past it); without one the
// start goes on, a warning says so, and the tick retries.
func (d *Daemon) countRegistrations(ctx context.Context, r config.Registrar) error {
	err := d.verbs.Rebuild(ctx)
	switch {
	case err == nil:
		d.stockStale.Store(false)
		return nil
	case hasCeilings(r):
		return fmt.Errorf("daemon: counting the registrations for the instance ceilings: %w", err)
	}
	d.stockStale.Store(true)
	d.logger.LogAttrs(ctx, slog.LevelWarn, "registrations not counted yet; registrar_registrations reads 0 until the tick counts them",
		slog.Any("error", err))
	return nil
}

// recountTick retries the count the start could not make.
func (d *Daemon) recountTick(ctx context.Context, _ time.Time) error {
	if !d.stockStale.Load() {
		return nil
	}
	if err := d.verbs.Rebuild(ctx); err != nil {
		return fmt.Errorf("daemon: counting registrations: %w", err)
	}
	d.stockStale.Store(false)
	return nil
}

// stockStats is the gauges' view of the verbs' counts.
func (d *Daemon) stockStats() telemetry.StockStats {
	st := d.verbs.Stock()
	out := telemetry.StockStats{Components: make([]telemetry.ComponentStock, len(st.Components)), Refusals: d.verbs.AuthorizationRefusals()}
	for i, c := range st.Components {
		out.Components[i] = telemetry.ComponentStock{Component: c.Component, Live: c.Live, BusiestHost: uint64(c.BusiestHost), Ceiling: c.Ceiling}
	}
	return out
}

// warnAuthorization logs each listener of cfg that admits callers no
// policy covers (config.AuthorizationWarnings): at start and after each
// reload, so the operator sees why those callers get no_policy.
func warnAuthorization(ctx context.Context, logger *slog.Logger, cfg config.Config) {
	for _, w := range cfg.AuthorizationWarnings() {
		logger.LogAttrs(ctx, slog.LevelWarn, w.Message, slog.String("key", w.Key))
	}
}
