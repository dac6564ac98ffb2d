package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/server"
)

// operators are the identities that are unrestricted unless a policy names
// them exactly: root and the daemon's own uid on the unix socket (the uids
// the admin endpoints admit too, server.DefaultAdminAllowed).
func operators() []string {
	ids := []string{server.UnixIdentity(0)}
	if uid := os.Geteuid(); uid != 0 {
		ids = append(ids, server.UnixIdentity(uint32(uid)))
	}
	return ids
}

// authority is what each caller may do under r: its caller policies, their
// scope, owner scope and ceiling, with the operators unrestricted. Every
// other identity that matches no policy is refused no_policy. The error is
// callers.NewAuthority's, which a validated configuration never gets.
func authority(r config.Registrar) (*callers.Authority, error) {
	if err := ceilingsUnenforced(r); err != nil {
		return nil, err
	}
	return callers.NewAuthority(r.CallerPolicies(), r.CallerRules(), operators())
}

// errCeilingUnenforced refuses a configuration that sets an instance
// ceiling while this build cannot enforce it: a ceiling that is accepted
// and not kept would be worse than none. (Issue 36's ceiling lands next.)
var errCeilingUnenforced = errors.New("the instance ceiling is not enforced by this build yet: remove the key, or upgrade to a release that enforces it")

// ceilingsUnenforced names each ceiling r sets.
func ceilingsUnenforced(r config.Registrar) error {
	var errs []error
	for _, p := range r.Callers {
		if p.MaxRegistrations != 0 {
			errs = append(errs, fmt.Errorf("registrar.callers.%s.max_registrations: %w", p.Name, errCeilingUnenforced))
		}
	}
	for _, c := range slices.Sorted(maps.Keys(r.MaxInstancesPerHost)) {
		errs = append(errs, fmt.Errorf("registrar.components.%s.max_instances_per_host: %w", c, errCeilingUnenforced))
	}
	return errors.Join(errs...)
}

// warnAuthorization logs each listener of cfg that admits callers no
// policy covers (config.AuthorizationWarnings): at start and after each
// reload, so the operator sees why those callers get no_policy.
func warnAuthorization(ctx context.Context, logger *slog.Logger, cfg config.Config) {
	for _, w := range cfg.AuthorizationWarnings() {
		logger.LogAttrs(ctx, slog.LevelWarn, w.Message, slog.String("key", w.Key))
	}
}
