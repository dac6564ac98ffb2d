package telemetry_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/telemetry"
)

// TestSDKInfoAndWarningLinesNeverCarryASecret holds that the SDK's info
// and warning lines (logr's Info at V(0) and V(1)) are redacted like its
// errors: a URL's user-info and query, and quoted input, never reach the
// log.
func TestSDKInfoAndWarningLinesNeverCarryASecret(t *testing.T) {
	var out lockedBuffer
	d := telemetry.NewDiagnostics(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	l := d.Logger()
	l.Info("exporting to https://user:s3cretpw@collector:4318/v1/traces?token=s3crettoken", "endpoint", "s3cretvalue")
	l.V(1).Info(`header "authorization=Bearer s3cretbearer" ignored`)
	logged := out.String()
	if got := strings.Count(logged, "OpenTelemetry SDK"); got != 2 {
		t.Fatalf("%d SDK lines logged, want 2:\n%s", got, logged)
	}
	if !strings.Contains(logged, "level=INFO") || !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "collector:4318/v1/traces") {
		t.Errorf("the lines lost their level or the endpoint's host:\n%s", logged)
	}
	if strings.Contains(logged, "s3cret") || strings.Contains(logged, "Bearer") {
		t.Errorf("an SDK info or warning line carries a secret:\n%s", logged)
	}
}
