package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"github.com/registrar-otel/registrar-otel/telemetry"
)

type diagLine struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Error      string `json:"error"`
	Suppressed uint64 `json:"suppressed"`
}

func diagLines(t *testing.T, buf *bytes.Buffer) []diagLine {
	t.Helper()
	var out []diagLine
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var d diagLine
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, d)
	}
	return out
}

func TestDiagnosticsRateLimitsEachKindOfError(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	d := telemetry.NewDiagnostics(slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	upload := func(n int) error {
		return fmt.Errorf("failed to upload metrics: Post \"http://127.0.0.1:%d/v1/metrics\": connection refused", 4318+n%2)
	}
	for i := range 100 { // a collector down: one error per export
		d.Handle(upload(i))
		now = now.Add(time.Second)
	}
	d.Handle(errors.New("traces export: context deadline exceeded"))
	lines := diagLines(t, &buf)
	// 100 s of metric errors: the first, then one per minute (at 60 s,
	// carrying the 59 suppressed); the trace error is its own kind.
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	if lines[0].Suppressed != 0 || lines[1].Suppressed != 59 || !strings.Contains(lines[1].Error, "failed to upload metrics") {
		t.Errorf("lines %+v: want the first error, then one saying 59 were suppressed", lines[:2])
	}
	if lines[2].Error != "traces export: context deadline exceeded" || lines[0].Level != "WARN" {
		t.Errorf("lines %+v", lines)
	}
	// A line with nothing suppressed before it carries no suppressed=0.
	if first := strings.SplitN(buf.String(), "\n", 2)[0]; strings.Contains(first, `"suppressed"`) {
		t.Errorf("first line %s carries a suppressed count; want none", first)
	}
}

func TestDiagnosticsLoggerMapsTheSDKsLevels(t *testing.T) {
	var buf bytes.Buffer
	d := telemetry.NewDiagnostics(slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	l := d.Logger()
	l.V(8).Info("debug detail")                               // SDK debug: below info, dropped
	l.V(4).Info("info detail")                                // SDK info: dropped at info level
	l.V(1).Info("dropping spans", "count", 3)                 // SDK warning
	l.Error(errors.New("boom"), "exporter failed")            // SDK error
	l.WithName("sdk").V(1).Info("dropping spans", "count", 4) // same kind: suppressed
	lines := diagLines(t, &buf)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want the warning and the error:\n%s", len(lines), buf.String())
	}
	if lines[0].Level != "WARN" || lines[0].Msg != "telemetry: OpenTelemetry SDK: dropping spans" {
		t.Errorf("warning line %+v", lines[0])
	}
	if lines[1].Level != "ERROR" || lines[1].Error != "boom" {
		t.Errorf("error line %+v", lines[1])
	}
}

func TestDiagnosticsBoundsTheKindsItRemembers(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	d := telemetry.NewDiagnostics(slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	// 1000 distinct messages (letters, so masking digits does not merge
	// them) within one interval: 64 kinds and one overflow line.
	for i := range 1000 {
		d.Handle(errors.New("error " + strings.Repeat("x", i)))
	}
	if n := len(diagLines(t, &buf)); n != 65 {
		t.Errorf("%d lines for 1000 distinct errors in one interval, want 65 (64 kinds + the shared overflow)", n)
	}
}

func TestDiagnosticsForgetsQuietKindsToMakeRoomForNewOnes(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	d := telemetry.NewDiagnostics(slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	for i := range 65 { // 64 kinds and the overflow
		d.Handle(errors.New("error " + strings.Repeat("x", i)))
	}
	// An interval later the 64 are quiet (nothing suppressed since): two
	// new kinds each get a line of their own, rather than sharing the
	// overflow's one.
	now = now.Add(telemetry.DiagnosticsInterval)
	d.Handle(errors.New("a new kind"))
	d.Handle(errors.New("another new kind"))
	if n := len(diagLines(t, &buf)); n != 67 {
		t.Errorf("%d lines, want 67 (65, then both new kinds)", n)
	}
}

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
