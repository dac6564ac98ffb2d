package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/server"
)

// registrar.read_body_timeout_ms is in force from the start and changes on
// a reload (issue 41): the wire server's body deadline follows the file.
func TestReloadAppliesTheBodyTimeout(t *testing.T) {
	rr := startFromFile(t)
	if got := rr.d.server.ReadBodyTimeout(); got != server.DefaultReadBodyTimeout {
		t.Fatalf("body timeout %v at the start, want the default %v", got, server.DefaultReadBodyTimeout)
	}
	rr.write(t, reloadFile(rr.dir, startLimits+"read_body_timeout_ms = 1500\n", twoComponents), 0o600)
	changes, err := rr.d.Reload(context.Background())
	if err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if want := (config.Change{Key: "registrar.read_body_timeout_ms", Old: "3000", New: "1500", Live: true}); !slices.Equal(changes, []config.Change{want}) {
		t.Fatalf("changes %+v, want %+v", changes, want)
	}
	if got := rr.d.server.ReadBodyTimeout(); got != 1500*time.Millisecond {
		t.Fatalf("body timeout %v after the reload, want 1.5s", got)
	}
	if resp := rr.mustMint(t); !resp.OK() {
		t.Fatalf("mint after the reload: %+v", resp)
	}
}

// A daemon started with registrar.read_body_timeout_ms has its server's
// body deadline set to it.
func TestTheBodyTimeoutIsInForceFromTheStart(t *testing.T) {
	cfg := testConfig(t)
	cfg.Registrar.ReadBodyTimeoutMS = 1500
	r := start(t, cfg)
	if got := r.d.server.ReadBodyTimeout(); got != 1500*time.Millisecond {
		t.Fatalf("body timeout %v at the start, want 1.5s", got)
	}
}
