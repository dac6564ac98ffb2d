package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadyzAnswers503WhileTheOpenBaoClusterIsUnreachableAndSaysWhy runs
// the daemon on the openbao backend against a loopback stand-in for the
// cluster that answers, then is sealed, then answers again: /readyz is 200,
// then 503 naming the node and the server's answer once the failures
// outlast openbao.readiness_grace_ms, then 200 after the next answer.
func TestReadyzAnswers503WhileTheOpenBaoClusterIsUnreachableAndSaysWhy(t *testing.T) {
	t.Parallel()
	var sealed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if sealed.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"errors":["Vault is sealed"]}`)
			return
		}
		_, _ = io.WriteString(w, `{"data":{"ttl":3600,"creation_ttl":3600,"renewable":true}}`)
	}))
	defer srv.Close()
	cfg := testConfig(t)
	cfg.OpenBao.ReadinessGraceMS = 1
	r := startOnOpenBao(t, cfg, srv.URL, "test-token")
	body := func() (int, string) {
		rec := httptest.NewRecorder()
		r.d.tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	for start := time.Now(); ; {
		c, b := body()
		if c == http.StatusOK {
			break
		}
		if b != "starting\n" || time.Since(start) > 5*time.Second {
			t.Fatalf("/readyz before any failure: %d %q, want 200 once serving", c, b)
		}
	}

	sealed.Store(true)
	if resp, err := r.client.Mint(context.Background(), mint("review")); err != nil || resp.OK() {
		t.Fatalf("mint on a sealed server: %+v, %v; want a refusal", resp, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, b := body()
		if c == http.StatusServiceUnavailable {
			if !strings.Contains(b, "openbao cluster unreachable") || !strings.Contains(b, "Vault is sealed") || !strings.Contains(b, srv.Listener.Addr().String()) {
				t.Fatalf("/readyz body %q: want why (unreachable, the node, its answer)", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %q 5 s after the failure, want 503 past the 1 ms grace", c, b)
		}
	}
	r.tick()
	if s := r.d.status(); !strings.Contains(s, "not ready: openbao cluster unreachable") {
		t.Errorf("STATUS= %q, want it to say the daemon is not ready and why", s)
	}

	sealed.Store(false)
	if err := r.d.backend.(tokenChecker).CheckToken(context.Background(), time.Now(), true); err != nil {
		t.Fatalf("token lookup on the answering server: %v", err)
	}
	if c, b := body(); c != http.StatusOK {
		t.Fatalf("/readyz after the server answered: %d %q, want 200", c, b)
	}
}
