package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
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
