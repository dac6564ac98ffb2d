//go:build registrar_faults

package daemon

import (
	"context"
	"fmt"
	"os"
	"time"
)

// The fault seams of a test build (go build -tags registrar_faults). The
// production binary is built without the tag and holds none of this: the
// twin in fault_off.go is an empty function the compiler inlines away, and
// cmd/registrar-otel's TestDefaultBuildHasNoFaultSeams checks the binary.
//
// REGISTRAR_FAULT_TICK_STALL=PATH: while the file PATH exists, each
// maintenance pass blocks before it runs its tasks, so nothing it does
// happens, the liveness clock stops and no WATCHDOG=1 is sent. The stall
// announces itself on NOTIFY_SOCKET (when set), so a test playing systemd
// knows without guessing when it began and how long it has lasted:
//
//	STATUS=fault: tick stalled
//	STATUS=fault: tick stalled for 1234ms   (each poll of PATH, every 50 ms)
//	STATUS=fault: tick resumed after 3456ms
const faultTickStallEnv = "REGISTRAR_FAULT_TICK_STALL"

// faultPoll is how often a stalled pass looks for the file again.
const faultPoll = 50 * time.Millisecond

// faultTickStall blocks while the stall file exists (or until ctx is done).
func faultTickStall(ctx context.Context) {
	path := os.Getenv(faultTickStallEnv)
	if path == "" {
		return
	}
	if _, err := os.Stat(path); err != nil {
		return
	}
	start := time.Now()
	faultNotify("STATUS=fault: tick stalled")
	t := time.NewTicker(faultPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		since := time.Since(start).Milliseconds()
		if _, err := os.Stat(path); err != nil {
			faultNotify(fmt.Sprintf("STATUS=fault: tick resumed after %dms", since))
			return
		}
		faultNotify(fmt.Sprintf("STATUS=fault: tick stalled for %dms", since))
	}
}

// faultNotify sends state to the service manager; a fault build's test
// reads it, nobody else, so a failure is ignored.
func faultNotify(state string) { _ = systemdNotify(state) }
