package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// mintAsIdentity calls the daemon's verbs as identity, as the server would
// for a connection of that identity.
func mintAsIdentity(t *testing.T, r *running, identity, service string, instance uint32) error {
	t.Helper()
	_, err := r.d.verbs.Mint(context.Background(), registrar.MintRequest{
		CallerIdentity: identity, ServiceName: service, Host: "h1", Instance: instance, Component: "review",
		Spec: registrar.Spec{Component: "review", ServiceName: service}, WrapTTLSeconds: 60,
	})
	return err
}

func refusedFor(err error) (vocab.Reason, vocab.Scope) {
	var ref *registrar.RefusedError
	if errors.As(err, &ref) {
		return ref.Reason, ref.Scope
	}
	return 0, 0
}

// The daemon refuses a caller that matches no policy, leaves the operators
// unrestricted, and puts a reloaded policy table's scopes in force.
func TestTheDaemonAuthorizesByCallerPolicyAndReloadsIt(t *testing.T) {
	const member = "unix-peer:uid=4242"
	rr := startFromFile(t)
	if reason, _ := refusedFor(mintAsIdentity(t, rr.running, member, "review", 1)); reason != vocab.ReasonNoPolicy {
		t.Fatalf("a member with no policy: %v, want no_policy", reason)
	}
	if err := mintAsIdentity(t, rr.running, "unix-peer:uid=0", "payments", 2); err != nil {
		t.Fatalf("root with no policy: %v, want the mint", err)
	}

	rr.write(t, reloadFile(rr.dir, startLimits, twoComponents+`[registrar.callers.members]
identity_prefixes = ["unix-peer:"]
scope_services = ["review"]
`), 0o600)
	if _, err := rr.d.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if err := mintAsIdentity(t, rr.running, member, "review", 3); err != nil {
		t.Fatalf("a member in scope after the reload: %v", err)
	}
	if reason, scope := refusedFor(mintAsIdentity(t, rr.running, member, "payments", 4)); reason != vocab.ReasonOutOfScope || scope != vocab.ScopeService {
		t.Fatalf("a member out of scope: %v %v, want out_of_scope service", reason, scope)
	}
	// The prefix unix-peer: does not restrict root: only a policy naming
	// it exactly would.
	if err := mintAsIdentity(t, rr.running, "unix-peer:uid=0", "payments", 5); err != nil {
		t.Fatalf("root under a unix-peer: prefix: %v, want the mint", err)
	}
}

// A listener no policy covers is logged at warn level, naming its key.
func TestWarnAuthorizationLogsEachListenerNoPolicyCovers(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	cfg := config.Config{Registrar: config.Registrar{TLSListen: "127.0.0.1:8443"}}
	warnAuthorization(context.Background(), logger, cfg)
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "key=registrar.tls_listen") || !strings.Contains(out, "no_policy") {
		t.Fatalf("log %q, want a WARN line naming registrar.tls_listen", out)
	}
	buf.Reset()
	cfg.Registrar.Callers = []config.CallerPolicy{{Name: "clients", IdentityPrefixes: []string{"registrar-client:"}}}
	warnAuthorization(context.Background(), logger, cfg)
	if buf.Len() != 0 {
		t.Fatalf("a policy covers the certificate holders, yet %q", buf.String())
	}
}

// Until the instance ceiling is enforced, a configuration that sets one is
// refused, naming each key, rather than accepted and not kept.
func TestACeilingThisBuildCannotEnforceIsRefused(t *testing.T) {
	r := config.Registrar{
		Callers:             []config.CallerPolicy{{Name: "agents", IdentityPrefixes: []string{"registrar-client:"}, MaxRegistrations: 40}},
		MaxInstancesPerHost: map[string]uint32{"review": 8},
	}
	_, err := authority(r)
	if !errors.Is(err, errCeilingUnenforced) || !strings.Contains(err.Error(), "registrar.callers.agents.max_registrations") ||
		!strings.Contains(err.Error(), "registrar.components.review.max_instances_per_host") {
		t.Fatalf("authority = %v, want both ceilings refused by name", err)
	}
	r.Callers[0].MaxRegistrations, r.MaxInstancesPerHost = 0, nil
	if _, err := authority(r); err != nil {
		t.Fatalf("no ceiling: %v", err)
	}
}
