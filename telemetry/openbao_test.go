package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/internal/testing/metrictest"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// The OpenBao observer records each request's duration by operation and
// each failure by operation and kind, in the backend's scope; every error
// series exists at zero before the first failure, and an operation or kind
// out of range is ignored.
func TestOpenBaoObserverRecordsRequestsAndFailures(t *testing.T) {
	reader, mp := newReader(t)
	o := newObserver(t, mp, telemetry.NewOpenBaoObserver)
	got := metrictest.Collect(t, reader)
	zeros := 0
	for p, v := range got {
		if p.Name == telemetry.BackendRequestErrors && p.Scope == openbao.ScopeName && v == 0 {
			zeros++
		}
	}
	if want := openbao.NumOperations * openbao.NumKinds; zeros != want {
		t.Errorf("%d error series at zero before any failure, want %d (every operation × kind)", zeros, want)
	}
	ctx := context.Background()
	o.Request(ctx, openbao.OpBindingClaim, 3*time.Millisecond)
	o.Request(ctx, openbao.OpBindingClaim, 4*time.Millisecond)
	o.Failed(ctx, openbao.OpBindingClaim, openbao.KindTimeout)
	o.Request(ctx, openbao.Operation(openbao.NumOperations), time.Millisecond)
	o.Failed(ctx, openbao.Operation(openbao.NumOperations), openbao.KindTimeout)
	o.Failed(ctx, openbao.OpBindingClaim, openbao.Kind(0))
	o.Failed(ctx, openbao.OpBindingClaim, openbao.Kind(openbao.NumKinds+1))
	got = metrictest.Collect(t, reader)
	for _, tc := range []struct {
		p    metrictest.Point
		want int64
	}{
		{metrictest.At(openbao.ScopeName, telemetry.BackendRequestDuration, "backend", "openbao", "operation", "binding_claim"), 2},
		{metrictest.At(openbao.ScopeName, telemetry.BackendRequestErrors, "backend", "openbao", "kind", "timeout", "operation", "binding_claim"), 1},
		{metrictest.At(openbao.ScopeName, telemetry.BackendRequestErrors, "backend", "openbao", "kind", "transport", "operation", "binding_claim"), 0},
	} {
		if v, ok := got[tc.p]; !ok || v != tc.want {
			t.Errorf("%s{%s} = %d (present %v), want %d", tc.p.Name, tc.p.Attrs, v, ok, tc.want)
		}
	}
	for p := range got {
		if p.Name == telemetry.BackendRequestDuration && p.Attrs != metrictest.Attrs("backend", "openbao", "operation", "binding_claim") {
			t.Errorf("a duration series {%s} appeared, want only binding_claim's", p.Attrs)
		}
	}
}
