package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/config"
)

var openbaoCheckUsage = usageSpec{
	name:     "openbao check",
	synopsis: "[--config FILE]",
	what: `Asks the OpenBao server what the registrar's token holds, with the
configuration's [openbao] table and token (the same sources serve reads),
and compares it with the documented token policy (docs: OpenBao backend,
the token's policy). sys/capabilities-self is asked about every path the
backend uses (the bindings, the roles, role ids, wrapped secret ids, the
secret id destroy, the token's lookup-self and renew-self) and about paths
the token must not have (any policy, a custom secret id, a service's
secrets, token creation, the AppRole mount, identities). Then role and
secret id writes with parameters the policy must refuse (another policy,
bind_secret_id=false, other secret id uses or TTL, a chosen role id, an
unwrapped secret id) are sent to a role name the AppRole backend itself
refuses, so nothing is made whatever the token holds: the policy must
answer 403 to each. Prints one line per check, never the token.

Exits 0 when the token holds exactly the documented policy, 2 when it holds
more (EXTRA) or less (MISSING), naming each path (a token the server refuses
sys/capabilities-self, such as an invalid one, is MISSING that path), or
when the configuration or the token file is unusable, and 3 when the server gave no answer (down,
sealed, or slower than openbao.request_timeout_ms).`,
	examples: []string{
		"registrar-otel openbao check --config /etc/registrar-otel/registrar.toml",
	},
}

// runOpenBaoCheck implements `registrar-otel openbao check`: see
// openbaoCheckUsage.
func runOpenBaoCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("openbao check")
	path := fs.String("config", "", "the daemon's configuration `file` (default: the embedded defaults, which select no OpenBao server)")
	if code, ok := parseFlags(fs, openbaoCheckUsage, args, stdout, stderr); !ok {
		return code
	}
	environ := os.Environ()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg, err := loadConfig(*path, environ, logger)
	if err != nil {
		printErrors(stderr, err)
		return exitUsage
	}
	if cfg.Registrar.Backend != config.BackendOpenBao {
		fmt.Fprintf(stderr, "openbao check: registrar.backend is %q, not \"openbao\": there is no OpenBao token to check (give --config the daemon's file)\n", cfg.Registrar.Backend)
		return exitUsage
	}
	o := cfg.OpenBao
	token, src, err := o.ReadToken(environ)
	if err != nil {
		fmt.Fprintf(stderr, "openbao check: %v\n", err)
		return exitUsage
	}
	opts := openbao.Options{
		Addresses: o.Addresses(), Token: token,
		KVMount: o.KVMount, KVPrefix: o.KVPrefix, AppRoleMount: o.AppRoleMount,
		RequestTimeout:  time.Duration(o.RequestTimeoutMS) * time.Millisecond,
		SecretIDTTL:     time.Duration(o.SecretIDTTLSeconds) * time.Second,
		SecretIDNumUses: o.SecretIDNumUses,
	}
	if o.CAFile != "" {
		if opts.RootCAs, err = config.LoadCAFile(o.CAFile); err != nil {
			fmt.Fprintf(stderr, "openbao check: %v\n", err)
			return exitUsage
		}
	}
	b, err := openbao.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "openbao check: %v\n", err)
		return exitUsage
	}
	defer b.Close()
	fmt.Fprintf(stdout, "openbao check: %s, token from %s\n", o.Address, src)
	checks, err := b.CheckPolicy(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "openbao check: %v\n", err)
		if _, ok := errors.AsType[*openbao.CheckUnreachableError](err); ok {
			return exitTransport
		}
		return exitUsage
	}
	failed := 0
	for _, c := range checks {
		fmt.Fprintln(stdout, openbao.FormatCheck(c))
		if !c.OK() {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "openbao check: %d of %d checks failed: the token does not hold exactly the documented policy (docs: OpenBao backend, the token's policy); the policy for this configuration:\n\n%s\n", failed, len(checks), b.TokenPolicy())
		return exitUsage
	}
	fmt.Fprintf(stdout, "openbao check: OK, %d checks: the token holds exactly the documented policy\n", len(checks))
	return exitOK
}
