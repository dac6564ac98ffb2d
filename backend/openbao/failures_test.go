package openbao_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// errorCount sums registrar.backend.request.errors{kind} over operations.
func errorCount(t *testing.T, reader *sdkmetric.ManualReader, kind string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "registrar.backend.request.errors" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if k, _ := dp.Attributes.Value("kind"); k.AsString() == kind {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// lastOutcome is the outcome record of the invocation with request id id.
func lastOutcome(t *testing.T, h *verbsHarness, id string) *audit.Outcome {
	t.Helper()
	for _, r := range h.log.Records() {
		if r.Phase == audit.PhaseOutcome && r.RequestID == id {
			return r.Outcome
		}
	}
	t.Fatalf("no outcome recorded for %s", id)
	return nil
}

// A sealed server: every mint answers RegistrarUnavailable
// BackendUnavailable (the wire's 503), its refused backend_unavailable
// outcome is recorded as a clean refusal (the first request, the binding
// read, failed: nothing was half-made), the errors metric counts
// server_error, and the server holds nothing for the id. Unsealing recovers
// without a new backend: the same mint is the first mint.
func TestASealedServerRefusesEveryMintCleanlyAndUnsealRecovers(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := newEnv(t, envOptions{persistent: true, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	h := newVerbs(t, e.b, 64, nil)
	ctx := context.Background()
	e.srv.Seal()
	for i := range 3 {
		_, err := h.v.Mint(ctx, mintRequest("h1", 1))
		ue, ok := errors.AsType[*registrar.UnavailableError](err)
		if !ok || ue.Reason != registrar.BackendUnavailable {
			t.Fatalf("mint %d on a sealed server: %v, want RegistrarUnavailable BackendUnavailable", i, err)
		}
		if re, ok := errors.AsType[*openbao.RequestError](err); !ok || re.Kind != openbao.KindServer || re.Status != 503 {
			t.Errorf("mint %d: cause %v, want a 503 server_error", i, err)
		}
		o := lastOutcome(t, h, ue.RequestID)
		if o.Class != vocab.ClassRefused || o.Reason != vocab.ReasonBackendUnavailable || strings.HasPrefix(o.Detail, "partial:") {
			t.Errorf("mint %d: outcome %+v, want a clean refused backend_unavailable", i, o)
		}
	}
	if got := errorCount(t, reader, "server_error"); got != 3 {
		t.Errorf("errors{kind=server_error} = %d, want 3", got)
	}
	e.srv.Unseal()
	if inv := e.inventory(t); len(inv.policies)+len(inv.roles)+len(inv.bindings) != 0 {
		t.Errorf("after the sealed mints the server holds %+v, want nothing", inv)
	}
	res, err := h.v.Mint(ctx, mintRequest("h1", 1))
	if err != nil || res.Outcome != registrar.FirstMint {
		t.Fatalf("after unseal: %+v, %v; want first_mint", res, err)
	}
	if inv := e.inventory(t); len(inv.policies) != 0 || len(inv.roles) != 1 || len(inv.bindings) != 1 {
		t.Errorf("after unseal the server holds %+v, want one role and binding, and no policy", inv)
	}
}

// The token's policy removed: a mint fails client_error (403), recorded as
// a clean refusal (the binding read was refused) and counted, and nothing is
// made; restoring the policy recovers.
func TestATokenThatLostItsPolicyFailsAsClientError(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := newEnv(t, envOptions{
		tokenPolicy: documentedPolicy,
		mp:          sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	h := newVerbs(t, e.b, 64, nil)
	ctx := context.Background()
	policy, err := e.root.Sys().GetPolicy("registrar-otel")
	if err != nil || policy == "" {
		t.Fatalf("reading the token's policy: %q, %v", policy, err)
	}
	if err := e.root.Sys().DeletePolicy("registrar-otel"); err != nil {
		t.Fatal(err)
	}
	_, err = h.v.Mint(ctx, mintRequest("h1", 1))
	ue, ok := errors.AsType[*registrar.UnavailableError](err)
	if !ok || ue.Reason != registrar.BackendUnavailable {
		t.Fatalf("mint without the policy: %v, want RegistrarUnavailable BackendUnavailable", err)
	}
	if re, ok := errors.AsType[*openbao.RequestError](err); !ok || re.Kind != openbao.KindClient || re.Status != 403 {
		t.Errorf("cause %v, want a 403 client_error", err)
	}
	if o := lastOutcome(t, h, ue.RequestID); o.Class != vocab.ClassRefused || o.Reason != vocab.ReasonBackendUnavailable || strings.HasPrefix(o.Detail, "partial:") {
		t.Errorf("outcome %+v, want a clean refused backend_unavailable", o)
	}
	if got := errorCount(t, reader, "client_error"); got != 1 {
		t.Errorf("errors{kind=client_error} = %d, want 1", got)
	}
	if inv := e.inventory(t); len(inv.policies)+len(inv.roles)+len(inv.bindings) != 0 {
		t.Errorf("the server holds %+v, want nothing", inv)
	}
	if err := e.root.Sys().PutPolicy("registrar-otel", policy); err != nil {
		t.Fatal(err)
	}
	if res, err := h.v.Mint(ctx, mintRequest("h1", 1)); err != nil || res.Outcome != registrar.FirstMint {
		t.Errorf("after the policy is restored: %+v, %v; want first_mint", res, err)
	}
}
