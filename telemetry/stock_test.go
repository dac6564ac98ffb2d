package telemetry_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestStockInstrumentsExportLiveRegistrationsCeilingsAndRefusals(t *testing.T) {
	reader, mp := newReader(t)
	st := telemetry.StockStats{Components: []telemetry.ComponentStock{
		{Component: "edge-proxy", Live: 12},
		{Component: "review", Live: 40, BusiestHost: 7, Ceiling: 8},
	}}
	st.Refusals[vocab.Mint][0] = 3       // no_policy
	st.Refusals[vocab.Deregister][2] = 5 // not_owner
	if err := telemetry.RegisterStock(mp, func() telemetry.StockStats { return st }); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	if p := points(t, got[telemetry.Registrations]); len(p) != 2 || p["component=edge-proxy"] != 12 || p["component=review"] != 40 {
		t.Fatalf("registrations %v, want edge-proxy 12 and review 40", p)
	}
	if p := points(t, got[telemetry.RegistrationsBusiestHost]); len(p) != 2 || p["component=review"] != 7 || p["component=edge-proxy"] != 0 {
		t.Fatalf("busiest host %v, want review 7 and edge-proxy 0", p)
	}
	if p := points(t, got[telemetry.RegistrationsCeiling]); len(p) != 1 || p["component=review"] != 8 {
		t.Fatalf("ceilings %v, want review 8 only (edge-proxy has none)", p)
	}
	p := points(t, got[telemetry.AuthorizationRefusals])
	if len(p) != 2*len(telemetry.AuthorizationReasons) || p["reason=no_policy,verb=mint"] != 3 || p["reason=not_owner,verb=deregister"] != 5 || p["reason=instance_ceiling,verb=mint"] != 0 {
		t.Fatalf("refusals %v, want every (verb, reason) with mint/no_policy 3 and deregister/not_owner 5", p)
	}
	for _, name := range []string{telemetry.Registrations, telemetry.RegistrationsBusiestHost, telemetry.RegistrationsCeiling, telemetry.AuthorizationRefusals} {
		if got[name].Description == "" || got[name].Unit == "" {
			t.Errorf("%s has no description or unit", name)
		}
	}
	if err := telemetry.RegisterStock(mp, nil); err == nil {
		t.Error("RegisterStock(nil stats) succeeded")
	}
}
