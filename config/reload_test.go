package config

import (
	"slices"
	"strings"
	"testing"
)

func TestEveryKeyHasAReloadClass(t *testing.T) {
	for _, k := range Keys() {
		if c := ReloadClass(k); c != Live && c != RestartOnly {
			t.Errorf("ReloadClass(%q) = %q, want %q or %q", k, c, Live, RestartOnly)
		}
	}
}

func TestDiffNamesEveryChangedKeyWithItsClass(t *testing.T) {
	old := Default()
	new := old.Clone()
	new.Registrar.RateLimitAdmissionBurst = 64
	new.Registrar.SocketPath = "/run/other.sock"
	delete(new.Registrar.Components, "review")
	new.Telemetry.OTLPEndpoint = "https://user:secret@collector:4318/?k=v"
	got := Diff(old, new)
	want := []Change{
		{Key: "registrar.socket_path", Old: old.Registrar.SocketPath, New: "/run/other.sock"},
		{Key: "registrar.rate_limit_admission_burst", Old: "512", New: "64", Live: true},
		{Key: "registrar.components.<name>.multiplicity", Old: showComponents(old.Registrar.Components), New: showComponents(new.Registrar.Components), Live: true},
		{Key: "telemetry.otlp_endpoint", Old: "", New: "https://REDACTED@collector:4318/?REDACTED"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff = %+v\nwant %+v", got, want)
	}
	for _, c := range got {
		if strings.Contains(c.New, "secret") {
			t.Fatalf("a secret in the change of %s: %q", c.Key, c.New)
		}
	}
	if r := RestartOnlyChanges(got); !slices.Equal(r, []string{"registrar.socket_path", "telemetry.otlp_endpoint"}) {
		t.Fatalf("RestartOnlyChanges = %v", r)
	}
	if Diff(old, old.Clone()) != nil {
		t.Fatal("Diff of equal configurations is not empty")
	}
	if ReloadClass("registrar.rate_limit_coalesce_window_seconds") != Live || ReloadClass("registrar.backend") != RestartOnly || ReloadClass("nope") != "" {
		t.Fatal("ReloadClass misclassifies")
	}
}

// registrar.read_body_timeout_ms changes live (the server reads it as each
// request's headers end); the header timeout, net/http's own, needs a
// restart.
func TestTheBodyTimeoutReloadsLive(t *testing.T) {
	old := Default()
	new := old.Clone()
	new.Registrar.ReadBodyTimeoutMS = 1500
	got := Diff(old, new)
	want := []Change{{Key: "registrar.read_body_timeout_ms", Old: "3000", New: "1500", Live: true}}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff = %+v, want %+v", got, want)
	}
	if r := RestartOnlyChanges(got); len(r) != 0 {
		t.Fatalf("RestartOnlyChanges = %v, want none", r)
	}
	if ReloadClass("registrar.read_header_timeout_ms") != RestartOnly {
		t.Fatalf("registrar.read_header_timeout_ms is %q, want restart", ReloadClass("registrar.read_header_timeout_ms"))
	}
}

// The four keys of fair dispatch change live (the server's gate reads them
// as it hands out each seat): a reload that changes them restarts nothing.
func TestTheFairDispatchKeysReloadLive(t *testing.T) {
	old := Default()
	new := old.Clone()
	new.Registrar.MaxInFlightPerIdentity = 32
	new.Registrar.SharedInFlight = 4
	new.Registrar.WaitTimeoutMS = 500
	new.Registrar.RefusalPaceMS = 0
	got := Diff(old, new)
	want := []Change{
		{Key: "registrar.max_in_flight_per_identity", Old: "64", New: "32", Live: true},
		{Key: "registrar.shared_in_flight", Old: "8", New: "4", Live: true},
		{Key: "registrar.wait_timeout_ms", Old: "2000", New: "500", Live: true},
		{Key: "registrar.refusal_pace_ms", Old: "25", New: "0", Live: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff = %+v, want %+v", got, want)
	}
	if r := RestartOnlyChanges(got); len(r) != 0 {
		t.Fatalf("RestartOnlyChanges = %v, want none", r)
	}
}
