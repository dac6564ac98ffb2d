package daemon

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// storeRecords reads every record of the audit store in dir.
func storeRecords(t *testing.T, dir string) []*audit.Record {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []*audit.Record
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			r, err := audit.Unmarshal(bytes.TrimSuffix(line, []byte("\n")))
			if err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			out = append(out, r)
		}
	}
	return out
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
		if outcome.Class != audit.ClassRefused || outcome.Reason != audit.ReasonBackendUnavailable ||
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
