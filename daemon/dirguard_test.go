package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// guardedPaths are the three directories of cfg, indexed like the guard's.
func guardedPaths(cfg config.Config) [numGuarded]string {
	r := cfg.Registrar
	return [numGuarded]string{r.AuditRecordDir, r.StateDir, filepath.Dir(r.SocketPath)}
}

// mintAnswer mints a fresh registration and returns the answer's error id
// and reason ("" for a success).
func mintAnswer(t *testing.T, r *running, host string) (string, string) {
	t.Helper()
	req := mint("review")
	req.Host = host
	resp, err := r.client.Mint(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return string(resp.ErrorID), resp.Reason
}

// Issue 27, item 3, at runtime: a chmod 0777 of any of the three private
// directories while serving is found on the next tick through the open
// descriptor: every append is refused (the mint answered AuditUnwritable),
// the store is unwritable at once, the gauge is 1 for that directory only
// and an ERROR line names its key. chmod 0700 lifts it on the next tick.
func TestALoosenedPrivateDirectoryRefusesAppendsUntilPutRight(t *testing.T) {
	for i, name := range []string{"audit", "state", "socket"} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			r, logs := startLogged(t, cfg, seams{})
			dir := guardedPaths(cfg)[i]
			if id, reason := mintAnswer(t, r, "h1"); id != "" {
				t.Fatalf("first mint: %s %s", id, reason)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			r.tick()
			for j, unsafe := range r.d.guard.stats().Unsafe {
				if unsafe != (j == i) {
					t.Errorf("after one tick: directory %d unsafe %v, want only %d", j, unsafe, i)
				}
			}
			for j, n := range []string{"audit", "state", "socket"} {
				want := 0.0
				if j == i {
					want = 1
				}
				if got := r.metric(t, `registrar_directory_unsafe{directory="`+n+`"}`); got != want {
					t.Errorf("registrar_directory_unsafe{directory=%q} = %v, want %v", n, got, want)
				}
			}
			if got := r.metric(t, `registrar_audit_store_state{state="unwritable"}`); got != 1 {
				t.Errorf("registrar_audit_store_state{state=\"unwritable\"} = %v after the tick, want 1", got)
			}
			if !r.d.store.Stats().LastAppendFailed {
				t.Errorf("the store is not unwritable right after the tick")
			}
			if got := r.d.capacity.Last().State; got != audit.CapacityUnwritable {
				t.Errorf("capacity state %s after the tick, want unwritable (RegistrarAuditStoreCritical)", got)
			}
			key := r.d.guard.dirs[i].key
			lines := logs.Lines("level=ERROR", "is no longer private: appends fail until it is put right", key+"="+dir)
			if len(lines) != 1 {
				t.Errorf("ERROR lines naming %s=%s: %q\nlog:\n%s", key, dir, lines, logs.String())
			}
			if id, reason := mintAnswer(t, r, "h2"); id != string(wire.RegistrarUnavailable) || reason != "AuditUnwritable" {
				t.Errorf("mint with %s at 0777: %q %q, want RegistrarUnavailable AuditUnwritable", dir, id, reason)
			}
			failures := r.d.store.Stats().AppendFailures
			if failures == 0 {
				t.Errorf("the refused mint was not counted as an append failure")
			}
			// Another tick: still unsafe, the line throttled.
			r.tick()
			if n := len(logs.Lines("level=ERROR", key+"="+dir)); n != 1 {
				t.Errorf("%d ERROR lines after a second tick, want the one (throttled)", n)
			}

			if err := os.Chmod(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			r.tick()
			if got := r.metric(t, `registrar_directory_unsafe{directory="`+telemetryName(i)+`"}`); got != 0 {
				t.Errorf("gauge %v after the recovery, want 0", got)
			}
			if r.d.guard.stats().Unsafe[i] || r.d.store.Refused() != nil {
				t.Errorf("after chmod 0700 and a tick: unsafe %v, refused %v; want both lifted", r.d.guard.stats().Unsafe, r.d.store.Refused())
			}
			if len(logs.Lines("level=INFO", "is private again", key+"="+dir)) != 1 {
				t.Errorf("no INFO line for the recovery\nlog:\n%s", logs.String())
			}
			if id, reason := mintAnswer(t, r, "h3"); id != "" {
				t.Errorf("mint after the mode was put right: %s %s, want it recorded", id, reason)
			}
		})
	}
}

// The recheck is by descriptor: a directory renamed away and loosened,
// with a safe directory put at its path, is still the one the daemon holds
// (the checkpoint's, the socket's), and it is found; a check by path would
// judge the safe stand-in and miss it.
func TestTheRecheckJudgesTheHeldDirectoryNotThePath(t *testing.T) {
	for _, i := range []int{guardState, guardSocket} {
		t.Run(telemetryName(i), func(t *testing.T) {
			cfg := testConfig(t)
			r := start(t, cfg)
			dir := guardedPaths(cfg)[i]
			moved := dir + ".moved"
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(moved, 0o777); err != nil {
				t.Fatal(err)
			}
			r.tick()
			if !r.d.guard.stats().Unsafe[i] {
				t.Fatalf("the held directory (now %s, mode 0777) was not found unsafe", moved)
			}
			if err := r.d.store.Refused(); err == nil || !strings.Contains(err.Error(), "has mode 0777") {
				t.Errorf("Refused() = %v, want the held directory's mode", err)
			}
		})
	}
}

func telemetryName(i int) string { return [numGuarded]string{"audit", "state", "socket"}[i] }

// Issue 27, item 3, at start, for every backend: the evidence checkpoint
// opens registrar.state_dir first, and refuses one of another uid, naming
// the key, as a setup error (exit 2).
func TestAForeignOwnedStateDirectoryIsASetupError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	cfg := testConfig(t)
	if err := os.Mkdir(cfg.Registrar.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cfg.Registrar.StateDir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := New(cfg, nil)
	var se *SetupError
	want := "daemon: state directory (registrar.state_dir " + cfg.Registrar.StateDir + "): privdir: refusing " + cfg.Registrar.StateDir + ": is owned by uid 4242"
	if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("New: %v, want a *SetupError starting %q", err, want)
	}
}
