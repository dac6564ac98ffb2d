package openbao_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
)

// These tests hold the documented token policy to what issue 27 asks: the
// registrar's token cannot escalate. Every refusal below is the server's
// own 403, before any backend sees the request.

// documentedToken returns a token holding only the documented policy (as
// the operator creates it: -no-default-policy), renewable, with ttl.
func documentedToken(t *testing.T, e *env, policy, ttl string) string {
	t.Helper()
	if err := e.root.Sys().PutPolicy("registrar-otel-documented", policy); err != nil {
		t.Fatal(err)
	}
	renewable := true
	s, err := e.root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{"registrar-otel-documented"}, NoDefaultPolicy: true, TTL: ttl, Renewable: &renewable})
	if err != nil {
		t.Fatal(err)
	}
	return s.Auth.ClientToken
}

func (e *env) clientWith(t *testing.T, token string) *api.Client {
	t.Helper()
	c := e.unwrapper(t)
	c.SetToken(token)
	return c
}

// goodRole is exactly what the backend writes for a role of service
// review with the tests' settings.
func goodRole() map[string]any {
	return map[string]any{
		"token_policies":     openbao.ServicePolicyName("review"),
		"bind_secret_id":     true,
		"secret_id_ttl":      "3600s",
		"secret_id_num_uses": "1",
	}
}

func roleWith(k string, v any) map[string]any {
	m := goodRole()
	if v == nil {
		delete(m, k)
	} else {
		m[k] = v
	}
	return m
}

func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !isForbidden(err) {
		t.Errorf("%s: got %v, want the server's 403 permission denied", what, err)
	}
}

func TestTheDocumentedTokenCannotEscalate(t *testing.T) {
	e := newEnv(t, envOptions{tokenPolicy: documentedPolicy})
	ctx := context.Background()
	// A role made by the backend, so the refusals below concern an existing
	// role as well as a new one.
	op := mintOp("h1-review-040", "h1", "review")
	e.mustMint(t, ctx, op)
	c := e.clientWith(t, e.token)
	existing := "auth/approle/role/" + openbao.RoleName(op.RegistrationID)
	fresh := "auth/approle/role/" + openbao.RoleName("h9-review-001")

	// The control: exactly what the backend writes is admitted, so the
	// refusals below are the policy's, not a path the token never had.
	if _, err := c.Logical().WriteWithContext(ctx, fresh, goodRole()); err != nil {
		t.Fatalf("the backend's own role write with the documented token: %v", err)
	}

	for _, p := range []struct{ name, rules string }{
		{"admin", `path "*" { capabilities = ["create", "read", "update", "delete", "list", "sudo"] }`},
		{openbao.ServicePolicyName("review"), `path "*" { capabilities = ["sudo", "read"] }`},
		{openbao.RoleName("h1-review-040"), `path "*" { capabilities = ["sudo"] }`},
	} {
		wantRefused(t, "writing the policy "+p.name+` with path "*"`, c.Sys().PutPolicyWithContext(ctx, p.name, p.rules))
		if _, err := c.Logical().WriteWithContext(ctx, "sys/policy/"+p.name, map[string]any{"policy": p.rules}); !isForbidden(err) {
			t.Errorf("writing the policy %s through sys/policy: %v, want 403", p.name, err)
		}
	}
	if err := c.Sys().DeletePolicyWithContext(ctx, openbao.ServicePolicyName("review")); !isForbidden(err) {
		t.Errorf("deleting a service's policy: %v, want 403", err)
	}

	for _, path := range []string{existing, fresh} {
		for _, r := range []struct {
			what string
			body map[string]any
		}{
			{"a role carrying root", roleWith("token_policies", "root")},
			{"a role carrying default", roleWith("token_policies", "default")},
			{"a role carrying a second policy after a comma", roleWith("token_policies", openbao.ServicePolicyName("review")+",root")},
			{"a role carrying a list with a second policy", roleWith("token_policies", []string{openbao.ServicePolicyName("review"), "root"})},
			{"a role carrying the legacy policies parameter", roleWith("policies", "root")},
			{"a role with bind_secret_id=false", roleWith("bind_secret_id", false)},
			{`a role with bind_secret_id="false"`, roleWith("bind_secret_id", "false")},
			{"a role with unlimited secret id uses", roleWith("secret_id_num_uses", "0")},
			{"a role with ten secret id uses", roleWith("secret_id_num_uses", "10")},
			{"a role with secret ids that never expire", roleWith("secret_id_ttl", "0s")},
			{"a role with a chosen role id", roleWith("role_id", "chosen-role-id")},
			{"a role with a long token TTL", roleWith("token_ttl", "8760h")},
			{"a role with a periodic token", roleWith("token_period", "768h")},
		} {
			_, err := c.Logical().WriteWithContext(ctx, path, r.body)
			wantRefused(t, r.what+" at "+path, err)
		}
	}
	_, err := c.Logical().WriteWithContext(ctx, existing+"/role-id", map[string]any{"role_id": "chosen-role-id"})
	wantRefused(t, "setting a custom role id", err)
	_, err = c.Logical().WriteWithContext(ctx, existing+"/custom-secret-id", map[string]any{"secret_id": "chosen-secret-id"})
	wantRefused(t, "setting a custom secret id", err)
	_, err = c.Logical().WriteWithContext(ctx, existing+"/secret-id", map[string]any{})
	wantRefused(t, "an unwrapped secret id", err)
	for _, body := range []map[string]any{{"num_uses": 0}, {"ttl": "87600h"}, {"cidr_list": "0.0.0.0/0"}, {"token_bound_cidrs": "0.0.0.0/0"}, {"metadata": `{"x":"y"}`}} {
		wrapped := e.clientWith(t, e.token)
		wrapped.SetWrappingLookupFunc(func(string, string) string { return "300s" })
		_, err := wrapped.Logical().WriteWithContext(ctx, existing+"/secret-id", body)
		wantRefused(t, "a wrapped secret id with its own parameters "+strings.Join(keys(body), ","), err)
	}
	_, err = c.Logical().WriteWithContext(ctx, "auth/token/create", map[string]any{"policies": []string{"root"}})
	wantRefused(t, "creating a token", err)
	_, err = c.Logical().ReadWithContext(ctx, "sys/policies/acl/"+openbao.ServicePolicyName("review"))
	wantRefused(t, "reading a policy", err)

	// The role the backend made still carries the operator's policy only.
	if s := e.state(t, op.RegistrationID); s.policy != openbao.ServicePolicyName("review") || s.role["bind_secret_id"] != true {
		t.Errorf("after the attempts the role is %v", s.role)
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// A service's login token reads its own secrets and not another
// service's, and the registrar's token reads none; both services' roles
// were made with the documented token.
func TestAServiceReadsOnlyItsOwnSecrets(t *testing.T) {
	e := newEnv(t, envOptions{tokenPolicy: documentedPolicy})
	ctx := context.Background()
	kv := e.root.KVv2("secret")
	for svc, pw := range map[string]string{"review": "p-review", "billing": "p-billing"} {
		if _, err := kv.Put(ctx, testPrefix+"/services/"+svc+"/db", map[string]any{"password": pw}); err != nil {
			t.Fatal(err)
		}
	}
	login := func(id, svc string) *api.Client {
		t.Helper()
		_, mat, err := e.b.Mint(ctx, mintOp(id, "h1", svc))
		if err != nil {
			t.Fatal(err)
		}
		u, err := e.unwrapper(t).Logical().UnwrapWithContext(ctx, mat.WrappedSecretID)
		if err != nil {
			t.Fatal(err)
		}
		auth, err := e.unwrapper(t).Logical().WriteWithContext(ctx, "auth/approle/login", map[string]any{"role_id": mat.RoleID, "secret_id": u.Data["secret_id"]})
		if err != nil {
			t.Fatalf("login as %s: %v", svc, err)
		}
		if !slices.Contains(auth.Auth.TokenPolicies, openbao.ServicePolicyName(svc)) || slices.ContainsFunc(auth.Auth.TokenPolicies, func(p string) bool { return p != "default" && p != openbao.ServicePolicyName(svc) }) {
			t.Errorf("%s's login token carries %v, want %s (and default)", svc, auth.Auth.TokenPolicies, openbao.ServicePolicyName(svc))
		}
		return e.clientWith(t, auth.Auth.ClientToken)
	}
	review := login("h1-review-041", "review")
	if got, err := review.KVv2("secret").Get(ctx, testPrefix+"/services/review/db"); err != nil || got.Data["password"] != "p-review" {
		t.Errorf("review reads its own secret: %v, %v", got, err)
	}
	_, err := review.KVv2("secret").Get(ctx, testPrefix+"/services/billing/db")
	wantRefused(t, "review reading billing's secret", err)
	_, err = review.KVv2("secret").Get(ctx, testPrefix+"/bindings/h1-review-041")
	wantRefused(t, "review reading its binding", err)
	billing := login("h1-billing-001", "billing")
	_, err = billing.KVv2("secret").Get(ctx, testPrefix+"/services/review/db")
	wantRefused(t, "billing reading review's secret", err)
	_, err = e.clientWith(t, e.token).KVv2("secret").Get(ctx, testPrefix+"/services/review/db")
	wantRefused(t, "the registrar's token reading a service's secret", err)
}

// The contract suite, every answer kind and every fault, with a backend
// whose token holds only the documented policy.
func TestBackendContractWithTheDocumentedToken(t *testing.T) {
	runContract(t, newEnv(t, envOptions{tokenPolicy: documentedPolicy}))
}

// A token holding only the documented policy (no default policy) looks
// itself up and renews itself.
func TestTheDocumentedTokenLooksItselfUpAndRenews(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	tok := documentedToken(t, e, documentedPolicy, "1h")
	b := tokenBackend(t, e, openbao.Options{Token: tok})
	if err := b.CheckToken(ctx, time.Now(), true); err != nil {
		t.Fatalf("lookup-self with the documented token: %v", err)
	}
	if _, err := e.root.Auth().Token().Renew(tok, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckToken(ctx, time.Now(), true); err != nil {
		t.Fatalf("renew-self with the documented token: %v", err)
	}
	if got := tokenTTL(t, e.root, tok); got < 50*time.Minute {
		t.Errorf("after the check the documented token's ttl is %v, want renewed to about 1 h", got)
	}
}

// CheckPolicy passes every check with the documented token, and names
// what is extra in an over-privileged one and missing in an
// under-privileged one; it never changes the server's roles.
func TestCheckPolicyPassesTheDocumentedTokenOnly(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	check := func(policy string) []openbao.PolicyCheck {
		t.Helper()
		b := tokenBackend(t, e, openbao.Options{Token: documentedToken(t, e, policy, "1h"), SecretIDTTL: time.Hour, SecretIDNumUses: 1})
		checks, err := b.CheckPolicy(ctx)
		if err != nil {
			t.Fatalf("CheckPolicy: %v", err)
		}
		return checks
	}
	failing := func(checks []openbao.PolicyCheck) []string {
		var out []string
		for _, c := range checks {
			if !c.OK() {
				out = append(out, openbao.FormatCheck(c))
			}
		}
		return out
	}
	if bad := failing(check(documentedPolicy)); len(bad) != 0 {
		t.Errorf("the documented token fails checks:\n%s", strings.Join(bad, "\n"))
	}

	over := documentedPolicy + `path "sys/policies/acl/*" {
  capabilities = ["create", "update"]
}
`
	bad := failing(check(over))
	if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), "EXTRA   sys/policies/acl/registrar-otel-check [create, update]") {
		t.Errorf("an over-privileged token's failing checks are\n%s\nwant sys/policies/acl named as extra", strings.Join(bad, "\n"))
	}
	loose := strings.Replace(documentedPolicy, `"bind_secret_id"     = [true]`, `"bind_secret_id"     = []`, 1)
	if bad := failing(check(loose)); len(bad) != 1 || !strings.Contains(bad[0], "bind_secret_id=false") {
		t.Errorf("a token whose bind_secret_id is unconstrained fails\n%s\nwant the bind_secret_id probe alone", strings.Join(bad, "\n"))
	}
	under := strings.Replace(documentedPolicy, `path "auth/token/renew-self" {
  capabilities = ["update"]
}
`, "", 1)
	if under == documentedPolicy {
		t.Fatal("the documented policy has no renew-self block to remove")
	}
	bad = failing(check(under))
	if len(bad) != 1 || !strings.Contains(bad[0], "MISSING auth/token/renew-self [deny]") || !strings.Contains(bad[0], "missing update") {
		t.Errorf("an under-privileged token's failing checks are\n%s\nwant renew-self named as missing", strings.Join(bad, "\n"))
	}
	if roles := listIDs(t, e.root, "auth/approle/role", ""); len(roles) != 0 {
		t.Errorf("the checks left roles on the server: %v", roles)
	}
}

// A probe the server answers with a 5xx, 500 included, was not let past
// the policy: the server failed, so CheckPolicy reports it unreachable
// rather than a check the token fails (a 4xx other than 403 is the one
// answer that means the policy admitted the write).
func TestCheckPolicyReportsAProbeAnswered500AsUnreachable(t *testing.T) {
	e := newEnv(t, envOptions{})
	b, err := openbao.New(openbao.Options{Address: e.px.URL, Token: documentedToken(t, e, documentedPolicy, "1h"), KVPrefix: testPrefix,
		RequestTimeout: 10 * time.Second, SecretIDTTL: time.Hour, SecretIDNumUses: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var probes atomic.Int32
	e.px.setHook(func(_ int, r *http.Request) (action, <-chan struct{}) {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/auth/approle/role/registrar-otel-check-") {
			probes.Add(1)
			return fail500, nil
		}
		return forward, nil
	})
	checks, err := b.CheckPolicy(context.Background())
	if _, ok := errors.AsType[*openbao.CheckUnreachableError](err); !ok {
		t.Fatalf("CheckPolicy with a probe answered 500: %d checks, error %v; want a *CheckUnreachableError", len(checks), err)
	}
	if probes.Load() == 0 {
		t.Fatal("no probe reached the proxy")
	}
}

func TestTheServicePolicyGrantsReadOnTheServicesOwnSecretsOnly(t *testing.T) {
	b := newTestBackend(t)
	got := openbao.ServicePolicy("kv", "bootroot/registrar", "review")
	want := `# registrar-otel-service-review: written once by the operator, attached by registrar-otel
# to the AppRole role of every registration of service review.
path "kv/data/bootroot/registrar/services/review/*" {
  capabilities = ["read"]
}
`
	if got != want {
		t.Errorf("policy =\n%s\nwant\n%s", got, want)
	}
	if b.BindingPath("web1-review-003") != "bootroot/registrar/bindings/web1-review-003" {
		t.Errorf("binding path %q", b.BindingPath("web1-review-003"))
	}
}

// The token policy grants no write on any policy, only exact values on
// role writes, and the token's own lookup and renewal.
func TestTheTokenPolicyWritesNoPolicyAndFixesEveryRoleParameter(t *testing.T) {
	got := openbao.TokenPolicy("secret", "registrar-otel", "approle", 90*time.Minute, 3)
	for _, want := range []string{
		`"secret_id_ttl"      = ["5400s"]`,
		`"secret_id_num_uses" = ["3"]`,
		`"token_policies"     = ["registrar-otel-service-*"]`,
		`"token_policies" = ["*,*"]`,
		`"bind_secret_id"     = [true]`,
		`min_wrapping_ttl = "1s"`,
		`path "auth/token/lookup-self"`,
		`path "auth/token/renew-self"`,
		`path "auth/approle/role/+"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the token policy lacks %s:\n%s", want, got)
		}
	}
	for _, bad := range []string{"sys/policies", "custom-secret-id", "services", "*\" {"} {
		if strings.Contains(got, bad) {
			t.Errorf("the token policy mentions %s:\n%s", bad, got)
		}
	}
}
