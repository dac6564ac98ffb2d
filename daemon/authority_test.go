package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"

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
	for _, c := range []struct {
		reason string
		want   float64
	}{{"no_policy", 1}, {"out_of_scope", 1}, {"not_owner", 0}, {"instance_ceiling", 0}} {
		if got := rr.metric(t, `registrar_authorization_refusals_total{reason="`+c.reason+`",verb="mint"}`); got != c.want {
			t.Errorf("refusals %s = %v, want %v", c.reason, got, c.want)
		}
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

// mintInstance mints review on h1 as root over the socket.
func mintInstance(t *testing.T, r *running, instance uint32) *wire.Response {
	t.Helper()
	req := mint("review")
	req.Instance = instance
	resp, err := r.client.Mint(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The per-host ceiling holds through the daemon: the mint past it is
// refused by name, a remint is not, a deregister frees the slot at once, and
// a restart counts the registry again before serving.
func TestTheInstanceCeilingHoldsAcrossARestart(t *testing.T) {
	rr := startFromFile(t)
	rr.write(t, reloadFile(rr.dir, "", `[registrar.components.review]
multiplicity = "many-per-host"
max_instances_per_host = 2
`), 0o600)
	if _, err := rr.d.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	for i := range uint32(2) {
		if resp := mintInstance(t, rr.running, i+1); !resp.OK() {
			t.Fatalf("mint %d below the ceiling: %+v", i+1, resp)
		}
	}
	resp := mintInstance(t, rr.running, 3)
	if resp.ErrorID != wire.InstanceCeilingReached || resp.Ceiling != "max_instances_per_host" || resp.Limit != 2 || resp.StatusCode != 409 {
		t.Fatalf("the third instance: %+v, want 409 InstanceCeilingReached max_instances_per_host 2", resp)
	}
	if resp := mintInstance(t, rr.running, 1); !resp.OK() || resp.Outcome != "idempotent_remint" {
		t.Fatalf("a remint at the ceiling: %+v, want idempotent_remint", resp)
	}
	if got := rr.metric(t, `registrar_registrations{component="review"}`); got != 2 {
		t.Fatalf("registrar_registrations{review} = %v, want 2", got)
	}
	if got := rr.metric(t, `registrar_registrations_busiest_host{component="review"}`); got != 2 {
		t.Fatalf("busiest host = %v, want 2", got)
	}
	if got := rr.metric(t, `registrar_registrations_ceiling{component="review"}`); got != 2 {
		t.Fatalf("ceiling gauge = %v, want 2", got)
	}
	dereg := wire.DeregisterRequest{ProtocolVersion: 1, ServiceName: "review", Host: "h1", Instance: 2, Component: "review"}
	if resp, err := rr.client.Deregister(context.Background(), dereg); err != nil || !resp.OK() {
		t.Fatalf("deregister: %+v, %v", resp, err)
	}
	if resp := mintInstance(t, rr.running, 3); !resp.OK() {
		t.Fatalf("a mint after the deregister freed a slot: %+v", resp)
	}

	// A restart on the same state directory counts the registry again.
	rr.stop(t)
	cfg, err := config.Load(rr.path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := startLogged(t, cfg, seams{})
	if resp := mintInstance(t, again, 4); resp.ErrorID != wire.InstanceCeilingReached {
		t.Fatalf("after the restart, a third live instance: %+v, want InstanceCeilingReached", resp)
	}
	if got := again.metric(t, `registrar_registrations{component="review"}`); got != 2 {
		t.Fatalf("after the restart registrar_registrations{review} = %v, want 2 (counted from the registry)", got)
	}
}
