package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

func mintReq(host string) wire.MintRequest {
	return wire.MintRequest{
		ProtocolVersion: wire.ProtocolVersion, ServiceName: "review", Host: host, Instance: 1, Component: "review",
		Spec: wire.Spec{Component: "review", ServiceName: "review"}, WrapTTL: 300,
	}
}

type interval struct{ start, end time.Time }

func (a interval) overlaps(b interval) bool { return a.start.Before(b.end) && b.start.Before(a.end) }

// TestBackupDuringAWaveRestoresEveryBinding is the backup/restore of the
// operator pages: 100 registrations, online backups while a wave mints,
// a restore into a fresh state directory, and a remint of each of the 100
// answering idempotent_remint (reissued). It prints the longest mint that overlapped a backup
// (docs: backup, "what a backup costs a mint").
func TestBackupDuringAWaveRestoresEveryBinding(t *testing.T) {
	d := startDaemon(t, "", "")
	ctx := context.Background()
	cl := wire.NewUnixClient(d.socket, wire.WithTimeout(30*time.Second))
	defer cl.CloseIdleConnections()
	for i := range 100 {
		resp, err := cl.Mint(ctx, mintReq(fmt.Sprintf("h%d", i)))
		if err != nil || resp.Outcome != "first_mint" {
			t.Fatalf("mint h%d: %v %+v", i, err, resp)
		}
	}

	var mu sync.Mutex
	var mints []interval
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 { // the wave: new hosts while the backups run
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At most 90 each: 100 + 4×90 stays under the default
			// admission burst (512), so no mint is throttled.
			for i := range 90 {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := cl.Mint(ctx, mintReq(fmt.Sprintf("w%d-%d", w, i)))
				end := time.Now()
				if err != nil || !resp.OK() {
					t.Errorf("wave mint: %v %+v", err, resp)
					return
				}
				mu.Lock()
				mints = append(mints, interval{start, end})
				mu.Unlock()
			}
		}()
	}
	out := filepath.Join(d.dir, "backup.db")
	var backups []interval
	for range 5 {
		start := time.Now()
		code, stdout, stderr := d.run("backup", "--socket", d.socket, "--out", out)
		backups = append(backups, interval{start, time.Now()})
		if code != exitOK || !strings.Contains(stdout, "from the running daemon") {
			t.Fatalf("backup: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	close(stop)
	wg.Wait()
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v; want 0600", err, fi.Mode())
	}
	var during, outside time.Duration
	overlapping := 0
	for _, m := range mints {
		lat := m.end.Sub(m.start)
		hit := false
		for _, b := range backups {
			hit = hit || m.overlaps(b)
		}
		if hit {
			overlapping++
			during = max(during, lat)
		} else {
			outside = max(outside, lat)
		}
	}
	if overlapping == 0 {
		t.Fatalf("no wave mint overlapped a backup (%d mints): the wave did not run during the backups", len(mints))
	}
	t.Logf("longest mint during a backup: %v (%d of %d wave mints overlapped %d backups); longest mint outside them: %v",
		during, overlapping, len(mints), len(backups), outside)
	d.stop()

	// With the daemon stopped the file is copied directly.
	direct := filepath.Join(d.dir, "direct.db")
	if code, stdout, stderr := d.run("backup", "--config", d.config, "--out", direct); code != exitOK || !strings.Contains(stdout, "the daemon is not running") {
		t.Fatalf("backup of a stopped daemon: exit %d\n%s%s", code, stdout, stderr)
	}

	for _, snapshot := range []string{out, direct} {
		r := startDaemonWithState(t, "", "", snapshot)
		rcl := wire.NewUnixClient(r.socket, wire.WithTimeout(30*time.Second))
		for i := range 100 {
			resp, err := rcl.Mint(ctx, mintReq(fmt.Sprintf("h%d", i)))
			if err != nil || resp.Outcome != "idempotent_remint" {
				t.Fatalf("restored from %s: remint h%d: %v %+v, want idempotent_remint (reissued)", filepath.Base(snapshot), i, err, resp)
			}
		}
		rcl.CloseIdleConnections()
		r.stop()
	}
}
