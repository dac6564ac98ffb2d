package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// TestEndToEndTwoRegistrarsOnOneOpenBaoServer runs two real daemons, each
// with its own state_dir and audit store, against one Vault dev server
// with the documented token policy (docs/en/openbao.md#registrars), and
// drives both at once: first mints of the same registrations through both
// daemons (two callers each), then for each registration a mint through
// one daemon racing a deregister through the other. Every call answers
// without an error; then, read as root on the server: every binding has
// its role and every role its binding, each role has at most one live
// secret id (exactly one when bound), and a bound registration's role id
// is the one its last mint answered; and across both audit stores each
// registration has exactly one first_mint per life (one per first_mint
// answer, none twice for one binding).
func TestEndToEndTwoRegistrarsOnOneOpenBaoServer(t *testing.T) {
	buildBinary(t)
	srv := vaulttest.StartDev(t)
	root := srv.Client()
	tok := tokenWith(t, root, "registrar-otel",
		openbao.TokenPolicy(vaultKVMount, vaultKVPrefix, vaultAppRole, time.Hour, 1))
	if err := root.Sys().PutPolicy(openbao.ServicePolicyName("review"), openbao.ServicePolicy(vaultKVMount, vaultKVPrefix, "review")); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(shortTempDir(t), "openbao-token")
	writeFile(t, tokenFile, []byte(tok+"\n"), 0o600)
	tables := fmt.Sprintf("\n[openbao]\naddress = %q\ntoken_file = %q\nmax_in_flight = 64\n", srv.Addr, tokenFile)
	ds := [2]*daemonProc{startDaemon(t, "backend = \"openbao\"\n", tables), startDaemon(t, "backend = \"openbao\"\n", tables)}
	clients := [2]*wire.Client{}
	for i, d := range ds {
		clients[i] = wire.NewUnixClient(d.socket, wire.WithTimeout(60*time.Second))
		defer clients[i].CloseIdleConnections()
	}
	ctx := context.Background()
	const ids, callers = 40, 2
	req := func(i int) wire.MintRequest {
		return wire.MintRequest{ProtocolVersion: wire.ProtocolVersion, ServiceName: "review", Host: "h1", Instance: uint32(i + 1), Component: "review",
			Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 300}
	}
	var (
		mu      sync.Mutex
		firsts  = map[string]int{} // first_mint answers
		lastMat = map[string]string{}
	)
	call := func(what string, resp *wire.Response, err error) bool {
		if err != nil || !resp.OK() {
			t.Errorf("%s: %v %+v", what, err, resp)
			return false
		}
		return true
	}

	// Concurrent first mints through both daemons, a few registrations at
	// a time (one caller identity has a bounded number of connections).
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range ids {
		sem <- struct{}{}
		var one sync.WaitGroup
		for d := range ds {
			for range callers {
				one.Go(func() {
					resp, err := clients[d].Mint(ctx, req(i))
					if call(fmt.Sprintf("mint %d through daemon %d", i, d), resp, err) {
						mu.Lock()
						if resp.Outcome == "first_mint" {
							firsts[resp.RegistrationID]++
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Go(func() { one.Wait(); <-sem })
	}
	wg.Wait()
	for id, n := range firsts {
		if n != 1 {
			t.Errorf("%s: %d first_mint answers, want 1", id, n)
		}
	}
	if len(firsts) != ids {
		t.Errorf("first_mint answered for %d registrations, want %d", len(firsts), ids)
	}

	// A mint through one daemon racing a deregister through the other.
	type race struct{ mint, dereg *wire.Response }
	races := make([]race, ids)
	for i := range ids {
		m, d := i%2, 1-i%2
		sem <- struct{}{}
		var pair sync.WaitGroup
		pair.Go(func() {
			resp, err := clients[m].Mint(ctx, req(i))
			if call(fmt.Sprintf("racing mint %d", i), resp, err) {
				races[i].mint = resp
			}
		})
		pair.Go(func() {
			r := req(i)
			resp, err := clients[d].Deregister(ctx, wire.DeregisterRequest{ProtocolVersion: wire.ProtocolVersion,
				ServiceName: r.ServiceName, Host: r.Host, Instance: r.Instance, Component: r.Component})
			if call(fmt.Sprintf("racing deregister %d", i), resp, err) {
				races[i].dereg = resp
			}
		})
		wg.Go(func() { pair.Wait(); <-sem })
	}
	wg.Wait()
	for _, r := range races {
		if r.mint == nil || r.mint.Material == nil {
			continue
		}
		if r.mint.Outcome == "first_mint" {
			firsts[r.mint.RegistrationID]++
		}
		lastMat[r.mint.RegistrationID] = r.mint.Material.RoleID
	}
	for _, d := range ds {
		d.stop()
	}

	// The registry, as root on the server.
	held := vaultHeld(t, root)
	bindings := vaultList(t, root, path.Join(vaultKVMount, "metadata", vaultKVPrefix, "bindings"))
	for id, h := range held {
		live := vaultList(t, root, path.Join("auth", vaultAppRole, "role", openbao.RoleName(id), "secret-id"))
		bound := slices.Contains(bindings, id)
		switch {
		case h.role == "":
			t.Errorf("%s: a binding without a role (orphan binding)", id)
		case !bound:
			t.Errorf("%s: a role without a binding (orphan role)", id)
		case len(live) != 1:
			t.Errorf("%s: %d live secret ids, want 1", id, len(live))
		case h.role != lastMat[id]:
			t.Errorf("%s: the role's role id %q, the racing mint answered %q", id, h.role, lastMat[id])
		}
		if bound {
			s, err := root.KVv2(vaultKVMount).Get(ctx, path.Join(vaultKVPrefix, "bindings", id))
			if err != nil || s.Data["state"] != "active" || s.Data["claim_owner"] != nil {
				t.Errorf("%s: binding %v (%v), want active and unclaimed", id, s, err)
			}
		}
	}

	// The racing mints' secret ids: the one of a registration still bound
	// logs in, the one a later deregister removed does not.
	var loggedIn int
	for _, r := range races {
		if r.mint == nil || r.mint.Material == nil {
			continue
		}
		id := r.mint.RegistrationID
		bound := slices.Contains(bindings, id)
		sec, err := unwrapClient(t, srv.Addr).Logical().UnwrapWithContext(ctx, r.mint.Material.WrappedSecretID)
		if err != nil {
			t.Errorf("%s: unwrapping the racing mint's secret id: %v", id, err)
			continue
		}
		sid, _ := sec.Data["secret_id"].(string)
		_, err = unwrapClient(t, srv.Addr).Logical().WriteWithContext(ctx, path.Join("auth", vaultAppRole, "login"),
			map[string]any{"role_id": r.mint.Material.RoleID, "secret_id": sid})
		switch {
		case bound && err != nil:
			t.Errorf("%s: bound, and the racing mint's secret id does not log in: %v", id, err)
		case !bound && err == nil:
			t.Errorf("%s: deregistered after the racing mint, and its secret id still logs in", id)
		case err == nil:
			loggedIn++
		}
	}

	// Both audit stores together: one first_mint record per first_mint
	// answer, and no registration minted first twice without a removal
	// between.
	recorded := map[string]int{}
	for _, d := range ds {
		for _, r := range auditOutcomes(t, d.auditDir) {
			if r.Outcome.Class == "first_mint" {
				recorded[r.RegistrationID]++
			}
		}
	}
	for id, n := range firsts {
		if recorded[id] != n {
			t.Errorf("%s: %d first_mint records across both audit stores, %d first_mint answers", id, recorded[id], n)
		}
		if n > 2 {
			t.Errorf("%s: %d first mints, want at most 2 (the race's deregister came first at most once)", id, n)
		}
	}
	t.Logf("two daemons, %d registrations × 2 × %d callers, then %d mint-versus-deregister races: %d bound at the end (%d racing mints' secret ids log in), %d first_mint records across both stores",
		ids, callers, ids, len(bindings), loggedIn, sum(recorded))
}

// unwrapClient is a client with no token, as a service has.
func unwrapClient(t *testing.T, addr string) *api.Client {
	t.Helper()
	cfg := api.NewConfig()
	cfg.Address = addr
	cfg.MaxRetries = 0
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// outcomeRecord is the part of an outcome record the test reads.
type outcomeRecord struct {
	Phase          string `json:"phase"`
	RegistrationID string `json:"registration_id"`
	Outcome        struct {
		Class string `json:"class"`
	} `json:"outcome"`
}

// auditOutcomes reads every outcome record of the store in dir.
func auditOutcomes(t *testing.T, dir string) []outcomeRecord {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "registrar-audit*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no audit files in %s: %v", dir, err)
	}
	var out []outcomeRecord
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			var r outcomeRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v: %s", f, err, sc.Text())
			}
			if r.Phase == "outcome" && strings.TrimSpace(r.Outcome.Class) != "" {
				out = append(out, r)
			}
		}
		fh.Close()
	}
	return out
}
