package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
)

const busyBody = `{"protocol_version":1,"request_id":"r.1","class":"retryable","error":{"id":"RegistrarBusy","retry_after":7},` + clientHealth + "}\n"

// TestRegistrarBusyExits75 holds the documented exit status of a
// retryable answer (EX_TEMPFAIL, 75) for both verbs, with and without
// --json: the literal, not only the constant the docs test compares.
func TestRegistrarBusyExits75(t *testing.T) {
	sock := serveFixed(t, 429, busyBody)
	args := []string{"--socket", sock, "--service-name", "review", "--host", "h1", "--component", "review", "--instance", "1"}
	for _, tc := range []struct {
		name string
		run  func([]string, *bytes.Buffer, *bytes.Buffer) int
	}{
		{"mint", func(a []string, o, e *bytes.Buffer) int { return runMint(a, o, e) }},
		{"deregister", func(a []string, o, e *bytes.Buffer) int { return runDeregister(a, o, e) }},
	} {
		for _, extra := range [][]string{nil, {"--json"}} {
			var out, errb bytes.Buffer
			code := tc.run(append(append([]string(nil), args...), extra...), &out, &errb)
			if code != 75 {
				t.Errorf("%s %v on RegistrarBusy: exit %d, want 75; stderr %q", tc.name, extra, code, errb.String())
			}
			if extra == nil && !strings.Contains(errb.String(), "retry after 7 s") {
				t.Errorf("%s: stderr %q, want the retry_after", tc.name, errb.String())
			}
		}
	}
}

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
