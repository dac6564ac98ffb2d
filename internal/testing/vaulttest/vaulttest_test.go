package vaulttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"
)

// TestTheDevServerHasWhatTheTestsUse checks, on the binary the tests run
// (the small server of tools/vault, or the full one), each server feature
// the openbao tests rely on beyond a plain mint: KV v2 at secret/, an ACL
// policy templated on the AppRole entity alias's role_name metadata (the
// identity store), sys/capabilities-self, a wrapped secret id, a renewable
// token with a TTL, and a mount type the server does not have refused by name.
func TestTheDevServerHasWhatTheTestsUse(t *testing.T) {
	s := StartDev(t)
	root := s.Client()
	ctx := context.Background()

	if _, err := root.KVv2("secret").Put(ctx, "probe", map[string]any{"k": "v"}); err != nil {
		t.Fatalf("KV v2 at secret/: %v", err)
	}

	auths, err := root.Sys().ListAuth()
	if err != nil || auths["approle/"] == nil {
		t.Fatalf("auth methods %v, %v: want approle/", auths, err)
	}
	accessor := auths["approle/"].Accessor
	policy := fmt.Sprintf(`path "secret/data/svc/{{identity.entity.aliases.%s.metadata.role_name}}/*" {
  capabilities = ["create", "read", "update"]
}`, accessor)
	if err := root.Sys().PutPolicy("templated", policy); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Logical().Write("auth/approle/role/web", map[string]any{"token_policies": "templated"}); err != nil {
		t.Fatal(err)
	}
	rid, err := root.Logical().Read("auth/approle/role/web/role-id")
	if err != nil {
		t.Fatal(err)
	}
	// The secret id travels wrapped, as the backend hands it out.
	root.SetWrappingLookupFunc(func(string, string) string { return "60s" })
	wrapped, err := root.Logical().Write("auth/approle/role/web/secret-id", nil)
	root.SetWrappingLookupFunc(nil)
	if err != nil || wrapped == nil || wrapped.WrapInfo == nil {
		t.Fatalf("a wrapped secret id: %+v, %v", wrapped, err)
	}
	unwrapped, err := s.client(wrapped.WrapInfo.Token).Logical().Unwrap("")
	if err != nil || unwrapped == nil || unwrapped.Data["secret_id"] == nil {
		t.Fatalf("unwrapping: %+v, %v", unwrapped, err)
	}
	login, err := s.client("").Logical().Write("auth/approle/login", map[string]any{
		"role_id": rid.Data["role_id"], "secret_id": unwrapped.Data["secret_id"],
	})
	if err != nil || login == nil || login.Auth == nil {
		t.Fatalf("AppRole login: %+v, %v", login, err)
	}
	svc := s.client(login.Auth.ClientToken)
	caps, err := svc.Sys().CapabilitiesSelf("secret/data/svc/web/x")
	slices.Sort(caps)
	if err != nil || !slices.Equal(caps, []string{"create", "read", "update"}) {
		t.Errorf("capabilities-self on the role's own path: %v, %v; want create, read, update", caps, err)
	}
	caps, err = svc.Sys().CapabilitiesSelf("secret/data/svc/other/x")
	if err != nil || !slices.Equal(caps, []string{"deny"}) {
		t.Errorf("capabilities-self on another role's path: %v, %v; want deny", caps, err)
	}
	if _, err := svc.KVv2("secret").Put(ctx, "svc/other/x", map[string]any{"k": "v"}); err == nil {
		t.Error("the templated policy let the role write another role's path")
	}
	if _, err := svc.KVv2("secret").Put(ctx, "svc/web/x", map[string]any{"k": "v"}); err != nil {
		t.Errorf("the templated policy refused the role's own path: %v", err)
	}

	tok, err := root.Auth().Token().Create(&api.TokenCreateRequest{TTL: "30s", Policies: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := s.client(tok.Auth.ClientToken).Auth().Token().RenewSelf(120)
	if err != nil || renewed.Auth == nil || !renewed.Auth.Renewable || renewed.Auth.LeaseDuration < 60 {
		t.Errorf("renewing a 30 s token by 120 s: %+v, %v", renewed, err)
	}
	self, err := s.client(tok.Auth.ClientToken).Auth().Token().LookupSelf()
	if err != nil {
		t.Fatal(err)
	}
	if ttl, err := self.TokenTTL(); err != nil || ttl <= 30*time.Second {
		t.Errorf("lookup-self after the renewal: ttl %v, %v", ttl, err)
	}

	err = root.Sys().Mount("nosuch", &api.MountInput{Type: "nosuch"})
	if err == nil {
		t.Error("mounting an unknown secrets engine type succeeded")
	}
}

// TestAPersistentServerSealsUnsealsAndKeepsItsDataAcrossAKill checks the
// raft-backed server: sys/seal answers 503 until the unseal key, and a SIGKILL
// and a restart keep what was written.
func TestAPersistentServerSealsUnsealsAndKeepsItsDataAcrossAKill(t *testing.T) {
	s := StartPersistent(t)
	ctx := context.Background()
	if _, err := s.Client().KVv2("secret").Put(ctx, "kept", map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	s.Seal()
	if _, err := s.Client().KVv2("secret").Get(ctx, "kept"); err == nil {
		t.Fatal("a read on a sealed server succeeded")
	} else if re := (*api.ResponseError)(nil); !errors.As(err, &re) || re.StatusCode != 503 {
		t.Errorf("a read on a sealed server: %v; want a 503", err)
	}
	s.Unseal()
	s.Kill()
	s.Restart()
	got, err := s.Client().KVv2("secret").Get(ctx, "kept")
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("after a kill and a restart: %+v, %v", got, err)
	}
}

// TestAClusterFormsFromRetryJoinAndElectsAnotherLeaderWhenItsLeaderIsKilled
// starts three nodes that find each other through retry_join alone (the
// small server acts on it, as the full binary does), checks that raft
// counts three voters, kills the active node and waits for another, and
// restarts the killed node, which rejoins.
func TestAClusterFormsFromRetryJoinAndElectsAnotherLeaderWhenItsLeaderIsKilled(t *testing.T) {
	c := StartCluster(t, 3)
	voters := func() int {
		n, err := c.Voters()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := voters(); n != 3 {
		t.Fatalf("raft voters %d, want 3", n)
	}
	old := c.WaitLeader(nil)
	c.Kill(old)
	start := time.Now()
	l := c.WaitLeader(old)
	t.Logf("a new leader answered %s after the kill", time.Since(start).Round(10*time.Millisecond))
	if l == old || !l.Running() {
		t.Fatalf("leader %s after killing %s", l.Addr, old.Addr)
	}
	if _, err := l.Client().KVv2("secret").Put(context.Background(), "after-kill", map[string]any{"k": "v"}); err != nil {
		t.Fatalf("a write through the new leader: %v", err)
	}
	c.Restart(old)
	if n := voters(); n != 3 {
		t.Fatalf("raft voters after the restart %d, want 3", n)
	}
	got, err := old.Client().KVv2("secret").Get(context.Background(), "after-kill")
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("the rejoined node reads %v, %v; want the write made while it was down", got, err)
	}
}
