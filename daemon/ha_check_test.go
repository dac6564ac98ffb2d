package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openbao/openbao/api/v2"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// EnvHACheck runs TestHACheck (make ha-check); without it the test skips.
const EnvHACheck = "REGISTRAR_HA_CHECK"

// EnvHACheckIDs sets the run's registrations (make ha-check HA_IDS=N): the
// first mints' and the races' (default 40 each; the full size is
// 200, 1200 concurrent first mints).
const EnvHACheckIDs = "REGISTRAR_HA_CHECK_IDS"

// The acceptance run's sizes: a few hundred mints by default, so CI's run
// stays in minutes (docs/en/ha.md#ha-check).
var (
	haFirstMintIDs = 40 // × 2 daemons × 3 callers = 240 concurrent first mints
	haRaceIDs      = 40 // mint against deregister, one id each
)

const (
	haKills         = 10
	haKillBound     = 15 * time.Second // mints succeed again within this of a kill
	haKillsInBound  = 9                // in at least this many trials
	haStreamCallers = 2                // per daemon, during the kills
	haStreamPace    = 100 * time.Millisecond
	haWarmMints     = 3 // successes per daemon before a kill, and after the recovery
	haTrialTimeout  = 45 * time.Second
	haGraceMS       = 2000 // openbao.readiness_grace_ms of both daemons
	haReadyTimeout  = 30 * time.Second
)

// haDaemon is one registrar of the run: its client, its metrics address
// (for /readyz) and its audit directory.
type haDaemon struct {
	name     string
	r        *running
	auditDir string
	metrics  string
}

// haAnswer is one answered (or failed) call of the run.
type haAnswer struct {
	phase, daemon, verb, id string
	started, answered       time.Time
	resp                    *wire.Response
	err                     error
}

func (a haAnswer) ok() bool { return a.err == nil && a.resp != nil && a.resp.OK() }

// retryable: the documented answers a caller retries (BackendUnavailable
// while the cluster is unreachable or mid-election, RegistrarBusy).
func (a haAnswer) retryable() bool {
	if a.err != nil || a.resp == nil {
		return false
	}
	return a.resp.ErrorID == wire.RegistrarBusy || (a.resp.ErrorID == wire.RegistrarUnavailable && a.resp.Reason == "BackendUnavailable")
}

type haCheck struct {
	name   string
	pass   bool
	figure string
}

// haRun holds the cluster, the two daemons and every answer.
type haRun struct {
	t       *testing.T
	cl      *vaulttest.Cluster
	ds      []*haDaemon
	mu      sync.Mutex
	answers []haAnswer
	checks  []haCheck
}

func (h *haRun) record(a haAnswer) {
	h.mu.Lock()
	h.answers = append(h.answers, a)
	h.mu.Unlock()
}

func (h *haRun) check(name string, pass bool, format string, args ...any) {
	c := haCheck{name: name, pass: pass, figure: fmt.Sprintf(format, args...)}
	h.checks = append(h.checks, c)
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	fmt.Printf("ha-check: %s %s: %s\n", verdict, name, c.figure)
}

func (h *haRun) call(ctx context.Context, phase string, d *haDaemon, verb string, host string) haAnswer {
	a := haAnswer{phase: phase, daemon: d.name, verb: verb, id: host + "-review-001", started: time.Now()}
	if verb == "mint" {
		req := mint("review")
		// Long enough that the verification at the end still unwraps
		// the first mints' secret ids (a run takes a few minutes).
		req.Host, req.WrapTTL = host, 1200
		a.resp, a.err = d.r.client.Mint(ctx, req)
	} else {
		a.resp, a.err = d.r.client.Deregister(ctx, wire.DeregisterRequest{ProtocolVersion: 1, ServiceName: "review", Host: host, Instance: 1, Component: "review"})
	}
	a.answered = time.Now()
	h.record(a)
	return a
}

// TestHACheck is the HA acceptance run (make ha-check, docs/en/ha.md): a
// three-node raft cluster of the small Vault server on loopback, formed
// through retry_join, and two registrars on it, each listing every node.
// It drives concurrent first mints of the same registrations through both,
// mint-against-deregister races, and a mint stream through ten SIGKILLs of
// the leader, then two nodes down at once; it checks the registry, Vault
// and both audit stores together and prints each check as PASS or FAIL
// with its figures. It is bounded (a few hundred mints), stops by itself
// and kills every server it started.
func TestHACheck(t *testing.T) {
	if os.Getenv(EnvHACheck) == "" {
		t.Skip("the HA acceptance run: make ha-check (" + EnvHACheck + "=1)")
	}
	if v := os.Getenv(EnvHACheckIDs); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("%s=%q: want a whole number of registrations from 1 to 1000", EnvHACheckIDs, v)
		}
		haFirstMintIDs, haRaceIDs = n, n
	}
	begin := time.Now()
	h := &haRun{t: t, cl: vaulttest.StartCluster(t, 3)}
	leader := h.cl.WaitLeader(nil)
	fmt.Printf("ha-check: cluster of 3 formed through retry_join in %s; leader %s\n", time.Since(begin).Round(100*time.Millisecond), leader.Addr)
	// Registrar a lists the leader first (the daemon the issue saw stay
	// down with it), b lists it last.
	var others []string
	for _, a := range h.cl.Addrs() {
		if a != leader.Addr {
			others = append(others, a)
		}
	}
	h.ds = []*haDaemon{
		h.startDaemon("a", append([]string{leader.Addr}, others...)),
		h.startDaemon("b", append(slices.Clone(others), leader.Addr)),
	}
	for _, d := range h.ds {
		h.waitReady(d, http.StatusOK, haReadyTimeout)
	}

	h.firstMints()
	h.races()
	h.failover()
	h.unreachable()
	h.verify()

	fmt.Printf("ha-check: %d calls in %s\n", len(h.answers), time.Since(begin).Round(time.Second))
	for _, c := range h.checks {
		if !c.pass {
			t.Errorf("FAIL %s: %s", c.name, c.figure)
		}
	}
}

func (h *haRun) startDaemon(name string, addrs []string) *haDaemon {
	t := h.t
	cfg := configIn(t, "ha"+name+"-", filepath.Join("run", "r.sock"))
	r := &cfg.Registrar
	r.RateLimitAdmissionBurst = 100000
	r.RateLimitAdmissionRefillIntervalMS = 1
	r.MaintenanceIntervalMS = 200
	cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	cfg.OpenBao.RequestTimeoutMS = 3000
	cfg.OpenBao.ReadinessGraceMS = haGraceMS
	cfg.Registrar.Backend = config.BackendOpenBao
	cfg.OpenBao.Address = strings.Join(addrs, ", ")
	logger := slog.New(slog.NewTextHandler(haLogFile(t, name), &slog.HandlerOptions{Level: slog.LevelInfo}))
	run := launch(t, cfg, logger, seams{environ: func() []string { return []string{"BAO_TOKEN=" + h.cl.RootToken} }})
	d := &haDaemon{name: name, r: run, auditDir: cfg.Registrar.AuditRecordDir}
	deadline := time.Now().Add(haReadyTimeout)
	for run.d.MetricsAddr() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("registrar %s: no metrics listener after %s", name, haReadyTimeout)
		}
		select {
		case err := <-run.done:
			t.Fatalf("registrar %s stopped: %v", name, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	d.metrics = run.d.MetricsAddr().String()
	return d
}

// haLogFile is the registrar's log, kept beside the test's temporary
// files (printed on failure by path).
func haLogFile(t *testing.T, name string) io.Writer {
	f, err := os.Create(filepath.Join(t.TempDir(), "registrar-"+name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func (d *haDaemon) readyz() (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + d.metrics + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReady polls d's /readyz (every 100 ms, bounded) until it answers
// code, and returns how long that took and the last body.
func (h *haRun) waitReady(d *haDaemon, code int, limit time.Duration) (time.Duration, string, bool) {
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		c, body := d.readyz()
		if c == code {
			return time.Since(start), body, true
		}
		if time.Since(start) > limit {
			return time.Since(start), fmt.Sprintf("%d %s", c, body), false
		}
		<-tick.C
	}
}

// firstMints: every registration minted at once by three callers through
// each registrar.
func (h *haRun) firstMints() {
	ctx := context.Background()
	sem := make(chan struct{}, 5) // ids at once: 30 calls, within 2 × max_in_flight
	var wg sync.WaitGroup
	for i := range haFirstMintIDs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var inner sync.WaitGroup
			for _, d := range h.ds {
				for range 3 {
					inner.Go(func() { h.call(ctx, "first", d, "mint", fmt.Sprintf("fm%03d", i)) })
				}
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	firsts, other, retry := 0, 0, 0
	perID := map[string]int{}
	for _, a := range h.phase("first") {
		switch {
		case a.ok() && a.resp.Outcome == "first_mint":
			perID[a.id]++
			firsts++
		case a.ok():
		case a.retryable():
			retry++
		default:
			other++
		}
	}
	dup := 0
	for _, n := range perID {
		if n > 1 {
			dup++
		}
	}
	h.check("first mints: one first_mint answer per registration", dup == 0 && len(perID) == haFirstMintIDs,
		"%d registrations × 2 registrars × 3 callers; %d with a first_mint answer, %d with more than one", haFirstMintIDs, len(perID), dup)
	h.check("first mints: no error but the documented retryable ones", other == 0, "%d other errors, %d retryable (BackendUnavailable, RegistrarBusy)", other, retry)
}

// races: each id first minted, then a mint through one registrar against
// a deregister through the other.
func (h *haRun) races() {
	ctx := context.Background()
	for i := range haRaceIDs {
		host := fmt.Sprintf("rc%03d", i)
		for try := 0; try < 5; try++ {
			if h.call(ctx, "race-setup", h.ds[i%2], "mint", host).ok() {
				break
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range haRaceIDs {
		host := fmt.Sprintf("rc%03d", i)
		sem <- struct{}{}
		wg.Add(2)
		m, d := h.ds[i%2], h.ds[(i+1)%2]
		go func() { defer wg.Done(); h.call(ctx, "race", m, "mint", host) }()
		go func() { defer wg.Done(); defer func() { <-sem }(); h.call(ctx, "race", d, "deregister", host) }()
	}
	wg.Wait()
	other := 0
	for _, a := range h.phase("race") {
		if !a.ok() && !a.retryable() {
			other++
		}
	}
	h.check("races: no error but the documented retryable ones", other == 0, "%d mint-against-deregister races; %d other errors", haRaceIDs, other)
}

// failover: a mint stream through both registrars; the leader SIGKILLed
// haKills times, each time once both registrars minted; the time until
// each mints again; the killed node restarted before the next trial.
func (h *haRun) failover() {
	var times []time.Duration
	within := 0
	var readyz503 []string
	for trial := range haKills {
		leader := h.cl.WaitLeader(nil)
		rec, not503 := h.trial(trial, leader)
		times = append(times, rec)
		if rec <= haKillBound {
			within++
		}
		readyz503 = append(readyz503, not503)
		h.cl.Restart(leader)
	}
	parts := make([]string, len(times))
	for i, d := range times {
		parts[i] = d.Round(10 * time.Millisecond).String()
	}
	h.check("failover: mints succeed again within 15 s of a leader's SIGKILL", within >= haKillsInBound,
		"%d of %d trials (want ≥ %d); per trial (the later registrar): %s", within, haKills, haKillsInBound, strings.Join(parts, ", "))
	fmt.Printf("ha-check: /readyz 503 samples during each trial (a,b): %s\n", strings.Join(readyz503, "; "))
}

// trial runs one kill and returns when both registrars minted again (or
// haTrialTimeout passed): the later registrar's time from the kill to its
// first successful mint started after the kill, and /readyz's 503 samples.
func (h *haRun) trial(n int, leader *vaulttest.Server) (time.Duration, string) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	phase := fmt.Sprintf("kill%02d", n)
	var mu sync.Mutex
	okBefore := map[string]int{}
	var killedAt time.Time
	recovered := map[string]time.Duration{}
	after := map[string]int{}
	warm := make(chan struct{})
	done := make(chan struct{})
	var warmOnce, doneOnce sync.Once
	var wg sync.WaitGroup
	seq := 0
	for _, d := range h.ds {
		for c := range haStreamCallers {
			wg.Go(func() {
				pace := time.NewTicker(haStreamPace)
				defer pace.Stop()
				for ctx.Err() == nil {
					mu.Lock()
					seq++
					host := fmt.Sprintf("k%02d%s%d%04d", n, d.name, c, seq)
					mu.Unlock()
					a := h.call(context.Background(), phase, d, "mint", host)
					mu.Lock()
					switch {
					case killedAt.IsZero():
						if a.ok() {
							okBefore[d.name]++
						}
						if okBefore["a"] >= haWarmMints && okBefore["b"] >= haWarmMints {
							warmOnce.Do(func() { close(warm) })
						}
					case a.ok() && a.started.After(killedAt):
						if _, seen := recovered[d.name]; !seen {
							recovered[d.name] = a.answered.Sub(killedAt)
						}
						after[d.name]++
						if after["a"] >= haWarmMints && after["b"] >= haWarmMints {
							doneOnce.Do(func() { close(done) })
						}
					}
					// A registrar that minted again has shown it; its callers
					// stop, so a run stays a few hundred mints even while the
					// other one does not recover.
					finished := !killedAt.IsZero() && after[d.name] >= haWarmMints
					mu.Unlock()
					if finished {
						return
					}
					select {
					case <-pace.C:
					case <-ctx.Done():
					}
				}
			})
		}
	}
	samples := make([]string, len(h.ds))
	var sampler sync.WaitGroup
	for i, d := range h.ds {
		sampler.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			n503 := 0
			for ctx.Err() == nil {
				if c, _ := d.readyz(); c == http.StatusServiceUnavailable {
					n503++
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
			samples[i] = fmt.Sprint(n503)
		})
	}
	limit := time.NewTimer(haTrialTimeout)
	defer limit.Stop()
	select {
	case <-warm:
	case <-limit.C:
		h.t.Errorf("trial %d: the registrars did not both mint within %s before the kill", n, haTrialTimeout)
	}
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	h.cl.Kill(leader)
	select {
	case <-done:
	case <-limit.C:
	}
	stop()
	wg.Wait()
	sampler.Wait()
	mu.Lock()
	defer mu.Unlock()
	worst := time.Duration(0)
	for _, d := range h.ds {
		r, ok := recovered[d.name]
		if !ok {
			r = haTrialTimeout
		}
		worst = max(worst, r)
	}
	again := func(name string) string {
		if r, ok := recovered[name]; ok {
			return r.Round(10 * time.Millisecond).String()
		}
		return fmt.Sprintf("never within %s", haTrialTimeout)
	}
	fmt.Printf("ha-check: trial %d: killed %s; mints again after a %s, b %s\n", n+1, leader.Addr, again("a"), again("b"))
	return worst, strings.Join(samples, ",")
}

// unreachable: two of three nodes down (no quorum, no active node): both
// registrars' /readyz turns 503 and says why; the nodes back: 200 again
// and both mint, without a restart of either registrar.
func (h *haRun) unreachable() {
	leader := h.cl.WaitLeader(nil)
	var other *vaulttest.Server
	for _, s := range h.cl.Nodes {
		if s != leader {
			other = s
			break
		}
	}
	h.cl.Kill(leader)
	h.cl.Kill(other)
	down := time.Now()
	// A mint through each, so their requests see the failure (the probe
	// would too, within a quarter of the grace).
	for _, d := range h.ds {
		h.call(context.Background(), "unreachable", d, "mint", "un"+d.name+"001")
	}
	var figures []string
	all503 := true
	for _, d := range h.ds {
		_, body, ok := h.waitReady(d, http.StatusServiceUnavailable, haReadyTimeout)
		all503 = all503 && ok && strings.Contains(body, "openbao cluster unreachable")
		figures = append(figures, fmt.Sprintf("%s: 503 %s after the second node's kill (%q)", d.name, time.Since(down).Round(100*time.Millisecond), body))
	}
	h.check("readyz: 503 while the cluster is unreachable, saying why", all503, "grace %d ms; %s", haGraceMS, strings.Join(figures, "; "))

	h.cl.Restart(leader)
	h.cl.Restart(other)
	h.cl.WaitLeader(nil)
	figures = nil
	allBack := true
	for _, d := range h.ds {
		took, body, ok := h.waitReady(d, http.StatusOK, haReadyTimeout)
		a := h.call(context.Background(), "unreachable-after", d, "mint", "un"+d.name+"002")
		allBack = allBack && ok && a.ok()
		figures = append(figures, fmt.Sprintf("%s: 200 after %s (%q), mint %v", d.name, took.Round(100*time.Millisecond), body, a.ok()))
	}
	h.check("readyz: 200 again and minting once the cluster is back, without a restart", allBack, "%s", strings.Join(figures, "; "))
}

func (h *haRun) phase(p string) []haAnswer {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []haAnswer
	for _, a := range h.answers {
		if a.phase == p || (strings.HasSuffix(p, "*") && strings.HasPrefix(a.phase, strings.TrimSuffix(p, "*"))) {
			out = append(out, a)
		}
	}
	return out
}

// verify checks the registry, Vault and both audit stores together.
func (h *haRun) verify() {
	root := h.cl.Client()
	ctx := context.Background()
	roleID := map[string]string{} // registration id → Vault's role id ("" when no role)
	roleOf := func(id string) string {
		if r, ok := roleID[id]; ok {
			return r
		}
		s, err := root.Logical().ReadWithContext(ctx, "auth/approle/role/bootroot-service-"+id+"/role-id")
		r := ""
		if err == nil && s != nil {
			r, _ = s.Data["role_id"].(string)
		}
		roleID[id] = r
		return r
	}
	bindings := listKeys(ctx, root, "secret/metadata/registrar-otel/bindings")
	roles := map[string]bool{}
	for _, r := range listKeys(ctx, root, "auth/approle/role") {
		if id, ok := strings.CutPrefix(r, "bootroot-service-"); ok {
			roles[id] = true
		}
	}
	bound := map[string]bool{}
	for _, b := range bindings {
		bound[b] = true
	}

	// Each answered role id is the role's; each delivered secret id is
	// unwrapped and logged in with: at most one per registration logs in;
	// none of a registration a deregister removed.
	// A registration a deregister removed (no binding now) has no role:
	// its answered role id is gone by design, not lacking.
	//
	// An answered role id is the role's unless a deregister answered
	// removed that may have taken effect after that mint (it answered after
	// the mint started): the role is then gone, and any role now bound is a
	// later mint's. A race id's setup mint followed by its race's
	// deregister and its race's mint, in that order, is such a case.
	removedAfter := func(id string, t time.Time) bool {
		for _, d := range h.phase("*") {
			if d.verb == "deregister" && d.id == id && d.ok() && d.resp.Outcome == "removed" && d.answered.After(t) {
				return true
			}
		}
		return false
	}
	wrongRole, superseded, lost, streamMints := 0, 0, 0, 0
	var wrongWhy []string
	var lostWhy []string
	logins := map[string]int{}
	for _, a := range h.phase("*") {
		if a.verb != "mint" || !a.ok() || a.resp.Material == nil {
			continue
		}
		m := a.resp.Material
		got := roleOf(a.id)
		if got != m.RoleID && (got != "" || bound[a.id]) {
			if removedAfter(a.id, a.started) {
				superseded++
			} else {
				wrongRole++
				if len(wrongWhy) < 5 {
					wrongWhy = append(wrongWhy, fmt.Sprintf("%s (%s, %s): answered %s, the role's is %q", a.id, a.phase, a.daemon, m.RoleID, got))
				}
			}
		}
		why := loginWith(ctx, root, m)
		if why == "" {
			logins[a.id]++
		}
		if strings.HasPrefix(a.phase, "kill") {
			streamMints++
			if why == "" && got != m.RoleID {
				why = "the role's role id is not the answered one"
			}
			if why != "" {
				lost++
				if len(lostWhy) < 5 {
					lostWhy = append(lostWhy, a.id+": "+why)
				}
			}
		}
	}
	if len(lostWhy) > 0 {
		fmt.Printf("ha-check: lost mints, the first: %s\n", strings.Join(lostWhy, "; "))
	}
	multi, removedLive := 0, 0
	for id, n := range logins {
		if n > 1 {
			multi++
		}
		if !bound[id] {
			removedLive++
		}
	}
	orphanRoles, orphanBindings := 0, 0
	orphansBy := map[string]int{}
	for id := range roles {
		if !bound[id] {
			orphanRoles++
			orphansBy[id[:2]]++
		}
	}
	if orphanRoles > 0 {
		fmt.Printf("ha-check: orphan roles by id prefix (fm first mints, rc races, k kills, un no quorum): %v\n", orphansBy)
	}
	for id := range bound {
		if !roles[id] && bindingState(ctx, root, id) == "active" {
			orphanBindings++
		}
	}
	h.check("failover: no answered mint lost (in Vault, logging in)", lost == 0, "%d of %d mints answered during the kills lost", lost, streamMints)
	if len(wrongWhy) > 0 {
		fmt.Printf("ha-check: answered role ids not the role's, the first: %s\n", strings.Join(wrongWhy, "; "))
	}
	h.check("registry: every answered role id is the role's in Vault", wrongRole == 0, "%d answered role ids Vault does not have (%d others superseded: a deregister answered removed after their mint started)", wrongRole, superseded)
	h.check("registry: at most one delivered secret id logs in per registration", multi == 0, "%d registrations with more than one (of %d with a delivered secret id logging in)", multi, len(logins))
	h.check("registry: no live secret id of a removed registration", removedLive == 0, "%d registrations without a binding whose delivered secret id logs in", removedLive)
	h.check("registry: no orphan role or binding", orphanRoles == 0 && orphanBindings == 0, "%d roles without a binding, %d active bindings without a role (%d roles, %d bindings)", orphanRoles, orphanBindings, len(roles), len(bound))

	// One first_mint per registration across both audit stores (the race
	// ids may be first minted again after their deregister).
	firsts := map[string]int{}
	for _, d := range h.ds {
		for id, n := range firstMintRecords(h.t, d.auditDir) {
			firsts[id] += n
		}
	}
	dup := 0
	for id, n := range firsts {
		if n > 1 && !strings.HasPrefix(id, "rc") {
			dup++
		}
	}
	h.check("audit: one first_mint per registration across both stores", dup == 0, "%d registrations with more than one first_mint record (of %d)", dup, len(firsts))
}

func listKeys(ctx context.Context, c *api.Client, p string) []string {
	s, err := c.Logical().ListWithContext(ctx, p)
	if err != nil || s == nil {
		return nil
	}
	raw, _ := s.Data["keys"].([]any)
	out := make([]string, 0, len(raw))
	for _, k := range raw {
		if str, ok := k.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

func bindingState(ctx context.Context, c *api.Client, id string) string {
	s, err := c.KVv2("secret").Get(ctx, "registrar-otel/bindings/"+id)
	if err != nil || s == nil {
		return ""
	}
	st, _ := s.Data["state"].(string)
	return st
}

// loginWith unwraps a delivered secret id and logs in with it: "" when it
// logs in (it is then used up), else why not.
func loginWith(ctx context.Context, root *api.Client, m *wire.Material) string {
	c, err := root.Clone()
	if err != nil {
		return err.Error()
	}
	c.SetToken(m.WrappedSecretID)
	s, err := c.Logical().UnwrapWithContext(ctx, "")
	if err != nil || s == nil {
		return fmt.Sprintf("unwrap: %v", err)
	}
	sid, _ := s.Data["secret_id"].(string)
	c.SetToken("")
	l, err := c.Logical().WriteWithContext(ctx, "auth/approle/login", map[string]any{"role_id": m.RoleID, "secret_id": sid})
	if err != nil || l == nil || l.Auth == nil {
		return fmt.Sprintf("login: %v", err)
	}
	return ""
}

// firstMintRecords counts the first_mint outcome records per registration
// id in an audit directory.
func firstMintRecords(t *testing.T, dir string) map[string]int {
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Errorf("reading %s: %v", f, err)
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			var rec struct {
				Phase          string `json:"phase"`
				RegistrationID string `json:"registration_id"`
				Outcome        struct {
					Class string `json:"class"`
				} `json:"outcome"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Phase == "outcome" && rec.Outcome.Class == "first_mint" {
				out[rec.RegistrationID]++
			}
		}
		fh.Close()
	}
	return out
}
