package main

// End to end, issue 40's "0 false reports across at least 20 SIGKILL
// trials during a flood and a wave": a sealed daemon is killed with
// SIGKILL after a random number of answers while one caller mints a wave (admitted
// until its burst runs out) and floods on (throttled, so the coalescer
// counts and checkpoints), in a store that rotates and deletes by
// retention; after each restart, with the records recovered from the
// checkpoint written, audit verify --key --heads finds nothing.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

func TestEndToEndSIGKILLDuringAFloodAndAWaveLeavesAStoreThatVerifies(t *testing.T) {
	const (
		trials  = 20
		workers = 8
	)
	d := newSealedDaemon(t, `audit_max_file_bytes = 65536
audit_max_retained_files = 3
maintenance_interval_ms = 50
rate_limit_admission_burst = 150
rate_limit_admission_refill_interval_ms = 3600000
rate_limit_coalesce_window_seconds = 1
`)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 40))
	t.Logf("seed %d", seed)
	client := wire.NewUnixClient(d.socket)
	defer client.CloseIdleConnections()
	d.start()
	var (
		host                atomic.Int64
		admitted, throttled atomic.Int64
		torn, recovered     uint64
	)
	for n := range trials {
		// Killed by the worker that sees the killAfter-th answer: a point
		// in the wave (the burst is 150) or in the flood after it.
		killAfter := 20 + rng.Int64N(600)
		var stop, killed atomic.Bool
		var answers atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for !stop.Load() {
					h := fmt.Sprintf("kill-h%06d", host.Add(1))
					resp, err := client.Mint(context.Background(), wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: h, Instance: 1,
						Component: "review", Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 60})
					switch {
					case err != nil:
						return // killed
					case resp.OK():
						admitted.Add(1)
					case resp.ErrorID == wire.RegistrarBusy:
						throttled.Add(1)
					default:
						t.Errorf("mint %s: %d %s %s", h, resp.StatusCode, resp.ErrorID, resp.Detail)
						return
					}
					if answers.Add(1) == killAfter && !killed.Swap(true) {
						d.cmd.Process.Kill() // SIGKILL: no shutdown, no stop seal
					}
				}
			})
		}
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			t.Fatal("the daemon did not die")
		}
		stop.Store(true)
		wg.Wait()
		client.CloseIdleConnections()
		d.logs.WriteString(d.loggedProc.logs.String())

		// Restart: recovery writes the checkpoint's windows, chained after
		// the start seal.
		d.start()
		if m := recoveredCountRE.FindStringSubmatch(d.loggedProc.logs.String()); m != nil {
			c, _ := strconv.ParseUint(m[1], 10, 64)
			recovered += c
		}
		code, rep := d.verify(t, d.auditDir, d.headsFileWithCurrent(t))
		if code != auditVerifyOK {
			t.Fatalf("trial %d (killed after %d answers): exit %d, first problem %+v", n, killAfter, code, rep.FirstProblem)
		}
		torn += rep.Seal.TornLines
	}
	d.stop()
	code, rep := d.verify(t, d.auditDir, d.headsFile(t))
	if code != auditVerifyOK || rep.ProblemCount != 0 {
		t.Fatalf("after the last stop: exit %d, %+v", code, rep.FirstProblem)
	}
	if code, scan := d.scan(); code != exitOK && scan.MalformedRecords != torn {
		t.Errorf("audit scan: exit %d, %+v", code, scan)
	}
	t.Logf("%d SIGKILL trials: %d mints admitted, %d throttled, %d counted invocations recovered from checkpoints, %d torn lines, %d files kept, 0 problems",
		trials, admitted.Load(), throttled.Load(), recovered, torn, len(storeFiles(t, d.auditDir)))
	if admitted.Load() == 0 || throttled.Load() == 0 || recovered == 0 {
		t.Errorf("the trials did not exercise a wave, a flood and a recovery: %d admitted, %d throttled, %d recovered", admitted.Load(), throttled.Load(), recovered)
	}
}

// headsFileWithCurrent is headsFile with the running daemon's log so far.
func (d *sealedDaemon) headsFileWithCurrent(t *testing.T) string {
	t.Helper()
	path := d.headsFile(t)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(d.loggedProc.logs.String())
	return path
}
