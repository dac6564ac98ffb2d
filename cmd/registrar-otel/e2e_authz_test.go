package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// scopedAgents is a policy binding every agent certificate
// (spiffe://registrar.test/agent/<host>) to its own host and to the review
// component, with budgets no matrix drains. The matrix's 64 callers open
// their connections at once: a handshake slot for each, since the default
// 32 evicts handshakes when the machine is slow (seen with the other core
// busy), and the matrix is about scope, not the handshake budget.
const scopedAgents = `rate_limit_admission_burst = 1000000
rate_limit_predecision_refusal_burst = 1000000
tls_handshake_max_conns = 64

[registrar.callers.agents]
identity_prefixes = ["registrar-client:uri:spiffe://registrar.test/agent/"]
scope_hosts = ["{identity}"]
scope_components = ["review"]
`

// TestEndToEndAMatrixOfScopedCertificates is issue 36's mTLS acceptance
// on the embedded backend (scopedCertificateMatrix): the registry itself,
// read through an online backup, holds exactly the in-scope registrations.
func TestEndToEndAMatrixOfScopedCertificates(t *testing.T) {
	scopedCertificateMatrix(t, matrixBackend{held: embeddedHeld})
}

// matrixBackend is a backend the scoped-certificate matrix runs on.
type matrixBackend struct {
	// registrar and tables are the configuration the backend adds: lines
	// of [registrar], and tables after [telemetry].
	registrar, tables string
	// held reads what the backend itself holds, by registration id.
	held func(t *testing.T, d *daemonProc) map[string]heldRegistration
}

// scopedCertificateMatrix is issue 36's mTLS acceptance on backend: 64
// certificates, each scoped to its own host, call every (caller, host,
// component, verb) of a 64 × 64 × 2 × 2 matrix over real TLS. Every
// out-of-scope call is refused CallerNotPermitted out_of_scope naming its
// scope, none reaches the backend (what the backend holds after the mints
// is exactly the in-scope registrations, each owned by its caller, and the
// out-of-scope deregisters change nothing of it, not even a secret), and
// every in-scope call succeeds (the backend holds nothing at the end).
func scopedCertificateMatrix(t *testing.T, backend matrixBackend) {
	const n = 64
	p := newE2EPKI(t)
	d, addr := startTLSDaemonWith(t, p, backend.registrar+scopedAgents, backend.tables)
	host := func(i int) string { return fmt.Sprintf("h%d", i) }
	clients := make([]*wire.Client, n)
	for i := range clients {
		cert := p.Client(t, "spiffe://registrar.test/agent/"+host(i))
		clients[i] = wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithTimeout(e2eIODeadline))
		defer clients[i].CloseIdleConnections()
	}
	components := []string{"review", "edge-proxy"}
	mintReq := func(h, component string) wire.MintRequest {
		req := wire.MintRequest{ServiceName: component, Host: h, Component: component,
			Spec: wire.Spec{Component: component, ServiceName: component}, WrapTTL: 60}
		if component == "review" {
			req.Instance = 1
		}
		return req
	}
	deregReq := func(h, component string) wire.DeregisterRequest {
		m := mintReq(h, component)
		return wire.DeregisterRequest{ServiceName: m.ServiceName, Host: h, Instance: m.Instance, Component: component}
	}
	// wantScope is the scope an out-of-scope call names ("" in scope): the
	// component is judged before the host.
	wantScope := func(i, j int, component string) string {
		switch {
		case component != "review":
			return "component"
		case i != j:
			return "host"
		}
		return ""
	}
	// run calls every (caller, host, component) with call, from one
	// goroutine per caller, and checks each answer; only selects which
	// calls are made.
	run := func(verb string, only func(i, j int, component string) bool, call func(c *wire.Client, h, component string) (*wire.Response, error)) (ok, refused int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var bad []string
		for i := range n {
			wg.Go(func() {
				for j := range n {
					for _, component := range components {
						if !only(i, j, component) {
							continue
						}
						resp, err := call(clients[i], host(j), component)
						mu.Lock()
						scope := wantScope(i, j, component)
						switch {
						case err != nil:
							bad = append(bad, fmt.Sprintf("%s %s→%s/%s: %v", verb, host(i), host(j), component, err))
						case scope == "" && resp.OK():
							ok++
						case scope != "" && resp.StatusCode == 403 && resp.ErrorID == wire.CallerNotPermitted && resp.Reason == "out_of_scope" && resp.Scope == scope:
							refused++
						default:
							bad = append(bad, fmt.Sprintf("%s %s→%s/%s: %d %s %s %s, want scope %q", verb, host(i), host(j), component, resp.StatusCode, resp.ErrorID, resp.Reason, resp.Scope, scope))
						}
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Fatalf("%d unexpected answers, the first: %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
		}
		return ok, refused
	}
	all := func(int, int, string) bool { return true }
	mint := func(c *wire.Client, h, component string) (*wire.Response, error) {
		return c.Mint(context.Background(), mintReq(h, component))
	}
	dereg := func(c *wire.Client, h, component string) (*wire.Response, error) {
		return c.Deregister(context.Background(), deregReq(h, component))
	}
	// inScopeHeld checks that the backend holds exactly the in-scope
	// registrations, each owned by its own caller with a role and a
	// secret, and returns what it holds.
	inScopeHeld := func(when string) map[string]heldRegistration {
		t.Helper()
		held := backend.held(t, d)
		var bad []string
		want := make(map[string]bool, n)
		for i := range n {
			id := fmt.Sprintf("%s-review-001", host(i))
			want[id] = true
			owner := "registrar-client:uri:spiffe://registrar.test/agent/" + host(i)
			if h, ok := held[id]; !ok || h.owner != owner || h.role == "" || h.secret == "" {
				bad = append(bad, fmt.Sprintf("%s: %+v (held %v), want owner %s with a role and a secret", id, h, ok, owner))
			}
		}
		for id, h := range held {
			if !want[id] {
				bad = append(bad, fmt.Sprintf("%s held (%+v): no in-scope call names it", id, h))
			}
		}
		if len(held) != n || len(bad) > 0 {
			t.Fatalf("%s: the backend holds %d registrations, want the %d in-scope ones; %d wrong, the first: %s",
				when, len(held), n, len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
		}
		return held
	}

	if ok, refused := run("mint", all, mint); ok != n || refused != n*n*2-n {
		t.Fatalf("mints: %d admitted and %d refused, want %d and %d", ok, refused, n, n*n*2-n)
	}
	live := func() (review, edge float64) {
		exp := d.scrape()
		return sampleIn(t, exp, `registrar_registrations{component="review"}`), sampleIn(t, exp, `registrar_registrations{component="edge-proxy"}`)
	}
	if review, edge := live(); review != n || edge != 0 {
		t.Fatalf("live registrations after the mints: review %v, edge-proxy %v; want %d and 0: an out-of-scope mint reached the registry", review, edge, n)
	}
	afterMints := inScopeHeld("after the mints")
	// Out-of-scope deregisters first: every review registration exists,
	// and none of them may go, nor change.
	outOfScope := func(i, j int, component string) bool { return wantScope(i, j, component) != "" }
	if ok, refused := run("deregister", outOfScope, dereg); ok != 0 || refused != n*n*2-n {
		t.Fatalf("out-of-scope deregisters: %d removed and %d refused, want 0 and %d", ok, refused, n*n*2-n)
	}
	if review, _ := live(); review != n {
		t.Fatalf("live review registrations after the out-of-scope deregisters: %v, want %d", review, n)
	}
	if after := inScopeHeld("after the out-of-scope deregisters"); !maps.Equal(after, afterMints) {
		for id, h := range after {
			if afterMints[id] != h {
				t.Fatalf("%s changed during the out-of-scope deregisters: %+v, then %+v", id, afterMints[id], h)
			}
		}
		t.Fatal("what the backend holds changed during the out-of-scope deregisters")
	}
	inScope := func(i, j int, component string) bool { return wantScope(i, j, component) == "" }
	if ok, _ := run("deregister", inScope, dereg); ok != n {
		t.Fatalf("in-scope deregisters: %d removed, want %d", ok, n)
	}
	if review, edge := live(); review != 0 || edge != 0 {
		t.Fatalf("live registrations at the end: review %v, edge-proxy %v; want 0", review, edge)
	}
	if held := backend.held(t, d); len(held) != 0 {
		t.Fatalf("the backend still holds %d registrations after the in-scope deregisters: %v", len(held), held)
	}
	if got := sampleIn(t, d.scrape(), `registrar_authorization_refusals_total{reason="out_of_scope",verb="mint"}`); got != n*n*2-n {
		t.Fatalf("out_of_scope mint refusals counted: %v, want %d", got, n*n*2-n)
	}
}

// TestEndToEndAnotherCallersRegistrationIsNotOwned is the review's
// ownership attack on the real binary: under the catch-all policy
// (identity_prefixes = [""]), caller B's remint and deregister of caller A's
// registration are refused not_owner and change nothing (the registration
// stays, A's secret still verifies in the registry, A remints it with its
// role); once a reload gives the policy scope_owner = "policy", the same
// calls succeed.
func TestEndToEndAnotherCallersRegistrationIsNotOwned(t *testing.T) {
	p := newE2EPKI(t)
	d, addr := startTLSDaemon(t, p, "\n[registrar.callers.everyone]\nidentity_prefixes = [\"\"]\n")
	client := func(name string) *wire.Client {
		cert := p.Client(t, "spiffe://registrar.test/member/"+name)
		c := wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithTimeout(e2eIODeadline))
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	a, b := client("a"), client("b")
	ctx := context.Background()
	req := reviewMint("h1", 7)
	first, err := a.Mint(ctx, req)
	if err != nil || first.Outcome != "first_mint" {
		t.Fatalf("A's mint: %+v, %v", first, err)
	}
	dereg := wire.DeregisterRequest{ServiceName: "review", Host: "h1", Instance: 7, Component: "review"}
	for name, call := range map[string]func() (*wire.Response, error){
		"remint":     func() (*wire.Response, error) { return b.Mint(ctx, req) },
		"deregister": func() (*wire.Response, error) { return b.Deregister(ctx, dereg) },
	} {
		resp, err := call()
		if err != nil || resp.StatusCode != 403 || resp.ErrorID != wire.CallerNotPermitted || resp.Reason != "not_owner" || resp.RegistrationID != first.RegistrationID {
			t.Fatalf("B's %s of A's registration: %+v, %v; want 403 CallerNotPermitted not_owner naming %s", name, resp, err, first.RegistrationID)
		}
	}
	if got := sampleIn(t, d.scrape(), `registrar_registrations{component="review"}`); got != 1 {
		t.Fatalf("live review registrations after B's refused calls: %v, want 1", got)
	}
	// A's secret still logs in: the registry's own check of it (an online
	// backup's VerifySecret). A's remint below would pass even if B's
	// refused remint had replaced A's secret.
	reg, _ := registrySnapshot(t, d)
	if ok, err := reg.VerifySecret(first.RegistrationID, first.Material.WrappedSecretID, time.Now()); err != nil || !ok {
		t.Fatalf("A's secret after B's refused calls: verifies %v (%v), want true", ok, err)
	}
	again, err := a.Mint(ctx, req)
	if err != nil || again.Outcome != "idempotent_remint" || again.Material == nil || again.Material.RoleID != first.Material.RoleID {
		t.Fatalf("A's remint after B's refused calls: %+v, %v; want idempotent_remint with role %s", again, err, first.Material.RoleID)
	}

	d.rewrite(`identity_prefixes = [""]`, "identity_prefixes = [\"\"]\nscope_owner = \"policy\"", 0o600)
	if code, out, errOut := d.run("reload", "--config", d.config); code != 0 {
		t.Fatalf("reload: exit %d\n%s\n%s", code, out, errOut)
	}
	if resp, err := b.Mint(ctx, req); err != nil || resp.Outcome != "idempotent_remint" {
		t.Fatalf("B's remint under scope_owner = \"policy\": %+v, %v", resp, err)
	}
	if resp, err := b.Deregister(ctx, dereg); err != nil || resp.Outcome != "removed" {
		t.Fatalf("B's deregister under scope_owner = \"policy\": %+v, %v", resp, err)
	}
}

// TestEndToEndThirtyTwoMintsRaceForTheLastSlot: a policy's
// max_registrations of 8 with 7 live, and 32 callers of the policy minting
// 32 new registrations at once through the binary: exactly one first_mint
// and 31 InstanceCeilingReached naming the ceiling.
func TestEndToEndThirtyTwoMintsRaceForTheLastSlot(t *testing.T) {
	p := newE2EPKI(t)
	d, addr := startTLSDaemon(t, p, "rate_limit_admission_burst = 1000\n\n[registrar.callers.agents]\nidentity_prefixes = [\"registrar-client:\"]\nscope_owner = \"policy\"\nmax_registrations = 8\n")
	cert := p.Client(t, "spiffe://registrar.test/agent/first")
	first := wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithTimeout(e2eIODeadline))
	defer first.CloseIdleConnections()
	ctx := context.Background()
	for i := range uint32(7) {
		if resp, err := first.Mint(ctx, reviewMint("h1", i+1)); err != nil || !resp.OK() {
			t.Fatalf("mint %d below the ceiling: %+v, %v", i+1, resp, err)
		}
	}
	const racers = 32
	answers := make([]*wire.Response, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		cert := p.Client(t, fmt.Sprintf("spiffe://registrar.test/agent/r%d", i))
		c := wire.NewTLSClient(addr, p.clientConfig(&cert), wire.WithTimeout(e2eIODeadline))
		defer c.CloseIdleConnections()
		wg.Go(func() {
			<-start
			resp, err := c.Mint(ctx, reviewMint("h2", uint32(i+1)))
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
				return
			}
			answers[i] = resp
		})
	}
	close(start)
	wg.Wait()
	won, ceiling := 0, 0
	for i, r := range answers {
		switch {
		case r == nil:
		case r.Outcome == "first_mint":
			won++
		case r.StatusCode == 409 && r.ErrorID == wire.InstanceCeilingReached && r.Ceiling == "max_registrations" && r.Limit == 8:
			ceiling++
		default:
			t.Errorf("racer %d: %d %s %s", i, r.StatusCode, r.ErrorID, r.Outcome)
		}
	}
	if won != 1 || ceiling != racers-1 {
		t.Fatalf("%d first_mint and %d InstanceCeilingReached, want 1 and %d", won, ceiling, racers-1)
	}
	if got := sampleIn(t, d.scrape(), `registrar_registrations{component="review"}`); got != 8 {
		t.Fatalf("live review registrations: %v, want 8", got)
	}
}

// TestEndToEndACallerWithNoPolicyIsRefusedBeforeAnything: a certificate
// the CA signed but no policy names (the policies cover agents only) is
// refused no_policy on both verbs, with nothing written beyond each call's
// intent and refused outcome, and nothing in the registry; an agent and
// root are served.
func TestEndToEndACallerWithNoPolicyIsRefusedBeforeAnything(t *testing.T) {
	p := newE2EPKI(t)
	d, addr := startTLSDaemon(t, p, "\n[registrar.callers.agents]\nidentity_prefixes = [\"registrar-client:uri:spiffe://registrar.test/agent/\"]\n")
	stranger := p.Client(t, "spiffe://registrar.test/stranger")
	c := wire.NewTLSClient(addr, p.clientConfig(&stranger), wire.WithTimeout(e2eIODeadline))
	defer c.CloseIdleConnections()
	ctx := context.Background()
	bad := reviewMint("H1!", 0) // malformed too: no_policy comes first
	for _, call := range []func() (*wire.Response, error){
		func() (*wire.Response, error) { return c.Mint(ctx, reviewMint("h1", 1)) },
		func() (*wire.Response, error) { return c.Mint(ctx, bad) },
		func() (*wire.Response, error) {
			return c.Deregister(ctx, wire.DeregisterRequest{ServiceName: "review", Host: "h1", Instance: 1, Component: "review"})
		},
	} {
		resp, err := call()
		if err != nil || resp.StatusCode != 403 || resp.ErrorID != wire.CallerNotPermitted || resp.Reason != "no_policy" || resp.RegistrationID != "" {
			t.Fatalf("the stranger's call: %+v, %v; want 403 CallerNotPermitted no_policy", resp, err)
		}
	}
	var intents, refused int
	for _, r := range readAudit(t, d.auditDir) {
		if r.CallerIdentity != "registrar-client:uri:spiffe://registrar.test/stranger" {
			continue
		}
		switch {
		case r.Phase == "intent":
			intents++
		case r.Phase == "outcome" && r.Outcome != nil && r.Outcome.Class == "refused" && r.Outcome.Reason == "no_policy" && r.RegistrationID == "":
			refused++
		default:
			t.Errorf("a record of the stranger beyond its intents and refusals: %+v", r)
		}
	}
	if intents != 3 || refused != 3 {
		t.Fatalf("the stranger's records: %d intents and %d no_policy outcomes, want 3 and 3", intents, refused)
	}
	if got := sampleIn(t, d.scrape(), `registrar_registrations{component="review"}`); got != 0 {
		t.Fatalf("live registrations after the stranger's calls: %v, want 0", got)
	}
	agent := p.Client(t, "spiffe://registrar.test/agent/h1")
	ac := wire.NewTLSClient(addr, p.clientConfig(&agent), wire.WithTimeout(e2eIODeadline))
	defer ac.CloseIdleConnections()
	mintOKOn(t, ac, "h1")
	mintOKOn(t, wire.NewUnixClient(d.socket, wire.WithTimeout(e2eIODeadline)), "h2") // root, an operator
}
