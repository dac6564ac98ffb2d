package main

import (
	"bytes"
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

// TestLoadStoppedBySIGTERMExits143 holds that a load run ended by SIGTERM
// exits 143 with SIGTERM in its summary (SIGINT's 130 is the e2e test's).
// The run sends the signal to this process itself once runLoad has
// installed its handler, then waits for the cancellation it causes.
func TestLoadStoppedBySIGTERMExits143(t *testing.T) {
	sock := serveFixed(t, 200, `{"protocol_version":1,`+clientHealth+"}\n")
	lf := &loadFlags{socket: sock, auditDir: "-", concurrency: 1, asJSON: true, progress: "off", progressEvery: time.Second}
	sum := loadSummary{Command: "flood", Flood: &floodJSON{Bucket: "admission", Requests: 1}}
	var out, errb bytes.Buffer
	code := runLoad(&out, &errb, lf, &sum, "a run stopped by SIGTERM",
		func(ctx context.Context, _ *wire.Client, _ *telemetry.Driver, _ func(loadgen.Progress)) (loadgen.Report, error) {
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
				return loadgen.Report{}, err
			}
			<-ctx.Done()
			return loadgen.Report{}, ctx.Err()
		})
	if code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143; stderr %q", code, errb.String())
	}
	var got loadSummary
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, out.String())
	}
	if !got.Interrupted || got.Signal != "SIGTERM" {
		t.Fatalf("summary interrupted %v signal %q, want true and SIGTERM", got.Interrupted, got.Signal)
	}
}
