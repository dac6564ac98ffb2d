package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/server"
)

// The four keys of fair dispatch are in force from the start and change
// on a reload (issue 39): the wire server's gate follows the file.
func TestReloadAppliesTheFairDispatchKeys(t *testing.T) {
	rr := startFromFile(t)
	if got, want := rr.d.server.Fairness(), (server.Fairness{MaxInFlightPerIdentity: 64, SharedInFlight: 8, WaitTimeout: 2 * time.Second, RefusalPace: 25 * time.Millisecond}); got != want {
		t.Fatalf("fair dispatch %+v at the start, want the defaults %+v", got, want)
	}
	rr.write(t, reloadFile(rr.dir, startLimits+"max_in_flight_per_identity = 16\nshared_in_flight = 2\nwait_timeout_ms = 500\nrefusal_pace_ms = 100\n", twoComponents), 0o600)
	changes, err := rr.d.Reload(context.Background())
	if err != nil {
		t.Fatalf("Reload: %v", err)
	}
	want := []config.Change{
		{Key: "registrar.max_in_flight_per_identity", Old: "64", New: "16", Live: true},
		{Key: "registrar.shared_in_flight", Old: "8", New: "2", Live: true},
		{Key: "registrar.wait_timeout_ms", Old: "2000", New: "500", Live: true},
		{Key: "registrar.refusal_pace_ms", Old: "25", New: "100", Live: true},
	}
	if !slices.Equal(changes, want) {
		t.Fatalf("changes %+v, want %+v", changes, want)
	}
	if got, want := rr.d.server.Fairness(), (server.Fairness{MaxInFlightPerIdentity: 16, SharedInFlight: 2, WaitTimeout: 500 * time.Millisecond, RefusalPace: 100 * time.Millisecond}); got != want {
		t.Fatalf("fair dispatch %+v after the reload, want %+v", got, want)
	}
	if resp := rr.mustMint(t); !resp.OK() {
		t.Fatalf("mint after the reload: %+v", resp)
	}
}

// A daemon started with the keys set has its server's gate set to them.
func TestTheFairDispatchKeysAreInForceFromTheStart(t *testing.T) {
	cfg := testConfig(t)
	cfg.Registrar.MaxInFlightPerIdentity, cfg.Registrar.SharedInFlight, cfg.Registrar.WaitTimeoutMS, cfg.Registrar.RefusalPaceMS = 16, 2, 500, 0
	r := start(t, cfg)
	if got, want := r.d.server.Fairness(), (server.Fairness{MaxInFlightPerIdentity: 16, SharedInFlight: 2, WaitTimeout: 500 * time.Millisecond}); got != want {
		t.Fatalf("fair dispatch %+v at the start, want %+v", got, want)
	}
}
