package openbao_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Several registrars on one server: two Backends in one process share no
// memory (each has its own per-id lock and its own instance nonce), so as
// far as the server is concerned they are two daemons. These tests race
// them and check the rules docs/en/openbao.md#registrars states.

// raceIDs is how many registrations each race test uses.
const raceIDs = 200

// raceDeadline bounds each race test's calls.
const raceDeadline = 5 * time.Minute

// daemon is one registrar: a backend of its own and the verbs over it with
// an audit log of its own.
type daemon struct {
	b *openbao.Backend
	h *verbsHarness
}

// secondRegistrar returns a backend on e's server (through its proxy) that
// shares nothing in memory with e.b.
func (e *env) secondRegistrar(t *testing.T) *openbao.Backend {
	t.Helper()
	return e.registrarAt(t, e.px.URL)
}

// registrarAt is secondRegistrar talking to the server through addr (a
// proxy of its own).
func (e *env) registrarAt(t *testing.T, addr string) *openbao.Backend {
	t.Helper()
	b, err := openbao.New(openbao.Options{Address: addr, Token: e.token, KVPrefix: testPrefix, RequestTimeout: e.timeout,
		SecretIDTTL: time.Hour, SecretIDNumUses: 1, MaxInFlight: testMaxInFlight, Logger: slog.New(slog.NewTextHandler(e.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func twoDaemons(t *testing.T, e *env) [2]daemon {
	t.Helper()
	b2 := e.secondRegistrar(t)
	return [2]daemon{{e.b, newVerbs(t, e.b, 1<<20, nil)}, {b2, newVerbs(t, b2, 1<<20, nil)}}
}

// answered is one successful mint's answer.
type answered struct {
	daemon  int
	outcome registrar.MintOutcome
	mat     registrar.Material
}

// firstMints counts first_mint outcome records per registration id across
// the daemons' audit logs.
func firstMints(ds [2]daemon) map[string]int {
	n := map[string]int{}
	for _, d := range ds {
		for _, r := range d.h.log.Records() {
			if r.Phase == audit.PhaseOutcome && r.Outcome != nil && r.Outcome.Class == vocab.ClassFirstMint {
				n[r.RegistrationID]++
			}
		}
	}
	return n
}

// registry is what the server holds for one id after a race, read with the
// root token.
type registry struct {
	binding  map[string]any
	roleID   string   // "" without a role
	live     []string // the role's secret id accessors
	loggedIn int      // delivered secret ids that are live and log in
}

// check reads the server's state for id and logs in with each delivered
// (wrapped) secret id: it uses them up.
func (e *env) registryOf(t *testing.T, id string, delivered []registrar.Material) registry {
	t.Helper()
	ctx := context.Background()
	var r registry
	s := e.state(t, id)
	r.binding, r.roleID = s.binding, s.roleID
	if s.role != nil {
		ls, err := e.root.Logical().ListWithContext(ctx, "auth/approle/role/"+openbao.RoleName(id)+"/secret-id")
		if err != nil {
			t.Fatalf("listing the secret ids of %s: %v", id, err)
		}
		if ls != nil {
			for _, k := range ls.Data["keys"].([]any) {
				r.live = append(r.live, k.(string))
			}
		}
	}
	// Only the delivered secret ids the server lists are tried: a login
	// that fails counts toward Vault's user lockout (5 failures lock the
	// role out for a while), and one listed is live; the login proves it.
	for i, m := range delivered {
		// A client of its own each: an unwrap makes the wrapping token
		// the client's.
		sec, err := e.unwrapper(t).Logical().UnwrapWithContext(ctx, m.WrappedSecretID)
		if err != nil {
			t.Errorf("%s: unwrapping delivered secret id %d (%.12s…): %v", id, i, m.WrappedSecretID, err)
			continue
		}
		sid, _ := sec.Data["secret_id"].(string)
		acc, _ := sec.Data["secret_id_accessor"].(string)
		if !slices.Contains(r.live, acc) {
			continue
		}
		if _, err := login(ctx, e.unwrapper(t), m.RoleID, sid); err != nil {
			t.Errorf("%s: delivered secret id %d is live and does not log in: %v", id, i, err)
			continue
		}
		r.loggedIn++
	}
	return r
}

// Concurrent first mints of the same registrations through two registrars,
// three callers each (the measurement: 582 of 1,199 delivered
// secret ids still logged in): every call answers, one first_mint per
// registration across both audit logs and among the answers, every
// answered role id is the role's, exactly one live secret id per role and
// exactly one delivered secret id that logs in, and no orphan.
func TestTwoRegistrarsRacingFirstMintsKeepEveryRule(t *testing.T) {
	e := newEnv(t, envOptions{})
	ds := twoDaemons(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), raceDeadline)
	defer cancel()
	const callers = 3
	var (
		mu      sync.Mutex
		answers = map[string][]answered{}
		errs    []error
	)
	sem := make(chan struct{}, 16) // registrations racing at once
	var wg sync.WaitGroup
	for i := range raceIDs {
		sem <- struct{}{}
		var idWG sync.WaitGroup
		for d := range ds {
			for range callers {
				idWG.Go(func() {
					res, err := ds[d].h.v.Mint(ctx, mintRequest("h1", uint32(i+1)))
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, fmt.Errorf("instance %d through registrar %d: %w", i, d, err))
						return
					}
					answers[res.RegistrationID] = append(answers[res.RegistrationID], answered{d, res.Outcome, res.Material})
				})
			}
		}
		wg.Go(func() { idWG.Wait(); <-sem })
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("mint: %v", err)
	}
	if len(answers) != raceIDs {
		t.Fatalf("answers for %d registrations, want %d", len(answers), raceIDs)
	}
	fm := firstMints(ds)
	var multiLive, wrongRole, multiLogin, extraFirst int
	for id, as := range answers {
		firsts := 0
		var delivered []registrar.Material
		for _, a := range as {
			if a.outcome == registrar.FirstMint {
				firsts++
			}
			delivered = append(delivered, a.mat)
		}
		if firsts != 1 || fm[id] != 1 {
			extraFirst++
			t.Errorf("%s: %d first_mint answers, %d first_mint records across both audit logs; want 1 and 1", id, firsts, fm[id])
		}
		r := e.registryOf(t, id, delivered)
		for _, a := range as {
			if a.mat.RoleID != r.roleID {
				wrongRole++
				t.Errorf("%s: registrar %d answered role id %q, the server's role has %q", id, a.daemon, a.mat.RoleID, r.roleID)
			}
		}
		if len(r.live) != 1 {
			multiLive++
			t.Errorf("%s: %d live secret ids, want 1", id, len(r.live))
		}
		if r.loggedIn != 1 {
			multiLogin++
			t.Errorf("%s: %d of %d delivered secret ids log in, want exactly 1", id, r.loggedIn, len(delivered))
		}
		if r.binding["state"] != "active" || r.binding["claim_owner"] != nil {
			t.Errorf("%s: binding %v, want active and unclaimed", id, r.binding)
		}
	}
	e.checkNoOrphans(t)
	t.Logf("%d registrations × 2 registrars × %d callers: %d errors, %d with more than one live secret id, %d answered role ids the server does not have, %d where not exactly one delivered secret id logs in, %d without exactly one first_mint",
		raceIDs, callers, len(errs), multiLive, wrongRole, multiLogin, extraFirst)
}

// checkNoOrphans fails t for a role without a binding or a binding without
// a role (other than a claim still being completed: none after a race).
func (e *env) checkNoOrphans(t *testing.T) {
	t.Helper()
	inv := e.inventory(t)
	roles := map[string]bool{}
	for _, r := range inv.roles {
		roles[r] = true
	}
	for _, b := range inv.bindings {
		if !roles[b] {
			t.Errorf("orphan binding %s: no role", b)
		}
		delete(roles, b)
	}
	for r := range roles {
		t.Errorf("orphan role %s: no binding", r)
	}
}

// A mint racing a deregister of one registration through two registrars,
// for ids bound beforehand and ids not: every call answers, and the server
// ends consistent with the answers. Bound at the end: the mint came last,
// its role id is the role's and its secret id the only one that logs in.
// Absent: the deregister came last (or both found it absent), and no role
// and no secret id is left — a deregister that answered removed after the
// mint leaves the mint's secret id unable to log in.
func TestAMintRacingADeregisterThroughTwoRegistrarsEndsConsistent(t *testing.T) {
	e := newEnv(t, envOptions{})
	ds := twoDaemons(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), raceDeadline)
	defer cancel()
	for i := range raceIDs {
		if i%2 == 0 {
			if _, err := ds[1].h.v.Mint(ctx, mintRequest("h1", uint32(i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	type result struct {
		mint    registrar.MintResult
		mintErr error
		dereg   registrar.DeregisterResult
		deErr   error
	}
	results := make([]result, raceIDs)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range raceIDs {
		sem <- struct{}{}
		var pair sync.WaitGroup
		// Alternate which registrar mints, so each plays both parts.
		m, d := ds[i%2], ds[1-i%2]
		pair.Go(func() { results[i].mint, results[i].mintErr = m.h.v.Mint(ctx, mintRequest("h1", uint32(i+1))) })
		pair.Go(func() {
			results[i].dereg, results[i].deErr = d.h.v.Deregister(ctx, registrar.DeregisterRequest{
				CallerIdentity: "unix-peer:uid=1000", ServiceName: "review", Host: "h1", Instance: uint32(i + 1), Component: "review",
			})
		})
		wg.Go(func() { pair.Wait(); <-sem })
	}
	wg.Wait()
	var errCount, inconsistent, bothSucceededAndLive int
	outcomes := map[string]int{}
	for i, r := range results {
		if r.mintErr != nil || r.deErr != nil {
			errCount++
			t.Errorf("instance %d: mint %v, deregister %v", i, r.mintErr, r.deErr)
			continue
		}
		id := r.mint.RegistrationID
		outcomes[fmt.Sprintf("%v+%v", r.mint.Outcome, r.dereg.Outcome)]++
		reg := e.registryOf(t, id, []registrar.Material{r.mint.Material})
		switch {
		case reg.binding != nil:
			// The mint came last.
			if reg.roleID != r.mint.Material.RoleID || len(reg.live) != 1 || reg.loggedIn != 1 || reg.binding["state"] != "active" {
				inconsistent++
				t.Errorf("%s bound after the race: role id %q (answered %q), %d live secret ids, %d delivered logging in, binding %v; want the mint's, 1, 1, active",
					id, reg.roleID, r.mint.Material.RoleID, len(reg.live), reg.loggedIn, reg.binding)
			}
		default:
			// The deregister came last: it removed what the mint made.
			if r.dereg.Outcome != registrar.Removed {
				inconsistent++
				t.Errorf("%s absent after the race, but the deregister answered %v after a mint that answered %v", id, r.dereg.Outcome, r.mint.Outcome)
			}
			if reg.roleID != "" || reg.loggedIn != 0 {
				inconsistent++
				if reg.loggedIn != 0 {
					bothSucceededAndLive++
				}
				t.Errorf("%s absent after the race, yet role id %q and %d delivered secret ids log in", id, reg.roleID, reg.loggedIn)
			}
		}
	}
	e.checkNoOrphans(t)
	t.Logf("%d mint-versus-deregister races: outcomes %v; %d errors, %d inconsistent, %d removed yet the mint's secret id logs in", raceIDs, outcomes, errCount, inconsistent, bothSucceededAndLive)
}

// A role left without a binding (by a registrar before the claims, or by
// hand) is an orphan: a deregister removes it, still answering
// already_absent (no registration was bound), and a retry finds nothing.
func TestARetriedDeregisterRemovesAnOrphanRole(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	id := "h1-review-042"
	if _, err := e.root.Logical().WriteWithContext(ctx, "auth/approle/role/"+openbao.RoleName(id), map[string]any{"token_policies": "registrar-otel-service-review"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		st, err := e.b.Deregister(ctx, registrar.DeregisterOp{RegistrationID: id, Host: "h1"})
		if err != nil || st != registrar.DeregisterAbsent {
			t.Fatalf("deregister %d of an orphan: %v, %v; want DeregisterAbsent", i, st, err)
		}
		if s := e.state(t, id); s.role != nil || s.binding != nil {
			t.Errorf("after deregister %d the server holds %+v, want neither role nor binding", i, s)
		}
	}
}

// errDied stands for a registrar that died at a step: nothing more is sent.
var errDied = errors.New("the registrar died here")

// fakeClock is a registrar's wall clock that tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.advance(d)
	return nil
}

// A registrar that dies at any step of a first mint, a remint or a
// deregister, after its claim, leaves what another registrar finishes
// once the claim expired — and nothing before: until then the other
// answers ErrClaimHeld, a retryable refusal, and writes nothing. The
// finished registration keeps every rule: the role id answered is the
// role's, exactly one secret id is live and it logs in; a finished
// deregister leaves neither role nor binding.
func TestARegistrarThatDiesMidCallLeavesWhatAnotherFinishes(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	cases := []struct {
		call, step string
	}{
		{"mint", "role_write"}, {"mint", "secret_id_wrap"}, {"mint", "binding_activate"},
		{"remint", "role_write"}, {"remint", "secret_id_wrap"}, {"remint", "secret_id_destroy"}, {"remint", "binding_activate"},
		{"deregister", "role_delete"}, {"deregister", "binding_delete"},
	}
	for i, tc := range cases {
		t.Run(tc.call+"/"+tc.step, func(t *testing.T) {
			id := fmt.Sprintf("h1-review-%03d", 300+i)
			op := mintOp(id, "h1", "review")
			dying := e.secondRegistrar(t)
			var armed atomic.Bool
			openbao.SetClaimHooks(dying, nil, nil, func(gotID, step string) error {
				if armed.Load() && gotID == id && step == tc.step {
					return errDied
				}
				return nil
			})
			var before registrar.Material
			if tc.call != "mint" {
				var err error
				if _, before, err = dying.Mint(ctx, op); err != nil {
					t.Fatal(err)
				}
			}
			armed.Store(true)
			var err error
			if tc.call == "deregister" {
				_, err = dying.Deregister(ctx, registrar.DeregisterOp{RegistrationID: id, Host: "h1"})
			} else {
				_, _, err = dying.Mint(ctx, op)
			}
			if !errors.Is(err, errDied) {
				t.Fatalf("the dying %s: %v, want it stopped at %s", tc.call, err, tc.step)
			}

			other := e.secondRegistrar(t)
			clock := newFakeClock()
			openbao.SetClaimHooks(other, clock.now, clock.sleep, nil)
			held := e.state(t, id)
			if _, _, err := other.Mint(ctx, op); !errors.Is(err, openbao.ErrClaimHeld) {
				t.Fatalf("a mint while the dead registrar's claim lives: %v, want ErrClaimHeld", err)
			}
			if _, err := other.Deregister(ctx, registrar.DeregisterOp{RegistrationID: id, Host: "h1"}); !errors.Is(err, openbao.ErrClaimHeld) {
				t.Fatalf("a deregister while the dead registrar's claim lives: %v, want ErrClaimHeld", err)
			}
			if now := e.state(t, id); fmt.Sprint(now) != fmt.Sprint(held) {
				t.Errorf("the calls refused with ErrClaimHeld changed the server:\nbefore %+v\nafter  %+v", held, now)
			}

			clock.advance(openbao.ClaimTTL(other))
			if tc.call == "deregister" {
				st, err := other.Deregister(ctx, registrar.DeregisterOp{RegistrationID: id, Host: "h1"})
				if err != nil || st != registrar.DeregisterRemoved {
					t.Fatalf("the other registrar's deregister: %v, %v; want DeregisterRemoved", st, err)
				}
				if s := e.state(t, id); s.role != nil || s.binding != nil {
					t.Errorf("after the finished deregister the server holds %+v", s)
				}
				if reg := e.registryOf(t, id, []registrar.Material{before}); reg.loggedIn != 0 {
					t.Errorf("the secret id delivered before the deregister still logs in")
				}
				return
			}
			st, mat, err := other.Mint(ctx, op)
			want := registrar.MintReissued
			if tc.call == "mint" {
				want = registrar.MintCreated // the first mint never finished
			}
			if err != nil || st != want {
				t.Fatalf("the other registrar's mint: %v, %v; want %v", st, err, want)
			}
			delivered := []registrar.Material{mat}
			if tc.call == "remint" {
				delivered = append(delivered, before)
			}
			reg := e.registryOf(t, id, delivered)
			if reg.roleID != mat.RoleID || len(reg.live) != 1 || reg.loggedIn != 1 || reg.binding["state"] != "active" || reg.binding["claim_owner"] != nil {
				t.Errorf("after the finished mint: role id %q (answered %q), %d live secret ids, %d delivered logging in, binding %v; want the answered, 1, 1, active and unclaimed",
					reg.roleID, mat.RoleID, len(reg.live), reg.loggedIn, reg.binding)
			}
		})
	}
	e.checkNoOrphans(t)
}

// A deregister that died after its claim left the binding "removing": a
// mint, from any registrar once the claim expired, finishes the removal
// and mints the registration afresh (a first mint, a new role id).
func TestAMintFinishesADeadDeregisterThenMintsAfresh(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	id := "h1-review-400"
	op := mintOp(id, "h1", "review")
	dying := e.secondRegistrar(t)
	openbao.SetClaimHooks(dying, nil, nil, func(_, step string) error {
		if step == "role_delete" {
			return errDied
		}
		return nil
	})
	_, before, err := dying.Mint(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dying.Deregister(ctx, registrar.DeregisterOp{RegistrationID: id, Host: "h1"}); !errors.Is(err, errDied) {
		t.Fatalf("the dying deregister: %v", err)
	}
	if s := e.state(t, id); s.binding["state"] != "removing" {
		t.Fatalf("after the dead deregister the binding is %v, want removing", s.binding)
	}
	other := e.secondRegistrar(t)
	clock := newFakeClock()
	clock.advance(openbao.ClaimTTL(other))
	openbao.SetClaimHooks(other, clock.now, clock.sleep, nil)
	st, mat, err := other.Mint(ctx, op)
	if err != nil || st != registrar.MintCreated || mat.RoleID == before.RoleID {
		t.Fatalf("mint after a dead deregister: %v, %v, role id %q (before %q); want MintCreated with a new role id", st, err, mat.RoleID, before.RoleID)
	}
	reg := e.registryOf(t, id, []registrar.Material{before, mat})
	if reg.roleID != mat.RoleID || len(reg.live) != 1 || reg.loggedIn != 1 {
		t.Errorf("after the mint: role id %q (answered %q), %d live, %d delivered logging in; want the answered, 1, 1", reg.roleID, mat.RoleID, len(reg.live), reg.loggedIn)
	}
}

// A holder that outlives its claim budget (its clock passes the instant
// after which another registrar may take the claim over) sends no further
// state-changing request: the mint fails there and a retry completes it.
func TestAHolderPastItsClaimBudgetStopsBeforeItsNextWrite(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	id := "h1-review-401"
	b := e.secondRegistrar(t)
	clock := newFakeClock()
	openbao.SetClaimHooks(b, clock.now, clock.sleep, func(_, step string) error {
		if step == "secret_id_wrap" {
			clock.advance(openbao.ClaimBudget(b))
		}
		return nil
	})
	before := e.px.count()
	_, _, err := b.Mint(ctx, mintOp(id, "h1", "review"))
	if err == nil || !errors.As(err, new(*registrar.PartialError)) {
		t.Fatalf("a mint past its claim budget: %v, want a partial failure", err)
	}
	for _, r := range e.px.requests()[before:] {
		if r == "PUT /v1/auth/approle/role/"+openbao.RoleName(id)+"/secret-id" {
			t.Errorf("the mint issued a secret id after its claim budget")
		}
	}
	openbao.SetClaimHooks(b, clock.now, clock.sleep, nil)
	if st, _, err := b.Mint(ctx, mintOp(id, "h1", "review")); err != nil || st != registrar.MintCreated {
		t.Errorf("the retry: %v, %v; want MintCreated", st, err)
	}
}

// The binding's claim fields are strings; anything else is corrupt.
func TestAClaimThatIsNotAStringIsCorrupt(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	id := "h1-review-402"
	p := path.Join(testPrefix, "bindings", id)
	data := map[string]any{"v": "1", "host": "h1", "component": "review", "service_name": "review", "reload": "x",
		"state": "active", "created_at": testNow.Format(time.RFC3339Nano), "claim_owner": 7, "claim_expires": "x"}
	if _, err := e.root.KVv2("secret").Put(ctx, p, data, api.WithCheckAndSet(0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.b.Mint(ctx, mintOp(id, "h1", "review")); !errors.Is(err, openbao.ErrCorrupt) {
		t.Errorf("mint of a binding with a claim_owner that is no string: %v, want ErrCorrupt", err)
	}
}

// While one registrar holds a registration's claim, another sends nothing
// to its role: AppRole draws a new role id when a write finds no role, so a
// second writer racing the first creation could replace the role id the
// first answers. Registrar A's role write is held at its proxy (A holds
// the claim of an absent registration); B's mint, on a proxy of its own,
// waits and gives up with ErrClaimHeld having written nothing to the
// role; released, A answers first_mint with the role's role id, and B's
// retry is a remint with the same one.
func TestWhileOneRegistrarHoldsTheClaimAnotherWritesNothingToTheRole(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	id := "h1-review-403"
	op := mintOp(id, "h1", "review")
	rolePath := "/v1/auth/approle/role/" + openbao.RoleName(id)
	release := make(chan struct{})
	e.px.setHook(func(_ int, r *http.Request) (action, <-chan struct{}) {
		if r.Method == http.MethodPut && r.URL.Path == rolePath {
			return forwardAfter, release
		}
		return forward, nil
	})
	type answer struct {
		st  registrar.MintStatus
		mat registrar.Material
		err error
	}
	aDone := make(chan answer, 1)
	go func() {
		st, mat, err := e.b.Mint(ctx, op)
		aDone <- answer{st, mat, err}
	}()
	select {
	case held := <-e.px.holding:
		if held != "PUT "+rolePath {
			t.Fatalf("held %s, want A's role write", held)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("A's role write never reached the proxy")
	}

	pxB := newProxy(t, e.srv.Addr)
	b := e.registrarAt(t, pxB.URL)
	clock := newFakeClock()
	openbao.SetClaimHooks(b, clock.now, clock.sleep, nil)
	if _, _, err := b.Mint(ctx, op); !errors.Is(err, openbao.ErrClaimHeld) {
		t.Errorf("B's mint while A holds the claim: %v, want ErrClaimHeld", err)
	}
	for _, r := range pxB.requests() {
		if strings.HasPrefix(r, "PUT "+rolePath) || strings.HasPrefix(r, "DELETE "+rolePath) {
			t.Errorf("B sent %s while A held the claim", r)
		}
	}

	close(release)
	a := <-aDone
	e.px.setHook(nil)
	if a.err != nil || a.st != registrar.MintCreated {
		t.Fatalf("A's mint: %v, %v; want MintCreated", a.st, a.err)
	}
	if s := e.state(t, id); s.roleID != a.mat.RoleID {
		t.Errorf("A answered role id %q, the role has %q", a.mat.RoleID, s.roleID)
	}
	st, mat, err := b.Mint(ctx, op)
	if err != nil || st != registrar.MintReissued || mat.RoleID != a.mat.RoleID {
		t.Errorf("B's retry: %v, %v, role id %q; want MintReissued with A's %q", st, err, mat.RoleID, a.mat.RoleID)
	}
}
