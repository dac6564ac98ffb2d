package openbao_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// The integration tests run against a real Vault server (internal/testing/vaulttest), which
// serves the API OpenBao forked from. They skip with a message where the
// binary is not built (`make vault`).

func TestFirstMintClaimsTheBindingAndCreatesThePolicyAndTheRole(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	op := mintOp("h1-review-007", "h1", "review")
	op.Owner = "unix-peer:uid=1000"
	status, mat, err := e.b.Mint(ctx, op)
	if err != nil || status != registrar.MintCreated {
		t.Fatalf("Mint = %v, %v; want MintCreated", status, err)
	}
	if mat.RoleID == "" || mat.WrappedSecretID == "" || !mat.ExpiresAt.Equal(testNow.Add(300*time.Second)) {
		t.Errorf("material = %+v, want a role id, a wrapped secret id and expiry Now+300s", mat)
	}
	s := e.state(t, op.RegistrationID)
	if acc, _ := s.binding["secret_id_accessor"].(string); acc == "" {
		t.Errorf("binding %v records no secret_id_accessor", s.binding)
	}
	delete(s.binding, "secret_id_accessor")
	wantBinding := map[string]any{"v": "1", "host": "h1", "component": "review", "service_name": "review",
		"reload": "systemctl reload review", "state": "active", "created_at": testNow.Format(time.RFC3339Nano), "owner": "unix-peer:uid=1000"}
	if fmt.Sprint(s.binding) != fmt.Sprint(wantBinding) {
		t.Errorf("binding = %v, want %v", s.binding, wantBinding)
	}
	if s.version != 2 {
		t.Errorf("binding version = %d, want 2 (claimed, then activated)", s.version)
	}
	if pols := fmt.Sprint(s.role["token_policies"]); pols != "[registrar-otel-service-review]" {
		t.Errorf("role token_policies = %s, want [registrar-otel-service-review]", pols)
	}
	if bind, _ := s.role["bind_secret_id"].(bool); !bind {
		t.Errorf("role bind_secret_id = %v, want true", s.role["bind_secret_id"])
	}
	if uses := fmt.Sprint(s.role["secret_id_num_uses"]); uses != "1" {
		t.Errorf("role secret_id_num_uses = %s, want 1", uses)
	}
	if ttl := fmt.Sprint(s.role["secret_id_ttl"]); ttl != "3600" {
		t.Errorf("role secret_id_ttl = %s, want 3600", ttl)
	}
	if s.roleID != mat.RoleID {
		t.Errorf("the role's role id is %q, the material's %q", s.roleID, mat.RoleID)
	}
}

// A remint destroys the previous secret id by the accessor kept in the
// binding, and records the new one's: the previous secret id, unwrapped but
// never used, no longer logs in; the new one does. Deregister then leaves
// no secret id that logs in.
func TestARemintDestroysThePreviousSecretID(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	op := mintOp("h1-review-001", "h1", "review")
	unwrap := func(mat registrar.Material) string {
		t.Helper()
		s, err := e.unwrapper(t).Logical().UnwrapWithContext(ctx, mat.WrappedSecretID)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := s.Data["secret_id"].(string)
		if id == "" {
			t.Fatalf("no secret_id in %v", s.Data)
		}
		return id
	}
	_, mat1, err := e.b.Mint(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	first := e.state(t, op.RegistrationID)
	acc1, _ := first.binding["secret_id_accessor"].(string)
	if acc1 == "" {
		t.Fatalf("the first mint's binding records no secret_id_accessor: %v", first.binding)
	}
	old := unwrap(mat1)

	status, mat2, err := e.b.Mint(ctx, op)
	if err != nil || status != registrar.MintReissued {
		t.Fatalf("remint: %v, %v", status, err)
	}
	second := e.state(t, op.RegistrationID)
	if acc2, _ := second.binding["secret_id_accessor"].(string); acc2 == "" || acc2 == acc1 {
		t.Errorf("after the remint the binding's accessor is %q, want a new one (was %q)", acc2, acc1)
	}
	if second.binding["state"] != "active" {
		t.Errorf("after the remint the binding is %v, want active", second.binding["state"])
	}
	if _, err := login(ctx, e.unwrapper(t), mat1.RoleID, old); err == nil {
		t.Error("the previous secret id still logs in after a remint")
	}
	if _, err := login(ctx, e.unwrapper(t), mat2.RoleID, unwrap(mat2)); err != nil {
		t.Errorf("the new secret id does not log in: %v", err)
	}

	// A remint whose previous secret id is already gone (used up, expired
	// or destroyed by an attempt whose answer was lost) still succeeds.
	if _, _, err := e.b.Mint(ctx, op); err != nil {
		t.Errorf("a remint after the previous secret id was used up: %v", err)
	}
	_, mat4, err := e.b.Mint(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	last := unwrap(mat4)
	if _, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: "h1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := login(ctx, e.unwrapper(t), mat4.RoleID, last); err == nil {
		t.Error("a secret id logs in after deregister")
	}
}

func TestCollisionAndSpecConflictChangeNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	op := mintOp("control-plane", "h1", "control-plane")
	e.mustMint(t, ctx, op)
	before := e.state(t, op.RegistrationID)

	other := op
	other.Host = "h2"
	if status, mat, err := e.b.Mint(ctx, other); err != nil || status != registrar.MintCollision || mat != (registrar.Material{}) {
		t.Errorf("mint from another host = %v, %+v, %v; want MintCollision and no material", status, mat, err)
	}
	changed := op
	changed.Spec.Reload = "systemctl restart control-plane"
	if status, mat, err := e.b.Mint(ctx, changed); err != nil || status != registrar.MintSpecConflict || mat != (registrar.Material{}) {
		t.Errorf("mint with another spec = %v, %+v, %v; want MintSpecConflict and no material", status, mat, err)
	}
	after := e.state(t, op.RegistrationID)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused mint changed the server's state:\nbefore %+v\nafter  %+v", before, after)
	}
	// A collision on another host of a binding only claimed (its first mint
	// never finished) is still a collision: a binding is never rolled back.
	e.px.failNth(2, fail503) // the policy write of the next first mint
	half := mintOp("half", "h1", "review")
	if _, _, err := e.b.Mint(ctx, half); err == nil {
		t.Fatal("the injected failure did not fail the mint")
	}
	e.px.setHook(nil)
	half.Host = "h9"
	if status, _, err := e.b.Mint(ctx, half); err != nil || status != registrar.MintCollision {
		t.Errorf("mint of a claimed binding from another host = %v, %v; want MintCollision", status, err)
	}
}

func TestDeregisterRemovesRolePolicyAndBindingAndAnswersAbsentAndHostMismatch(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	op := mintOp("h1-review-002", "h1", "review")
	e.mustMint(t, ctx, op)
	if status, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: "h2"}); err != nil || status != registrar.DeregisterHostMismatch {
		t.Fatalf("deregister from another host = %v, %v; want DeregisterHostMismatch", status, err)
	}
	if s := e.state(t, op.RegistrationID); s.binding == nil || s.policy == "" || s.role == nil {
		t.Fatalf("a host mismatch removed something: %+v", s)
	}
	if status, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: "h1"}); err != nil || status != registrar.DeregisterRemoved {
		t.Fatalf("deregister = %v, %v; want DeregisterRemoved", status, err)
	}
	if s := e.state(t, op.RegistrationID); s.binding != nil || s.policy != "" || s.role != nil {
		t.Errorf("after deregister the server still holds %+v", s)
	}
	if inv := e.inventory(t); len(inv.policies)+len(inv.roles)+len(inv.bindings) != 0 {
		t.Errorf("after deregister the server still lists %+v", inv)
	}
	if status, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: "h1"}); err != nil || status != registrar.DeregisterAbsent {
		t.Errorf("second deregister = %v, %v; want DeregisterAbsent", status, err)
	}
	// The binding's metadata went with it, so the id can be minted afresh.
	if status, _, err := e.b.Mint(ctx, op); err != nil || status != registrar.MintCreated {
		t.Errorf("mint after deregister = %v, %v; want MintCreated", status, err)
	}
}

// mustMint mints op on e's backend; t fails if the mint errs.
func (e *env) mustMint(t *testing.T, ctx context.Context, op registrar.MintOp) {
	t.Helper()
	if _, _, err := e.b.Mint(ctx, op); err != nil {
		t.Fatal(err)
	}
}

// unwrapper is a client with no token of its own, as a service would have.
func (e *env) unwrapper(t *testing.T) *api.Client {
	t.Helper()
	cfg := api.NewConfig()
	cfg.Address = e.srv.Addr
	cfg.MaxRetries = 0
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func login(ctx context.Context, c *api.Client, roleID, secretID string) (*api.Secret, error) {
	return c.Logical().WriteWithContext(ctx, "auth/approle/login", map[string]any{"role_id": roleID, "secret_id": secretID})
}

func TestTheWrappedSecretIDUnwrapsOnceAndLogsInWithTheServicePolicy(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	op := mintOp("h3-review-004", "h3", "review")
	_, mat, err := e.b.Mint(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	// The root writes the service's own secret and another service's.
	kv := e.root.KVv2("secret")
	if _, err := kv.Put(ctx, testPrefix+"/services/review/db", map[string]any{"password": "p1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, testPrefix+"/services/billing/db", map[string]any{"password": "p2"}); err != nil {
		t.Fatal(err)
	}

	svc := e.unwrapper(t)
	unwrapped, err := svc.Logical().UnwrapWithContext(ctx, mat.WrappedSecretID)
	if err != nil {
		t.Fatalf("unwrap: %v", err)
	}
	secretID, _ := unwrapped.Data["secret_id"].(string)
	if secretID == "" {
		t.Fatalf("the unwrapped answer has no secret_id: %v", unwrapped.Data)
	}
	if _, err := e.unwrapper(t).Logical().UnwrapWithContext(ctx, mat.WrappedSecretID); err == nil {
		t.Error("the wrapped secret id unwrapped a second time")
	}

	auth, err := login(ctx, e.unwrapper(t), mat.RoleID, secretID)
	if err != nil {
		t.Fatalf("login with the role id and the unwrapped secret id: %v", err)
	}
	if !slices.Contains(auth.Auth.Policies, openbao.ServicePolicyName("review")) {
		t.Errorf("the login token's policies are %v, want %s among them", auth.Auth.Policies, openbao.ServicePolicyName("review"))
	}
	tok := e.unwrapper(t)
	tok.SetToken(auth.Auth.ClientToken)
	got, err := tok.KVv2("secret").Get(ctx, testPrefix+"/services/review/db")
	if err != nil || got.Data["password"] != "p1" {
		t.Errorf("the service cannot read its own secret: %v, %v", got, err)
	}
	for _, p := range []string{testPrefix + "/services/billing/db", testPrefix + "/bindings/" + op.RegistrationID} {
		if _, err := tok.KVv2("secret").Get(ctx, p); !isForbidden(err) {
			t.Errorf("the service's read of %s = %v, want permission denied", p, err)
		}
	}
	if _, err := login(ctx, e.unwrapper(t), mat.RoleID, secretID); err == nil {
		t.Error("a secret id with secret_id_num_uses = 1 logged in twice")
	}

	// A fresh secret id, unwrapped but not used before the deregister, no
	// longer logs in after it.
	_, mat2, err := e.b.Mint(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	unwrapped2, err := e.unwrapper(t).Logical().UnwrapWithContext(ctx, mat2.WrappedSecretID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: "h3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := login(ctx, e.unwrapper(t), mat2.RoleID, unwrapped2.Data["secret_id"].(string)); err == nil {
		t.Error("login succeeded after deregister")
	}
	// A token issued before the deregister keeps its service's policy,
	// which the operator owns and other registrations of the service
	// share, until the token's own TTL: deregister stops logins, it does
	// not revoke issued tokens (docs/en/openbao.md#token-policy).
}

func isForbidden(err error) bool {
	re, ok := errors.AsType[*api.ResponseError](err)
	return ok && re.StatusCode == http.StatusForbidden
}

func TestSixtyFourConcurrentMintsOfOneIDThroughTheVerbs(t *testing.T) {
	e := newEnv(t, envOptions{})
	h := newVerbs(t, e.b, 512, nil)
	const n = 64
	results := make([]registrar.MintResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = h.v.Mint(context.Background(), mintRequest("h1", 7)) })
	}
	wg.Wait()
	counts := map[registrar.MintOutcome]int{}
	roleIDs := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("mint %d: %v", i, errs[i])
		}
		counts[results[i].Outcome]++
		roleIDs[results[i].Material.RoleID] = true
	}
	if counts[registrar.FirstMint] != 1 || counts[registrar.IdempotentRemint] != n-1 {
		t.Errorf("outcomes %v, want one first_mint and %d idempotent_remint", counts, n-1)
	}
	if len(roleIDs) != 1 {
		t.Errorf("%d distinct role ids, want 1", len(roleIDs))
	}
	inv := e.inventory(t)
	want := []string{"h1-review-007"}
	if !slices.Equal(inv.roles, want) || len(inv.policies) != 0 || !slices.Equal(inv.bindings, want) {
		t.Errorf("server holds %+v, want one role and one binding for h1-review-007, and no policy", inv)
	}
}

func TestConcurrentMintsOfOneIDOnTheBackendDirectlyLeaveOneOfEach(t *testing.T) {
	// Without the verbs' per-id lock (two daemons on one server), the
	// compare-and-set on the binding alone decides the first mint; the
	// contract suite (contract_test.go) checks the statuses, this what the
	// server holds.
	e := newEnv(t, envOptions{})
	const n = 16
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, _, err := e.b.Mint(context.Background(), mintOp("edge-proxy", "h1", "edge-proxy")); err != nil {
				t.Errorf("mint: %v", err)
			}
		})
	}
	wg.Wait()
	if inv := e.inventory(t); len(inv.roles) != 1 || len(inv.policies) != 0 || len(inv.bindings) != 1 {
		t.Errorf("server holds %+v, want one role and one binding, and no policy", inv)
	}
}

// mintSequence is the requests of a first mint, in order.
var mintSequence = []string{"binding_read", "binding_claim", "role_write", "role_id_read", "secret_id_wrap", "secret_id_list", "secret_id_list_unwrap", "binding_activate"}

func TestAMintFailingAtAnyStepIsPartialAfterTheClaimAndConvergesOnRetry(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	eachFailedStep(t, mintSequence, []string{"binding_read", "role_id_read", "secret_id_list"}, func(t *testing.T, act action, step int, name, id string) {
		op := mintOp(id, "h1", "review")
		e.px.failNth(step, act)
		_, mat, err := e.b.Mint(ctx, op)
		e.px.setHook(nil)
		if err == nil {
			t.Fatalf("the injected failure at %s did not fail the mint", name)
		}
		if mat != (registrar.Material{}) {
			t.Errorf("a failed mint returned material %+v", mat)
		}
		var re *openbao.RequestError
		if !errors.As(err, &re) || re.Op.String() != name {
			t.Errorf("error %v, want a *RequestError of %s", err, name)
		}
		checkFailedStep(t, e, id, step, err, " (a failure at or after the claim may have changed state)", "exists without a binding")
		// The retry comes from a restarted daemon: a new backend
		// that knows only what the server holds.
		status, mat, err := e.restarted(t).Mint(ctx, op)
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		// The retry completes an unfinished first mint; only a
		// first mint whose last step was applied (and its answer
		// lost) is a remint.
		want := registrar.MintCreated
		if name == "binding_activate" && act == forwardDrop {
			want = registrar.MintReissued
		}
		if status != want || mat.WrappedSecretID == "" {
			t.Errorf("retry = %v (material %v), want %v with material", status, mat.WrappedSecretID != "", want)
		}
		s := e.state(t, id)
		if s.binding["state"] != "active" || s.policy == "" || s.roleID != mat.RoleID {
			t.Errorf("after the retry the server holds %+v, want an active binding, the policy and the role", s)
		}
	})
}

// eachFailedStep runs one subtest, "<step>/<action>", per action and per
// step of sequence, with that case's registration id. For forwardDrop a
// step of reads (a GET) is skipped: net/http replays a GET whose reused
// connection dropped, so the read succeeds; fail503 covers the read.
func eachFailedStep(t *testing.T, sequence, reads []string, run func(t *testing.T, act action, step int, name, id string)) {
	for _, act := range []action{fail503, forwardDrop} {
		for step, name := range sequence {
			id := fmt.Sprintf("h%d-review-%03d", act, step+1)
			t.Run(fmt.Sprintf("%s/%d", name, act), func(t *testing.T) {
				if act == forwardDrop && slices.Contains(reads, name) {
					t.Skip("net/http replays a GET whose reused connection dropped, so the read succeeds; fail503 covers the read")
				}
				run(t, act, step, name, id)
			})
		}
	}
}

// checkFailedStep checks the error of a verb whose request at step (of its
// sequence) was made to fail: partial exactly when the step is past the
// first, which only reads (why says more), and the server never left
// holding a policy or role without a binding (orphan words that failure).
func checkFailedStep(t *testing.T, e *env, id string, step int, err error, why, orphan string) {
	t.Helper()
	_, partial := errors.AsType[*registrar.PartialError](err)
	if wantPartial := step >= 1; partial != wantPartial {
		t.Errorf("partial = %v, want %v%s: %v", partial, wantPartial, why, err)
	}
	if s := e.state(t, id); s.binding == nil && (s.policy != "" || s.role != nil) {
		t.Errorf("after the failure a policy or role %s: %+v", orphan, s)
	}
}

var deregisterSequence = []string{"binding_read", "binding_claim", "role_delete", "binding_delete"}

func TestADeregisterFailingAtAnyStepConvergesOnRetry(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	eachFailedStep(t, deregisterSequence, []string{"binding_read"}, func(t *testing.T, act action, step int, name, id string) {
		if _, _, err := e.b.Mint(ctx, mintOp(id, "h1", "review")); err != nil {
			t.Fatal(err)
		}
		e.px.failNth(step, act)
		_, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: id, Host: "h1"})
		e.px.setHook(nil)
		if err == nil {
			t.Fatalf("the injected failure at %s did not fail the deregister", name)
		}
		checkFailedStep(t, e, id, step, err, "", "outlives the binding")
		status, err := e.restarted(t).Deregister(ctx, registrar.DeregisterOp{RegistrationID: id, Host: "h1"})
		want := registrar.DeregisterRemoved
		if name == "binding_delete" && act == forwardDrop {
			want = registrar.DeregisterAbsent // the delete was applied; its answer was lost
		}
		if err != nil || status != want {
			t.Errorf("retry = %v, %v; want %v", status, err, want)
		}
		if s := e.state(t, id); s.binding != nil || s.policy != "" || s.role != nil {
			t.Errorf("after the retry the server still holds %+v", s)
		}
	})
}

func TestAThrottledMintMakesNoRequestToTheServer(t *testing.T) {
	e := newEnv(t, envOptions{})
	h := newVerbs(t, e.b, 1, nil)
	ctx := context.Background()
	if _, err := h.v.Mint(ctx, mintRequest("h1", 1)); err != nil {
		t.Fatal(err)
	}
	before, records := e.px.count(), h.log.Len()
	if before == 0 {
		t.Fatal("the admitted mint made no request: the proxy does not see the backend")
	}
	_, err := h.v.Mint(ctx, mintRequest("h1", 2))
	if _, ok := errors.AsType[*registrar.ThrottledError](err); !ok {
		t.Fatalf("second mint = %v, want *ThrottledError", err)
	}
	if after := e.px.count(); after != before {
		t.Errorf("the throttled mint made %d requests to the server, want 0: %v", after-before, e.px.requests()[before:])
	}
	if h.log.Len() != records {
		t.Errorf("the throttled mint wrote %d audit records, want 0", h.log.Len()-records)
	}
}

func TestTheLimiterLockIsNotHeldAcrossARequest(t *testing.T) {
	e := newEnv(t, envOptions{})
	h := newVerbs(t, e.b, 512, nil)
	release := make(chan struct{})
	e.px.setHook(func(n int, r *http.Request) (action, <-chan struct{}) {
		if n == 0 {
			return forwardAfter, release
		}
		return forward, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := h.v.Mint(context.Background(), mintRequest("h1", 3))
		done <- err
	}()
	<-e.px.holding // the mint is inside its first request to the server
	// The same identity, verb and bucket: the very entry the mint charged.
	// If its lock were held across the request this would block.
	d := h.lim.Charge(context.Background(), "unix-peer:uid=1000", vocab.Mint, vocab.Admission)
	if !d.Allowed {
		t.Errorf("charge during the held request = %+v, want allowed", d)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutsAnd5xxAnswerBackendUnavailableWithTheCauseLogged(t *testing.T) {
	e := newEnv(t, envOptions{timeout: 150 * time.Millisecond})
	h := newVerbs(t, e.b, 512, nil)
	ctx := context.Background()

	e.px.failNth(0, fail503)
	_, err := h.v.Mint(ctx, mintRequest("h1", 10))
	checkUnavailable(t, err, "server_error")

	release := make(chan struct{})
	defer close(release)
	e.px.setHook(func(int, *http.Request) (action, <-chan struct{}) { return forwardAfter, release })
	_, err = h.v.Mint(ctx, mintRequest("h1", 11))
	checkUnavailable(t, err, "timeout")

	logs := e.logs.String()
	for _, want := range []string{"kind=server_error", "status=503", "injected by the test proxy", "kind=timeout", "operation=binding_read"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the backend's log lacks %q:\n%s", want, logs)
		}
	}
	// Both failures were recorded as backend_unavailable refusals.
	n := 0
	for _, r := range h.log.Records() {
		if r.Outcome != nil && r.Outcome.Reason == vocab.ReasonBackendUnavailable {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d backend_unavailable outcome records, want 2", n)
	}
}

func checkUnavailable(t *testing.T, err error, kind string) {
	t.Helper()
	u, ok := errors.AsType[*registrar.UnavailableError](err)
	if !ok || u.Reason != registrar.BackendUnavailable {
		t.Fatalf("mint = %v, want UnavailableError{BackendUnavailable}", err)
	}
	re, ok := errors.AsType[*openbao.RequestError](err)
	if !ok || re.Kind.String() != kind {
		t.Errorf("cause %v, want a *RequestError of kind %s", err, kind)
	}
}

func TestAPartialMintIsRecordedAsPartialNotAsACleanRefusal(t *testing.T) {
	e := newEnv(t, envOptions{})
	h := newVerbs(t, e.b, 512, nil)
	ctx := context.Background()
	e.px.failNth(2, fail503) // role_write, after the claim
	_, err := h.v.Mint(ctx, mintRequest("h1", 12))
	if u, ok := errors.AsType[*registrar.UnavailableError](err); !ok || u.Reason != registrar.BackendUnavailable {
		t.Fatalf("mint = %v, want BackendUnavailable", err)
	}
	recs := h.log.Records()
	last := recs[len(recs)-1]
	if last.Outcome == nil || last.Outcome.Reason != vocab.ReasonBackendUnavailable ||
		!strings.HasPrefix(last.Outcome.Detail, "partial: may have changed binding claimed, role written (maybe)") {
		t.Errorf("outcome record %+v, want backend_unavailable with a detail naming the partial changes", last.Outcome)
	}
	e.px.setHook(nil)
	res, err := h.v.Mint(ctx, mintRequest("h1", 12))
	if err != nil || res.Outcome != registrar.FirstMint {
		t.Errorf("retry = %v, %v; want first_mint (the first one never finished)", res.Outcome, err)
	}
}

func TestServerStoppedMidWaveLeavesNoOrphansOnceTheWaveIsRetried(t *testing.T) {
	e := newEnv(t, envOptions{persistent: true, timeout: 5 * time.Second})
	h := newVerbs(t, e.b, 512, nil)
	const hosts, workers = 24, 4
	// A control plane brings hosts up a few at a time. Kill the server
	// when the wave has made 66 of its 168 requests: about eight mints are
	// done, four are half-way, the rest have not started.
	var once sync.Once
	e.px.setHook(func(n int, _ *http.Request) (action, <-chan struct{}) {
		if n >= 66 {
			once.Do(e.srv.Kill)
		}
		return forward, nil
	})
	wave := func() []error {
		errs := make([]error, hosts)
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range next {
					_, errs[i] = h.v.Mint(context.Background(), mintRequest(fmt.Sprintf("w%02d", i), 1))
				}
			})
		}
		for i := range hosts {
			next <- i
		}
		close(next)
		wg.Wait()
		return errs
	}
	errs := wave()
	ok, unavailable := 0, 0
	for _, err := range errs {
		switch u, isU := errors.AsType[*registrar.UnavailableError](err); {
		case err == nil:
			ok++
		case isU && u.Reason == registrar.BackendUnavailable:
			unavailable++
		default:
			t.Errorf("mint during the outage = %v, want success or BackendUnavailable", err)
		}
	}
	if unavailable == 0 || ok == 0 {
		t.Fatalf("%d mints succeeded and %d were BackendUnavailable; the outage must fall mid-wave", ok, unavailable)
	}
	t.Logf("first wave: %d succeeded, %d BackendUnavailable", ok, unavailable)

	e.px.setHook(nil)
	e.srv.Restart()
	// Before the retry: whatever the outage cut short, no policy or role
	// exists without its binding.
	inv := e.inventory(t)
	for _, id := range append(slices.Clone(inv.policies), inv.roles...) {
		if !slices.Contains(inv.bindings, id) {
			t.Errorf("after the outage %s has a policy or role but no binding", id)
		}
	}
	claimed := 0
	for _, id := range inv.bindings {
		if e.state(t, id).binding["state"] == "claimed" {
			claimed++
		}
	}
	t.Logf("after the outage: %d bindings (%d only claimed), %d policies, %d roles", len(inv.bindings), claimed, len(inv.policies), len(inv.roles))
	if claimed == 0 {
		t.Error("no mint was cut short after its claim: the outage did not fall inside a mint")
	}
	for i, err := range wave() {
		if err != nil {
			t.Errorf("retried mint %d: %v", i, err)
		}
	}
	// After the retry: exactly one binding, active, one policy and one
	// role per host, and nothing else under the prefix.
	inv = e.inventory(t)
	if len(inv.bindings) != hosts || len(inv.policies) != 0 || !slices.Equal(inv.bindings, inv.roles) {
		t.Errorf("after the retried wave the server holds %d bindings, %d policies, %d roles (want %d bindings and roles, the same ids, and no policy):\n%+v",
			len(inv.bindings), len(inv.policies), len(inv.roles), hosts, inv)
	}
	for _, id := range inv.bindings {
		if s := e.state(t, id); s.binding["state"] != "active" {
			t.Errorf("binding %s is %v after the retried wave, want active", id, s.binding["state"])
		}
	}
}

func TestTheDocumentedLeastPrivilegeTokenPolicySufficesForEveryAnswer(t *testing.T) {
	e := newEnv(t, envOptions{tokenPolicy: documentedPolicy})
	ctx := context.Background()
	op := mintOp("h1-review-030", "h1", "review")
	for i, want := range []registrar.MintStatus{registrar.MintCreated, registrar.MintReissued} {
		if status, _, err := e.b.Mint(ctx, op); err != nil || status != want {
			t.Fatalf("mint %d with the least-privilege token = %v, %v; want %v", i, status, err, want)
		}
	}
	other := op
	other.Host = "h2"
	if status, _, err := e.b.Mint(ctx, other); err != nil || status != registrar.MintCollision {
		t.Errorf("collision = %v, %v", status, err)
	}
	for _, want := range []registrar.DeregisterStatus{registrar.DeregisterHostMismatch, registrar.DeregisterRemoved, registrar.DeregisterAbsent} {
		host := "h1"
		if want == registrar.DeregisterHostMismatch {
			host = "h2"
		}
		if status, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: host}); err != nil || status != want {
			t.Errorf("deregister = %v, %v; want %v", status, err, want)
		}
	}
	// And it is least privilege: outside its paths the token is refused.
	c := e.unwrapper(t)
	c.SetToken(e.token)
	if _, err := c.KVv2("secret").Get(ctx, testPrefix+"/services/review/db"); !isForbidden(err) {
		t.Errorf("the registrar's token reads a service's secret: %v, want permission denied", err)
	}
	if err := c.Sys().PutPolicy("admin", `path "*" { capabilities = ["sudo"] }`); !isForbidden(err) {
		t.Errorf("the registrar's token writes a policy outside bootroot-service-*: %v, want permission denied", err)
	}
}

func TestACorruptOrSoftDeletedBindingIsNeverTakenForAbsent(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	kv := e.root.KVv2("secret")
	if _, err := kv.Put(ctx, testPrefix+"/bindings/garbled", map[string]any{"host": "h1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.b.Mint(ctx, mintOp("garbled", "h1", "review")); !errors.Is(err, openbao.ErrCorrupt) {
		t.Errorf("mint over a corrupt binding = %v, want ErrCorrupt", err)
	}
	if _, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: "garbled", Host: "h1"}); !errors.Is(err, openbao.ErrCorrupt) {
		t.Errorf("deregister of a corrupt binding = %v, want ErrCorrupt", err)
	}
	if s := e.state(t, "garbled"); s.policy != "" || s.role != nil || s.version != 1 {
		t.Errorf("a corrupt binding led to writes: %+v", s)
	}

	if _, _, err := e.b.Mint(ctx, mintOp("softdel", "h1", "review")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, testPrefix+"/bindings/softdel"); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.b.Mint(ctx, mintOp("softdel", "h2", "review"))
	if !errors.Is(err, openbao.ErrCorrupt) || !strings.Contains(err.Error(), "deleted but its metadata remains") {
		t.Errorf("mint over a soft-deleted binding = %v, want ErrCorrupt saying so", err)
	}
	if re, ok := errors.AsType[*openbao.RequestError](err); !ok || re.Kind.String() != "bad_response" {
		t.Errorf("error %v, want a bad_response *RequestError", err)
	}
}

// AppRole decides between creating and updating a role before it locks
// the role, and every create draws a new role id: two role writes of one
// id in flight at once can both create it, and one caller is answered with
// a role id the server no longer keeps (seen as "got 2 distinct role ids,
// want 1" in the contract suite under load). The backend therefore keeps
// one mint of an id in flight at a time. The server's window is too narrow
// to hit on demand, so the proxy widens it: it holds the first role write
// of each id until a second role write of that id arrives (the race) or
// holdFor passes, and the test counts the second writes that arrived while
// the first was held. 8 callers mint each of 16 ids at once.
func TestConcurrentMintsOfOneIDNeverHaveTwoRoleWritesInFlight(t *testing.T) {
	e := newEnv(t, envOptions{})
	const ids, callers = 16, 8
	const holdFor = 300 * time.Millisecond

	var mu sync.Mutex
	held := map[string]chan struct{}{} // role path → open while its first write is held
	overlaps := map[string]int{}
	e.px.setHook(func(_ int, r *http.Request) (action, <-chan struct{}) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/auth/approle/role/")
		if !ok || strings.Contains(rest, "/") || (r.Method != http.MethodPut && r.Method != http.MethodPost) {
			return forward, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if ch, seen := held[rest]; seen {
			select {
			case <-ch:
			default:
				overlaps[rest]++
				close(ch)
			}
			return forward, nil
		}
		ch := make(chan struct{})
		held[rest] = ch
		time.AfterFunc(holdFor, func() {
			mu.Lock()
			defer mu.Unlock()
			select {
			case <-ch:
			default:
				close(ch)
			}
		})
		return forwardAfter, ch
	})
	go func() { // the proxy announces each held request; nobody else reads them
		for range e.px.holding {
		}
	}()

	type answer struct {
		status registrar.MintStatus
		roleID string
		err    error
	}
	answers := make([][]answer, ids)
	var wg sync.WaitGroup
	for i := range ids {
		answers[i] = make([]answer, callers)
		id := fmt.Sprintf("race-%02d", i)
		for c := range callers {
			wg.Go(func() {
				st, mat, err := e.b.Mint(context.Background(), mintOp(id, "host-a", "review"))
				answers[i][c] = answer{st, mat.RoleID, err}
			})
		}
	}
	wg.Wait()
	e.px.setHook(nil)

	mu.Lock()
	for name, n := range overlaps {
		t.Errorf("%s: %d role writes reached the server while the first was still in flight, want 0", name, n)
	}
	mu.Unlock()
	for i := range ids {
		id := fmt.Sprintf("race-%02d", i)
		if _, ok := held[openbao.RoleName(id)]; !ok {
			t.Errorf("%s: the proxy saw no role write (has the role path changed?)", id)
		}
		kept := e.state(t, id).roleID
		first := 0
		for c, a := range answers[i] {
			if a.err != nil {
				t.Errorf("%s caller %d: %v", id, c, a.err)
				continue
			}
			if a.status == registrar.MintCreated {
				first++
			}
			if a.roleID != kept {
				t.Errorf("%s caller %d (%v): answered role id %q, the server keeps %q", id, c, a.status, a.roleID, kept)
			}
		}
		if first != 1 {
			t.Errorf("%s: %d first mints among %d concurrent callers, want 1", id, first, callers)
		}
	}
}

// A call by a caller that may not act on the registration reads the
// binding and nothing else: no role, secret id or binding request reaches
// the server, and the secret id its owner holds still logs in. So does a
// call from another host, which MayAct is asked about before the host.
func TestANotOwnerCallReadsTheBindingAndWritesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	op := mintOp("h1-review-009", "h1", "review")
	op.Owner = "unix-peer:uid=1000"
	_, mat, err := e.b.Mint(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.unwrapper(t).Logical().UnwrapWithContext(ctx, mat.WrappedSecretID)
	if err != nil {
		t.Fatal(err)
	}
	secretID, _ := s.Data["secret_id"].(string)
	before := e.state(t, op.RegistrationID)

	var asked []string
	deny := func(owner string) bool { asked = append(asked, owner); return false }
	n := e.px.count()
	for _, host := range []string{"h1", "h2"} {
		attack := mintOp(op.RegistrationID, host, "review")
		attack.Owner, attack.MayAct = "unix-peer:uid=1001", deny
		if st, m, err := e.b.Mint(ctx, attack); err != nil || st != registrar.MintNotOwner || m != (registrar.Material{}) {
			t.Errorf("mint from %s by another identity = %v, %+v, %v; want MintNotOwner and no material", host, st, m, err)
		}
		if st, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: op.RegistrationID, Host: host, MayAct: deny}); err != nil || st != registrar.DeregisterNotOwner {
			t.Errorf("deregister from %s by another identity = %v, %v; want DeregisterNotOwner", host, st, err)
		}
	}
	reqs := e.px.requests()[n:]
	read := "GET /v1/secret/data/" + testPrefix + "/bindings/" + op.RegistrationID
	if len(reqs) != 4 || slices.ContainsFunc(reqs, func(r string) bool { return r != read }) {
		t.Errorf("requests of four refused calls: %q, want the binding read four times and nothing else", reqs)
	}
	if want := []string{op.Owner, op.Owner, op.Owner, op.Owner}; !slices.Equal(asked, want) {
		t.Errorf("MayAct was asked about %q, want %q", asked, want)
	}
	if after := e.state(t, op.RegistrationID); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused calls changed the server's state:\nbefore %+v\nafter  %+v", before, after)
	}
	if _, err := login(ctx, e.unwrapper(t), mat.RoleID, secretID); err != nil {
		t.Errorf("the owner's secret id no longer logs in after the refused calls: %v", err)
	}
}

// A mint whose own claim is rewritten before it activates it (another
// registrar took it over, or another writer of the store) answers no
// material, whatever the binding then says, owner included: a partial
// failure, never a remint beside the other writer's (which could deliver
// a second secret id that logs in), and never one of someone else's
// registration.
func TestAMintDoesNotAnswerForAClaimRewrittenUnderIt(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	for _, tc := range []struct {
		name, rewrittenOwner string
		wantPartial          bool
	}{
		{"same owner", "unix-peer:uid=1000", true},
		{"another owner", "unix-peer:uid=1001", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := mintOp("rewritten-"+strings.ReplaceAll(tc.name, " ", "-"), "h1", "review")
			op.Owner = "unix-peer:uid=1000"
			p := path.Join(testPrefix, "bindings", op.RegistrationID)
			writes := 0
			e.px.setHook(func(_ int, r *http.Request) (action, <-chan struct{}) {
				if r.Method == http.MethodGet || r.URL.Path != "/v1/secret/data/"+p {
					return forward, nil
				}
				if writes++; writes == 2 { // the activation: rewrite the claim first
					kv := e.root.KVv2("secret")
					s, err := kv.Get(ctx, p)
					if err != nil {
						t.Errorf("reading the claim: %v", err)
						return forward, nil
					}
					s.Data["owner"], s.Data["state"] = tc.rewrittenOwner, "active"
					if _, err := kv.Put(ctx, p, s.Data); err != nil {
						t.Errorf("rewriting the claim: %v", err)
					}
				}
				return forward, nil
			})
			st, _, err := e.b.Mint(ctx, op)
			e.px.setHook(nil)
			if _, partial := errors.AsType[*registrar.PartialError](err); partial != tc.wantPartial || (!tc.wantPartial && (err != nil || st != registrar.MintReissued)) {
				t.Errorf("Mint = %v, %v; want partial=%t (else MintReissued)", st, err, tc.wantPartial)
			}
		})
	}
}
