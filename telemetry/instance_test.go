package telemetry_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/telemetry"
)

// TestInstanceIDTakesTheKeyThenTheEnvironmentThenTheDerivedDefault: the
// configured key wins over OTEL_RESOURCE_ATTRIBUTES, which wins over
// <host name>:<absolute state_dir>; with none of the three, no id.
func TestInstanceIDTakesTheKeyThenTheEnvironmentThenTheDerivedDefault(t *testing.T) {
	host, _ := os.Hostname()
	abs, _ := filepath.Abs("var/lib")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "OTEL_RESOURCE_ATTRIBUTES" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name, configured, stateDir, attrs string
		wantID, wantFrom                  string
	}{
		{"key", "reg-a", "var/lib", "service.instance.id=from-env", "reg-a", telemetry.InstanceIDFromConfig},
		{"environment", "", "var/lib", "deployment.environment=prod,service.instance.id=reg%20b", "reg b", telemetry.InstanceIDFromEnv},
		{"environment, last of two", "", "var/lib", "service.instance.id=x,service.instance.id=y", "y", telemetry.InstanceIDFromEnv},
		{"environment without the attribute", "", "var/lib", "deployment.environment=prod", host + ":" + abs, telemetry.InstanceIDFromDerived},
		{"environment with a malformed value", "", "var/lib", "service.instance.id=%zz", host + ":" + abs, telemetry.InstanceIDFromDerived},
		{"derived", "", "var/lib", "", host + ":" + abs, telemetry.InstanceIDFromDerived},
		{"derived, absolute", "", "/srv/registrar/../registrar/state", "", host + ":/srv/registrar/state", telemetry.InstanceIDFromDerived},
		{"none (a client-side tool)", "", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, from := telemetry.InstanceID(tc.configured, tc.stateDir, env(tc.attrs))
			if id != tc.wantID || from != tc.wantFrom {
				t.Errorf("InstanceID(%q, %q, %q) = %q from %q, want %q from %q", tc.configured, tc.stateDir, tc.attrs, id, from, tc.wantID, tc.wantFrom)
			}
		})
	}
}

// TestTargetInfoCarriesTheServiceInstanceID: the Prometheus endpoint's
// target_info shows the daemon's service.instance.id, so two registrars
// of one service.name are two series; with none (a tool), no label.
func TestTargetInfoCarriesTheServiceInstanceID(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name  string
		key   string
		state string
		want  string
	}{
		{"derived", "", dir, `service_instance_id="` + host + ":" + dir + `"`},
		{"configured", "registrar-eu1-a", dir, `service_instance_id="registrar-eu1-a"`},
		{"none", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ServiceInstanceID = tc.key
			tel := newTelemetry(t, cfg, telemetry.Options{StateDir: tc.state, Getenv: noEnv})
			body, _ := scrape(t, tel.Handler(), "/metrics", "")
			var info string
			for line := range strings.Lines(body) {
				if strings.HasPrefix(line, "target_info{") {
					info = line
				}
			}
			if info == "" {
				t.Fatalf("no target_info in the exposition:\n%s", body)
			}
			if tc.want == "" {
				if strings.Contains(info, "service_instance_id") {
					t.Errorf("target_info = %s, want no service_instance_id", info)
				}
				return
			}
			if !strings.Contains(info, tc.want) {
				t.Errorf("target_info = %s, want it to carry %s", info, tc.want)
			}
		})
	}
}
