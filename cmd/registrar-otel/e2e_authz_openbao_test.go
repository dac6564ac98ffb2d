package main

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
)

// The layout the daemon's default [openbao] keys give (backend/openbao's
// doc: <kv_mount>/data/<kv_prefix>/bindings/ID, and
// auth/<approle_mount>/role/bootroot-service-ID).
const (
	vaultKVMount  = "secret"
	vaultKVPrefix = "registrar-otel"
	vaultAppRole  = "approle"
)

// TestEndToEndAMatrixOfScopedCertificatesOnOpenBao is the matrix of
// TestEndToEndAMatrixOfScopedCertificates with the real binary on
// registrar.backend = "openbao", against a real Vault server (the
// contract suite's, vaulttest), with a token holding exactly the
// documented policy. What the backend holds is read on the server itself
// with its root token: every binding under the bindings path and every
// AppRole role, with each role's secret id accessors. After the mints it
// is exactly the 64 in-scope registrations (no role and no binding for
// any out-of-scope call, edge-proxy's or another host's); the out-of-scope
// deregisters leave every role, binding and secret id as it was; after the
// in-scope deregisters there is no role and no binding left. Skipped
// (failed under REGISTRAR_TEST_REQUIRE_VAULT) without `make vault`.
func TestEndToEndAMatrixOfScopedCertificatesOnOpenBao(t *testing.T) {
	buildBinary(t) // skip in -short mode before starting a server
	srv := vaulttest.StartDev(t)
	root := srv.Client()
	tok := tokenWith(t, root, "registrar-otel",
		openbao.TokenPolicy(vaultKVMount, vaultKVPrefix, vaultAppRole, time.Hour, 1))
	tokenFile := filepath.Join(shortTempDir(t), "openbao-token")
	writeFile(t, tokenFile, []byte(tok+"\n"), 0o600)
	scopedCertificateMatrix(t, matrixBackend{
		registrar: "backend = \"openbao\"\n",
		// A slot per caller: the matrix is about scope, not about the
		// bulkhead (a call finding every slot busy for 100 ms is refused).
		tables: fmt.Sprintf("\n[openbao]\naddress = %q\ntoken_file = %q\nmax_in_flight = 64\n", srv.Addr, tokenFile),
		held: func(t *testing.T, _ *daemonProc) map[string]heldRegistration {
			t.Helper()
			return vaultHeld(t, root)
		},
	})
}

// vaultHeld reads, as root on the server, every binding under the
// bindings path and every AppRole role. A binding gives its owner and its
// secret_id_accessor; a role of bootroot-service-ID gives ID's role id and
// its live secret ids' accessors. A registration's secret is the binding's
// accessor with the role's accessors (so a secret issued or destroyed
// shows), "" when the binding records none. A role whose name is not of
// that form is held under "role " and its name.
func vaultHeld(t *testing.T, c *api.Client) map[string]heldRegistration {
	t.Helper()
	held := map[string]heldRegistration{}
	recorded := map[string]string{} // the bindings' secret_id_accessor
	for _, id := range vaultList(t, c, path.Join(vaultKVMount, "metadata", vaultKVPrefix, "bindings")) {
		s, err := c.Logical().Read(path.Join(vaultKVMount, "data", vaultKVPrefix, "bindings", id))
		if err != nil || s == nil {
			t.Fatalf("binding %s listed, then read: %v, %v", id, s, err)
		}
		data, _ := s.Data["data"].(map[string]any)
		owner, _ := data["owner"].(string)
		recorded[id], _ = data["secret_id_accessor"].(string)
		held[id] = heldRegistration{owner: owner}
	}
	live := map[string][]string{} // the roles' secret id accessors
	rolesPath := path.Join("auth", vaultAppRole, "role")
	for _, name := range vaultList(t, c, rolesPath) {
		id, ok := strings.CutPrefix(name, openbao.RolePrefix)
		if !ok {
			id = "role " + name
		}
		s, err := c.Logical().Read(path.Join(rolesPath, name, "role-id"))
		if err != nil || s == nil {
			t.Fatalf("role %s listed, then its role id: %v, %v", name, s, err)
		}
		h := held[id]
		h.role, _ = s.Data["role_id"].(string)
		held[id] = h
		live[id] = vaultList(t, c, path.Join(rolesPath, name, "secret-id"))
		slices.Sort(live[id])
	}
	for id, h := range held {
		if recorded[id] != "" {
			h.secret = recorded[id] + " live:" + strings.Join(live[id], ",")
			held[id] = h
		}
	}
	return held
}

// vaultList is the keys a LIST of p answers (none when nothing is there).
func vaultList(t *testing.T, c *api.Client, p string) []string {
	t.Helper()
	s, err := c.Logical().List(p)
	if err != nil {
		t.Fatalf("LIST %s: %v", p, err)
	}
	if s == nil {
		return nil
	}
	raw, _ := s.Data["keys"].([]any)
	keys := make([]string, 0, len(raw))
	for _, k := range raw {
		keys = append(keys, fmt.Sprint(k))
	}
	return keys
}
