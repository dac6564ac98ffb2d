package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
)

// openbaoCheckConfig writes a configuration naming addr and a token file
// holding token, and returns its path.
func openbaoCheckConfig(t *testing.T, addr, token string) string {
	t.Helper()
	dir := t.TempDir()
	tok := filepath.Join(dir, "openbao-token")
	writeFile(t, tok, []byte(token+"\n"), 0o600)
	doc := "[registrar]\nbackend = \"openbao\"\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n" +
		"[openbao]\naddress = \"" + addr + "\"\ntoken_file = \"" + tok + "\"\nrequest_timeout_ms = 2000\n"
	p := filepath.Join(dir, "registrar.toml")
	writeFile(t, p, []byte(doc), 0o600)
	return p
}

// tokenWith creates, as the root, a token holding only policy (created
// with -no-default-policy, as the documentation says).
func tokenWith(t *testing.T, root *api.Client, name, policy string) string {
	t.Helper()
	if err := root.Sys().PutPolicy(name, policy); err != nil {
		t.Fatal(err)
	}
	s, err := root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{name}, NoDefaultPolicy: true, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	return s.Auth.ClientToken
}

func runOpenBaoCheckCmd(t *testing.T, cfg string) (int, string, string) {
	t.Helper()
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	var out, errOut bytes.Buffer
	code := dispatch([]string{"openbao", "check", "--config", cfg}, &out, &errOut)
	return code, out.String(), errOut.String()
}

// Green with the documented token; red (2, naming the path) with an
// over-privileged one and an under-privileged one; 3 with no server.
func TestOpenBaoCheckPassesOnlyTheDocumentedToken(t *testing.T) {
	srv := vaulttest.StartDev(t)
	root := srv.Client()
	documented := openbao.TokenPolicy("secret", "registrar-otel", "approle", time.Hour, 1)

	tok := tokenWith(t, root, "registrar-otel", documented)
	code, out, errOut := runOpenBaoCheckCmd(t, openbaoCheckConfig(t, srv.Addr, tok))
	if code != exitOK || !strings.Contains(out, "openbao check: OK") {
		t.Errorf("the documented token: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, tok) {
		t.Errorf("openbao check printed the token")
	}
	wantContains(t, "stdout", out,
		"ok      auth/approle/role/registrar-otel-check/secret-id [list, update]",
		"ok      sys/policies/acl/registrar-otel-check [deny]",
		"ok      auth/approle/role/registrar-otel-check-/secret-id [refused]: must refuse a secret id that is not response-wrapped")

	cases := []struct {
		name, policy string
		want         []string
	}{
		{"policies written back", documented + "path \"sys/policies/acl/*\" {\n  capabilities = [\"create\", \"update\", \"delete\"]\n}\n",
			[]string{"EXTRA   sys/policies/acl/registrar-otel-check [create, delete, update]: must not write any policy"}},
		{"no allowed_parameters on roles", strings.Replace(documented, "    \"token_policies\"     = [\"registrar-otel-service-*\"]\n", "    \"token_policies\"     = []\n", 1),
			[]string{"EXTRA   auth/approle/role/registrar-otel-check- [allowed]: must refuse a role carrying another policy (token_policies=root)"}},
		{"no renew-self", strings.Replace(documented, "path \"auth/token/renew-self\" {\n  capabilities = [\"update\"]\n}\n", "", 1),
			[]string{"MISSING auth/token/renew-self [deny]: the token's renewal; missing update"}},
		{"the 0.9.0 policy", `path "secret/data/registrar-otel/bindings/*" {
  capabilities = ["create", "read", "update"]
}
path "secret/metadata/registrar-otel/bindings/*" {
  capabilities = ["delete"]
}
path "sys/policies/acl/bootroot-service-*" {
  capabilities = ["create", "update", "delete"]
}
path "auth/approle/role/bootroot-service-*" {
  capabilities = ["create", "read", "update", "delete"]
}
`, []string{"MISSING sys/capabilities-self [deny]: this check (refused: the token is invalid or expired, or its policy lacks it, as 0.9.0's did"}},
		{"a service's secrets", documented + "path \"secret/data/registrar-otel/services/*\" {\n  capabilities = [\"read\"]\n}\n",
			[]string{"EXTRA   secret/data/registrar-otel/services/registrar-otel-check/x [read]"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.policy == documented {
				t.Fatal("the case's policy is the documented one: the replacement matched nothing")
			}
			tok := tokenWith(t, root, "registrar-otel-case-"+string(rune('a'+i)), c.policy)
			code, out, errOut := runOpenBaoCheckCmd(t, openbaoCheckConfig(t, srv.Addr, tok))
			if code != exitUsage {
				t.Errorf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, "checks failed: the token does not hold exactly the documented policy") {
				t.Errorf("stderr:\n%s", errOut)
			}
		})
	}
	if roles, err := root.Logical().List("auth/approle/role"); err != nil || roles != nil {
		t.Errorf("the checks left roles: %v, %v", roles, err)
	}

	// An invalid token: the server refuses the lookup itself (2).
	code, out, errOut = runOpenBaoCheckCmd(t, openbaoCheckConfig(t, srv.Addr, "hvs.not-a-token"))
	if code != exitUsage || !strings.Contains(out, "MISSING sys/capabilities-self [deny]: this check (refused: the token is invalid or expired") || strings.Contains(out, "ok ") {
		t.Errorf("an invalid token: exit %d, want 2 naming sys/capabilities-self alone\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestOpenBaoCheckWithNoServerExits3(t *testing.T) {
	addr := "http://" + closedAddr(t)
	code, _, errOut := runOpenBaoCheckCmd(t, openbaoCheckConfig(t, addr, "hvs.unused"))
	if code != exitTransport || !strings.Contains(errOut, "the server gave no answer") {
		t.Errorf("no server: exit %d, want 3\nstderr:\n%s", code, errOut)
	}
}

func TestOpenBaoCheckRefusesAConfigurationWithoutOpenBao(t *testing.T) {
	p := filepath.Join(t.TempDir(), "registrar.toml")
	writeFile(t, p, []byte("[registrar]\nbackend = \"embedded\"\n"), 0o600)
	code, _, errOut := runOpenBaoCheckCmd(t, p)
	if code != exitUsage || !strings.Contains(errOut, `registrar.backend is "embedded", not "openbao"`) {
		t.Errorf("exit %d, want 2\nstderr:\n%s", code, errOut)
	}
}

// With several nodes in openbao.address (the first one down), openbao
// check asks through the list and passes the documented token.
func TestOpenBaoCheckAsksThroughTheListOfNodes(t *testing.T) {
	srv := vaulttest.StartDev(t)
	tok := tokenWith(t, srv.Client(), "registrar-otel", openbao.TokenPolicy("secret", "registrar-otel", "approle", time.Hour, 1))
	down := "http://127.0.0.1:1" // nothing listens on port 1: refused at once
	code, out, errOut := runOpenBaoCheckCmd(t, openbaoCheckConfig(t, down+", "+srv.Addr, tok))
	if code != 0 {
		t.Fatalf("exit %d, want 0 through the second node\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, down+", "+srv.Addr) {
		t.Errorf("stdout does not name both nodes:\n%s", out)
	}
}
