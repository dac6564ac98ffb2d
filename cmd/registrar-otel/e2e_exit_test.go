package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// The real binary against a real daemon: a mint the admission bucket
// throttles exits 75 (RegistrarBusy), with the retry hint on stderr.
func TestEndToEndRegistrarBusyExits75(t *testing.T) {
	d := startDaemon(t, `rate_limit_admission_burst = 1
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, "")
	flags := []string{"mint", "--socket", d.socket, "--service-name", "review", "--host", "h1", "--instance", "1", "--component", "review"}
	if code, out, errOut := d.run(flags...); code != exitOK {
		t.Fatalf("first mint: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut := d.run(flags...)
	if code != 75 || !strings.Contains(errOut, "RegistrarBusy (retryable): retry after") {
		t.Fatalf("throttled mint: exit %d, stderr %q; want 75 and RegistrarBusy with its retry_after", code, errOut)
	}
	d.stop()
}

// A load run stopped by SIGTERM exits 143, its JSON summary saying it was
// interrupted by SIGTERM.
func TestEndToEndLoadStoppedBySIGTERMExits143(t *testing.T) {
	d := startDaemon(t, `rate_limit_admission_burst = 5
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 3600`, "")
	p := startLoad(t, d, "load", "wave", "--config", d.config, "--hosts", "2", "--modules-per-host", "4",
		"--concurrency", "2", "--progress-interval", "20ms", "--settle", "0", "--json")
	p.waitProgress(t, "5", "2") // both workers now wait out retry_after
	if code := p.signal(t, syscall.SIGTERM); code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143; stdout:\n%s", code, p.stdout.String())
	}
	var sum loadSummary
	if err := json.Unmarshal(p.stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, p.stdout.String())
	}
	if !sum.Interrupted || sum.Signal != "SIGTERM" || sum.Completed != 5 {
		t.Fatalf("summary %+v; want interrupted by SIGTERM after 5 completed", sum)
	}
	d.stop()
}
