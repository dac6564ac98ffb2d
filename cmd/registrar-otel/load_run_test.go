package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
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

// load wave --pace paces the wave and reports what it cost: against a
// daemon whose answers leave plenty of tokens, no wait and no throttle;
// without --pace, pacing is null.
func TestLoadWavePaceReportsPacing(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()[wire.HeaderRateLimitPolicy] = []string{wire.FormatRateLimitPolicy("default", 1000, 500)}
		w.Header()[wire.HeaderRateLimit] = []string{wire.FormatRateLimit("default", 900, 1)}
		w.Write([]byte(`{"protocol_version":1,"request_id":"r.1","registration_id":"x","outcome":"first_mint",` + clientHealth + "}\n"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	for _, paced := range []bool{true, false} {
		args := []string{"--socket", path, "--audit-dir", "-", "--hosts", "2", "--modules-per-host", "3",
			"--json", "--progress", "off", "--settle", "0"}
		if paced {
			args = append(args, "--pace")
		}
		var out, errb bytes.Buffer
		if code := runLoadWave(args, &out, &errb); code != exitOK {
			t.Fatalf("--pace %v: exit %d, stderr %q", paced, code, errb.String())
		}
		var sum loadSummary
		if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
			t.Fatalf("stdout is not the JSON summary: %v\n%s", err, out.String())
		}
		if sum.Admitted != 6 || sum.Throttled != 0 || (sum.Pacing != nil) != paced {
			t.Fatalf("--pace %v: summary %+v, pacing %+v", paced, sum, sum.Pacing)
		}
		if paced && (sum.Pacing.Waits != 0 || sum.Pacing.WaitSeconds != 0 || sum.Pacing.AnswersWithoutRateLimit != 0) {
			t.Fatalf("pacing %+v, want no wait and every answer informed", sum.Pacing)
		}
	}
}
