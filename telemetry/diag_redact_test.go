package telemetry_test

import (
	"context"
	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"log/slog"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

// lockedBuffer is the shared test log destination.
type lockedBuffer = logtest.Buffer

// The SDK logs a malformed OTEL_EXPORTER_OTLP_HEADERS with the header
// values in it; through the diagnostics New installs none of them appears.
func TestOTelSDKDiagnosticsNeverCarryHeaderValues(t *testing.T) {
	var out lockedBuffer
	t.Cleanup(func() { telemetry.InstallDiagnostics(nil) })
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%ZZs3cretvalue,x-tenant-token s3cretnoequals")
	cfg := config.Telemetry{ServiceName: "s", TraceSamplePerMillion: 1_000_000, OTLPEndpoint: "http://127.0.0.1:1"}
	tel, err := telemetry.New(context.Background(), cfg, telemetry.Options{Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = tel.Shutdown(context.Background())
	logged := out.String()
	if !strings.Contains(logged, "OpenTelemetry SDK") {
		t.Fatalf("the SDK's diagnostics did not reach the logger:\n%s", logged)
	}
	for _, secret := range []string{"s3cret", "Bearer", "%ZZ", "x-tenant-token"} {
		if strings.Contains(logged, secret) {
			t.Errorf("the log carries %q:\n%s", secret, logged)
		}
	}
}
