package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultsBinary is the registrar-otel binary built once with the fault
// seams (-tags registrar_faults, daemon/fault_on.go), beside binary()'s in
// binDir so TestMain removes it.
var faultsBinary = sync.OnceValues(func() (string, error) {
	plain, err := binary()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(filepath.Dir(plain), "registrar-otel-faults")
	out, err := exec.Command("go", "build", "-race", "-tags", "registrar_faults", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -tags registrar_faults: %v\n%s", err, out)
	}
	return bin, nil
})

func buildFaultsBinary(t *testing.T) string {
	t.Helper()
	return needBinary(t, faultsBinary)
}

// stalledFor parses the fault build's "STATUS=fault: tick stalled for Nms".
func stalledFor(state string) (time.Duration, bool) {
	ms, ok := strings.CutPrefix(state, "STATUS=fault: tick stalled for ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(ms, "ms"))
	if err != nil {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// TestWatchdogPingsStopWhileTheTickStalls plays systemd with a small
// WatchdogSec against the real binary (its test build): WATCHDOG=1 comes at
// the tick's cadence, stops for as long as the tick is stalled (at least
// three watchdog intervals, long enough for systemd to act), and resumes
// with the tick. The stall is the fault seam REGISTRAR_FAULT_TICK_STALL: a
// file whose existence blocks the maintenance pass, which reports on the
// notify socket when the stall begins and how long it has lasted.
func TestWatchdogPingsStopWhileTheTickStalls(t *testing.T) {
	bin := buildFaultsBinary(t)
	fs := newFakeSystemd(t, os.Getegid())
	cfg := fs.config("")
	stall := filepath.Join(fs.dir, "stall-the-tick")

	const (
		tick     = 200 * time.Millisecond // the config's maintenance_interval_ms
		watchdog = time.Second            // WATCHDOG_USEC: a timer would ping every 500 ms
	)
	d := fs.start(bin, cfg, watchdog, "REGISTRAR_FAULT_TICK_STALL="+stall)
	fs.next("READY=1")
	fs.pingsAtTheTick(12, tick) // at the tick's cadence

	// Stall the tick. A ping of the pass before the stall may still
	// arrive before the stall's announcement; none may after it.
	if err := os.WriteFile(stall, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	began, _ := fs.next("STATUS=fault: tick stalled")
	for {
		n, _ := fs.next("")
		if n.state == "WATCHDOG=1" {
			t.Fatalf("WATCHDOG=1 %s into the tick's stall: the watchdog is not fed by the tick", n.at.Sub(began.at))
		}
		if lasted, ok := stalledFor(n.state); ok && lasted >= 3*watchdog && n.at.Sub(began.at) >= 3*watchdog {
			t.Logf("no WATCHDOG=1 for %s of stall (the daemon counts %s; watchdog %s)", n.at.Sub(began.at), lasted, watchdog)
			break
		}
	}

	// Release it: the pings resume, at the tick's cadence.
	if err := os.Remove(stall); err != nil {
		t.Fatal(err)
	}
	_, skipped := fs.next("WATCHDOG=1")
	seen := false
	for _, n := range skipped {
		seen = seen || strings.HasPrefix(n.state, "STATUS=fault: tick resumed after ")
	}
	if !seen {
		t.Errorf("WATCHDOG=1 resumed without the stall's end being announced first: %v", skipped)
	}
	fs.pingsAtTheTick(12, tick)
	d.terminate(t, "serve")
}
