package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// startOnOpenBao runs a daemon of cfg on the openbao backend at address,
// token in its environment as BAO_TOKEN (the process's is not touched, so
// such tests may run in parallel).
func startOnOpenBao(t *testing.T, cfg config.Config, address, token string) *running {
	t.Helper()
	cfg.Registrar.Backend = config.BackendOpenBao
	cfg.OpenBao.Address = address
	return launch(t, cfg, nil, seams{environ: func() []string { return []string{"BAO_TOKEN=" + token} }})
}

func scrape(t *testing.T, d *Daemon) string {
	t.Helper()
	resp, err := http.Get("http://" + d.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestTheDaemonMintsOnOpenBaoAndShowsItsFailuresInTheMetrics runs the
// whole daemon on the openbao backend against a real Vault server: a mint
// over the socket, then the server gone and the next mint answered
// BackendUnavailable, each visible on /metrics.
func TestTheDaemonMintsOnOpenBaoAndShowsItsFailuresInTheMetrics(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	srv := vaulttest.StartDev(t)
	cfg := testConfig(t)
	cfg.OpenBao.RequestTimeoutMS = 2000
	cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	r := startOnOpenBao(t, cfg, srv.Addr, srv.RootToken)
	ctx := context.Background()
	resp, err := r.client.Mint(ctx, mint("review"))
	if err != nil || !resp.OK() || resp.Outcome != "first_mint" || resp.Material == nil || resp.Material.RoleID == "" {
		t.Fatalf("mint on openbao: %+v, %v", resp, err)
	}
	// The role id is the server's.
	rid, err := srv.Client().Logical().Read("auth/approle/role/bootroot-service-h1-review-001/role-id")
	if err != nil || rid == nil || rid.Data["role_id"] != resp.Material.RoleID {
		t.Errorf("the server's role id %v (%v), the answer's %q", rid, err, resp.Material.RoleID)
	}
	m := scrape(t, r.d)
	for _, want := range []string{
		`registrar_backend_request_duration_seconds_count{backend="openbao",operation="binding_claim"`,
		`registrar_backend_request_errors_total{backend="openbao",kind="timeout",operation="binding_read"`,
		`registrar_backend_partial_total{verb="mint"`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	srv.Kill()
	resp, err = r.client.Mint(ctx, mint("review"))
	if err != nil || resp.ErrorID != wire.RegistrarUnavailable || resp.Reason != "BackendUnavailable" || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("mint with the server gone: %+v, %v; want 503 RegistrarUnavailable BackendUnavailable", resp, err)
	}
	m = scrape(t, r.d)
	for _, want := range []string{
		`registrar_backend_request_errors_total{backend="openbao",kind="transport",operation="binding_read"} 1`,
		`registrar_invocations_total{result="unavailable",verb="mint"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(m, srv.RootToken) {
		t.Error("/metrics contains the token")
	}
}

// faultAnswerMargin is the margin documented in docs/en/openbao.md#failures:
// a mint whose server stops answering one request is answered within
// openbao.request_timeout_ms plus this.
const faultAnswerMargin = time.Second

// TestAServerThatStopsAnsweringIsAnsweredWithinTheTimeoutOverTheSocket runs
// the whole daemon on openbao through a loopback proxy in front of a real
// server: one mint's role write is applied and its answer held, another's
// every request is applied and its connection dropped at once, a third's
// held and then dropped. Each caller is
// answered 503 RegistrarUnavailable / BackendUnavailable over the socket
// within request_timeout_ms plus the documented margin; the audit store
// holds each intent and its refused backend_unavailable outcome (partial
// for the held role write, clean for the failed binding reads); /metrics
// counts the timeouts and the transport failure by operation; the server
// holds no policy or role without a binding; and the retry of the partial
// mint is its first_mint.
func TestAServerThatStopsAnsweringIsAnsweredWithinTheTimeoutOverTheSocket(t *testing.T) {
	srv := vaulttest.StartDev(t)
	px := vaulttest.NewProxy(t, srv.Addr)
	const timeout = 500 * time.Millisecond
	cfg := testConfig(t)
	cfg.OpenBao.RequestTimeoutMS = uint32(timeout / time.Millisecond)
	cfg.Registrar.RateLimitAdmissionBurst = 16 // testConfig's 3 would throttle the retry
	cfg.Telemetry.MetricsListen = "127.0.0.1:0"
	r := startOnOpenBao(t, cfg, px.URL, srv.RootToken)
	ctx := context.Background()

	mintN := func(instance uint32) (*wire.Response, time.Duration) {
		t.Helper()
		req := mint("review")
		req.Instance = instance
		start := time.Now()
		resp, err := r.client.Mint(ctx, req)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("mint %d: %v", instance, err)
		}
		return resp, elapsed
	}
	unavailable := func(name string, resp *wire.Response, elapsed time.Duration) {
		t.Helper()
		t.Logf("%s: answered %d %s/%s after %s (request_timeout_ms %s)", name, resp.StatusCode, resp.ErrorID, resp.Reason,
			elapsed.Round(time.Millisecond), timeout)
		if resp.ErrorID != wire.RegistrarUnavailable || resp.Reason != "BackendUnavailable" || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: %d %s %s, want 503 RegistrarUnavailable BackendUnavailable", name, resp.StatusCode, resp.ErrorID, resp.Reason)
		}
		if elapsed > timeout+faultAnswerMargin {
			t.Errorf("%s: answered after %s, want within request_timeout_ms + margin = %s", name, elapsed, timeout+faultAnswerMargin)
		}
	}

	if resp, _ := mintN(1); !resp.OK() || resp.Outcome != "first_mint" {
		t.Fatalf("clean mint: %d %s %s", resp.StatusCode, resp.ErrorID, resp.Outcome)
	}

	// The role write of instance 2 reaches the server; its answer never
	// comes back in time.
	held := px.Add(vaulttest.Rule{Method: "PUT", Path: "/v1/auth/approle/role/bootroot-service-h1-review-002", Nth: 1,
		Fault: vaulttest.Delay, Hold: 10 * timeout})
	heldResp, elapsed := mintN(2)
	unavailable("held role write", heldResp, elapsed)
	if elapsed < timeout {
		t.Errorf("held role write: answered after %s, before request_timeout_ms", elapsed)
	}
	<-held.Fired()
	px.Reset()

	// A dead network for instance 3: every connection closed unanswered.
	px.Add(vaulttest.Rule{Fault: vaulttest.Drop})
	dropResp, elapsed := mintN(3)
	unavailable("dropped connections", dropResp, elapsed)
	px.Reset()

	// A network that swallows requests: every one held unanswered, then its
	// connection closed.
	px.Add(vaulttest.Rule{Fault: vaulttest.Drop, Hold: 10 * timeout})
	swallowResp, elapsed := mintN(4)
	unavailable("held, then dropped", swallowResp, elapsed)
	if elapsed < timeout {
		t.Errorf("held, then dropped: answered after %s, before request_timeout_ms", elapsed)
	}
	px.Reset()

	// The records.
	recs := storeRecords(t, cfg.Registrar.AuditRecordDir)
	for _, c := range []struct {
		resp    *wire.Response
		partial bool
	}{{heldResp, true}, {dropResp, false}, {swallowResp, false}} {
		var phases []audit.Phase
		var outcome *audit.Outcome
		for _, rec := range recs {
			if rec.RequestID == c.resp.RequestID {
				phases = append(phases, rec.Phase)
				if rec.Phase == audit.PhaseOutcome {
					outcome = rec.Outcome
				}
			}
		}
		if !slices.Equal(phases, []audit.Phase{audit.PhaseIntent, audit.PhaseOutcome}) || outcome == nil {
			t.Fatalf("records of %s: %v, want an intent and an outcome", c.resp.RequestID, phases)
		}
		if outcome.Class != vocab.ClassRefused || outcome.Reason != vocab.ReasonBackendUnavailable ||
			strings.HasPrefix(outcome.Detail, "partial:") != c.partial {
			t.Errorf("outcome of %s: %+v, want refused backend_unavailable, partial %v", c.resp.RequestID, outcome, c.partial)
		}
	}

	// The metrics.
	m := scrape(t, r.d)
	for _, want := range []string{
		`registrar_backend_request_errors_total{backend="openbao",kind="timeout",operation="role_write"} 1`,
		`registrar_backend_request_errors_total{backend="openbao",kind="transport",operation="binding_read"} 1`,
		`registrar_backend_request_errors_total{backend="openbao",kind="timeout",operation="binding_read"} 1`,
		`registrar_backend_partial_total{verb="mint"} 1`,
		`registrar_invocations_total{result="unavailable",verb="mint"} 3`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The server: no policy or role without a binding, and nothing at all
	// for the clean refusal.
	root := srv.Client()
	list := func(p string) []string {
		s, err := root.Logical().List(p)
		if err != nil {
			t.Fatalf("LIST %s: %v", p, err)
		}
		var out []string
		if s != nil {
			for _, k := range s.Data["keys"].([]any) {
				out = append(out, strings.TrimPrefix(k.(string), "bootroot-service-"))
			}
		}
		return out
	}
	bindings := list("secret/metadata/registrar-otel/bindings")
	policies, err := root.Sys().ListPolicies()
	if err != nil {
		t.Fatal(err)
	}
	var owned []string
	for _, p := range policies {
		if id, ok := strings.CutPrefix(p, "bootroot-service-"); ok {
			owned = append(owned, id)
		}
	}
	owned = append(owned, list("auth/approle/role")...)
	for _, id := range owned {
		if !slices.Contains(bindings, id) {
			t.Errorf("%s has a policy or role and no binding (bindings %v)", id, bindings)
		}
	}
	if slices.Contains(bindings, "h1-review-003") || slices.Contains(bindings, "h1-review-004") {
		t.Errorf("a clean refusal left a binding: %v", bindings)
	}

	// The retry of the partial mint completes it.
	if resp, _ := mintN(2); !resp.OK() || resp.Outcome != "first_mint" {
		t.Errorf("retry of the held mint: %d %s %s, want first_mint", resp.StatusCode, resp.ErrorID, resp.Outcome)
	}
}

// rssBytes is the process's resident set size (VmRSS), 0 if unknown.
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestBulkheadLoadAgainstAHangingServer is the bounded load test of the
// bulkhead (openbao.max_in_flight, docs/en/openbao.md#bulkhead): 500
// concurrent admitted mints over the socket against a loopback OpenBao
// that accepts every request and never answers. At most max_in_flight (16)
// reach the server; every other mint is answered BackendUnavailable while
// the server still hangs, /v1/health and throttled callers are answered
// meanwhile, and the figures (latencies, RSS) are printed. Bounded by
// request_timeout_ms: the held mints time out at 30 s if the test fails
// before releasing them (long enough that a loaded machine's slow audit
// appends never let them time out before the measurements). The RSS bound (128 MiB of growth) is checked
// without the race detector, which multiplies memory use.
func TestBulkheadLoadAgainstAHangingServer(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const mints = 500
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	var inFlight, maxSeen, total atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/auth/token/lookup-self" {
			// The daemon's token lookup at start: a token that never
			// expires. Only the mints' requests hang.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"data":{"ttl":0,"creation_ttl":0,"renewable":false}}`)
			return
		}
		if r.Method == "LIST" || r.URL.Query().Get("list") == "true" {
			// The daemon's count of the registrations at start: none.
			w.WriteHeader(http.StatusNotFound)
			return
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
		}
		total.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"errors":["Vault is sealed"]}`)
	}))
	t.Cleanup(func() { unblock(); srv.Close() })

	cfg := testConfig(t)
	cfg.OpenBao.RequestTimeoutMS = 30_000
	cfg.Registrar.RateLimitAdmissionBurst = mints
	cfg.Registrar.UnixMaxConns = 1024
	cfg.Registrar.MaxConnsPerIdentity = 1024
	r := startOnOpenBao(t, cfg, srv.URL, "hvs.load-test-token")
	slots := int64(cfg.OpenBao.MaxInFlight)
	if slots == 0 || slots >= int64(config.Default().Registrar.UnixMaxConns) {
		t.Fatalf("openbao.max_in_flight default %d is not below the listener cap", slots)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rss0 := rssBytes()
	type answer struct {
		resp    *wire.Response
		err     error
		elapsed time.Duration
	}
	answers := make(chan answer, mints)
	client := wire.NewUnixClient(cfg.Registrar.SocketPath)
	for i := range mints {
		go func() {
			req := mint("review")
			req.Host = fmt.Sprintf("load-%03d", i)
			start := time.Now()
			resp, err := client.Mint(ctx, req)
			answers <- answer{resp, err, time.Since(start)}
		}()
	}
	var early []time.Duration
	var rssPeak int64
	for len(early) < mints-int(slots) {
		a := <-answers
		if a.err != nil || a.resp.ErrorID != wire.RegistrarUnavailable || a.resp.Reason != "BackendUnavailable" {
			t.Fatalf("a mint answered %+v, %v while the server hangs; want RegistrarUnavailable BackendUnavailable", a.resp, a.err)
		}
		early = append(early, a.elapsed)
		rssPeak = max(rssPeak, rssBytes())
	}
	// The server still holds the admitted mints that got a slot.
	if got := inFlight.Load(); got > slots {
		t.Errorf("%d requests in flight at the server, want at most %d", got, slots)
	}

	// Health and throttled callers, meanwhile.
	var health, busy []time.Duration
	for range 20 {
		start := time.Now()
		resp, err := r.client.Health(ctx)
		health = append(health, time.Since(start))
		if err != nil || !resp.OK() {
			t.Fatalf("/v1/health while the server hangs: %+v, %v", resp, err)
		}
	}
	for i := range 20 {
		req := mint("review")
		req.Host = fmt.Sprintf("busy-%02d", i)
		start := time.Now()
		resp, err := r.client.Mint(ctx, req)
		busy = append(busy, time.Since(start))
		if err != nil || resp.ErrorID != wire.RegistrarBusy {
			t.Fatalf("a mint past the admission burst: %+v, %v; want RegistrarBusy", resp, err)
		}
	}
	stillHeld := inFlight.Load()
	rssPeak = max(rssPeak, rssBytes())
	unblock()
	var held []time.Duration
	for range slots {
		a := <-answers
		if a.err != nil || a.resp.ErrorID != wire.RegistrarUnavailable {
			t.Errorf("a held mint answered %+v, %v; want RegistrarUnavailable", a.resp, a.err)
		}
		held = append(held, a.elapsed)
	}
	if stillHeld == 0 {
		t.Error("the server held no request while health and throttled callers were measured: nothing was measured under load")
	}
	if got := maxSeen.Load(); got > slots {
		t.Errorf("the server saw %d requests at once, want at most %d", got, slots)
	}
	if got := total.Load(); got != slots {
		t.Errorf("the server saw %d requests in all, want %d (one binding_read per admitted slot)", got, slots)
	}
	t.Logf("bulkhead load: %d concurrent mints, max_in_flight %d, server hanging", mints, slots)
	t.Logf("  refused a slot: %d mints, p50 %v, p99 %v, max %v", len(early), percentile(early, 0.5), percentile(early, 0.99), percentile(early, 1))
	t.Logf("  /v1/health meanwhile: p50 %v, max %v (target < 100ms)", percentile(health, 0.5), percentile(health, 1))
	t.Logf("  throttled (RegistrarBusy) meanwhile: p50 %v, max %v", percentile(busy, 0.5), percentile(busy, 1))
	t.Logf("  held by the server until released: %d mints, max %v", len(held), percentile(held, 1))
	t.Logf("  test process RSS: %.1f MiB before, %.1f MiB peak (+%.1f MiB)", float64(rss0)/(1<<20), float64(rssPeak)/(1<<20), float64(rssPeak-rss0)/(1<<20))
	if rss0 > 0 && !raceEnabled && rssPeak-rss0 > 128<<20 {
		t.Errorf("RSS grew by %d MiB under the load, more than the documented 128 MiB", (rssPeak-rss0)>>20)
	}
}

// On a real OpenBao/Vault server: a caller whose policy scopes it to the
// review service asks to mint the payments service (whose role would carry
// payments' policy). It is refused out_of_scope before the backend: the
// server holds no role and no binding for it, so no secret id of it can
// ever read payments' secret; the same caller's in-scope mint is written.
func TestAnOutOfScopeServiceIsNeverWrittenToOpenBao(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	srv := vaulttest.StartDev(t)
	cfg := testConfig(t)
	cfg.OpenBao.RequestTimeoutMS = 2000
	cfg.Registrar.Callers = []config.CallerPolicy{{Name: "agents", IdentityPrefixes: []string{"registrar-client:"},
		Sizes: cfg.Registrar.DefaultSizes(), Scope: callers.ScopeSpec{Services: []string{"review"}}}}
	r := startOnOpenBao(t, cfg, srv.Addr, srv.RootToken)
	ctx := context.Background()
	call := func(service string, instance uint32) error {
		_, err := r.d.verbs.Mint(ctx, registrar.MintRequest{
			CallerIdentity: "registrar-client:dns:h1.example.org", ServiceName: service, Host: "h1", Instance: instance, Component: "review",
			Spec: registrar.Spec{Component: "review", ServiceName: service}, WrapTTLSeconds: 60,
		})
		return err
	}
	var ref *registrar.RefusedError
	if err := call("payments", 1); !errors.As(err, &ref) || ref.Reason != vocab.ReasonOutOfScope || ref.Scope != vocab.ScopeService {
		t.Fatalf("mint of payments: %v, want out_of_scope (service)", err)
	}
	for _, path := range []string{"auth/approle/role/bootroot-service-h1-review-001", "secret/data/registrar-otel/bindings/h1-review-001"} {
		if s, err := srv.Client().Logical().Read(path); err != nil || s != nil {
			t.Fatalf("the server holds %s after the refused mint: %v, %v", path, s, err)
		}
	}
	if err := call("review", 2); err != nil {
		t.Fatalf("the in-scope mint: %v", err)
	}
	for _, path := range []string{"auth/approle/role/bootroot-service-h1-review-002", "secret/data/registrar-otel/bindings/h1-review-002"} {
		if s, err := srv.Client().Logical().Read(path); err != nil || s == nil {
			t.Fatalf("the in-scope mint's %s is not on the server: %v, %v", path, s, err)
		}
	}
}
