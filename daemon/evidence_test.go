package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/testing/logtest"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// plantCheckpoint leaves in stateDir what a SIGKILLed run leaves: a
// checkpoint file of seq with windows.
func plantCheckpoint(t *testing.T, stateDir string, seq uint64, instant time.Time, ws ...coalesce.OpenWindow) {
	t.Helper()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	b := coalesce.AppendCheckpoint(nil, &coalesce.Checkpoint{Seq: seq, Instant: instant, Started: instant.Add(-time.Minute), Windows: ws})
	if err := os.WriteFile(filepath.Join(stateDir, coalesce.CheckpointFile(seq)), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestAnUncleanStopIsRecoveredBeforeServingLoggedOnceAndCarriedInHealth(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	cfg := testConfig(t)
	instant := time.Now().Add(-3 * time.Second)
	plantCheckpoint(t, cfg.Registrar.StateDir, 41, instant,
		coalesce.OpenWindow{Identity: "uid:1000", Verb: vocab.Mint, Bucket: vocab.Admission, Start: instant.Add(-2 * time.Second), Count: 120},
		coalesce.OpenWindow{Identity: "uid:1001", Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, Start: instant.Add(-time.Second), Count: 3})
	var logs logtest.Buffer
	d, err := New(cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("New refused after an unclean stop: %v", err)
	}
	// Before Run (before any listener accepts), the records are in the store.
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: cfg.Registrar.AuditRecordDir})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Limited; got[vocab.Admission].Count != 120 || got[vocab.PredecisionRefusal].Count != 3 || rep.Anomalies() {
		t.Fatalf("store after recovery %+v, want 120 admission and 3 refusals, no anomaly", rep.Limited)
	}
	errLines := 0
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `"level":"ERROR"`) {
			errLines++
			for _, want := range []string{`"recovered_records":2`, `"recovered_count":123`, `"checkpoint":"ok"`, `"gap_from":"` + instant.UTC().Format("2006-01-02T15:04:05")} {
				if !strings.Contains(l, want) {
					t.Errorf("ERROR line %s lacks %s", l, want)
				}
			}
		}
	}
	if errLines != 1 {
		t.Fatalf("%d ERROR lines, want 1:\n%s", errLines, logs.String())
	}
	m := d.health.Current().Container.Restart
	if !m.Unclean || m.Checkpoint != "ok" || m.RecoveredRecords != 2 || m.RecoveredCount != 123 || m.EvidenceGapFrom == "" || m.EvidenceGapTo == "" {
		t.Fatalf("health restart member %+v", m)
	}
	if st := d.restartStats(); st.UncleanRestarts != 1 || st.LastUncleanRestartUnix < float64(instant.Unix()) {
		t.Fatalf("restart stats %+v", st)
	}
	// The checkpoint was cleared: both files hold an empty checkpoint of a
	// higher sequence.
	for i := range uint64(2) {
		b, err := os.ReadFile(filepath.Join(cfg.Registrar.StateDir, coalesce.CheckpointFile(i)))
		if err != nil {
			t.Fatal(err)
		}
		c, err := coalesce.DecodeCheckpoint(b)
		if err != nil || len(c.Windows) != 0 || c.Seq <= 41 {
			t.Fatalf("%s after recovery: %+v, %v; want empty above seq 41", coalesce.CheckpointFile(i), c, err)
		}
	}
	// A clean stop removes the marker; the next start is clean and writes
	// nothing again.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range uint64(2) {
		if _, err := os.Stat(filepath.Join(cfg.Registrar.StateDir, coalesce.CheckpointFile(i))); !os.IsNotExist(err) {
			t.Fatalf("after a clean stop %s: %v, want removed", coalesce.CheckpointFile(i), err)
		}
	}
	logs = logtest.Buffer{}
	if m := restartFound(t, cfg, slog.New(slog.NewJSONHandler(&logs, nil))); m.Unclean || m.Checkpoint != "none" || strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("after a clean stop: %+v, log %s", m, logs.String())
	}
	rep, _ = audit.Scan(context.Background(), audit.ScanOptions{Dir: cfg.Registrar.AuditRecordDir})
	if got := rep.Limited[vocab.Admission].Count; got != 120 {
		t.Fatalf("after the clean restart Σ admission %d, want 120 (nothing written twice)", got)
	}
}

// restartFound starts a second daemon on cfg, open until t ends, and
// returns what its start found of the previous run.
func restartFound(t *testing.T, cfg config.Config, logger *slog.Logger) health.RestartMember {
	t.Helper()
	d, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	return d.health.Current().Container.Restart
}

func TestTheTickCheckpointsWhatIsOpenAndAStartWithoutFlushRecoversIt(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	cfg := testConfig(t)
	r := start(t, cfg)
	ctx := context.Background()
	for range 10 {
		r.client.Mint(ctx, mint("review")) // 3 admitted, 7 throttled
	}
	r.tick()
	// A SIGKILL here: no shutdown flush. Simulated by reading the state
	// directory as it is now into a second one and starting there.
	cfg2 := testConfig(t)
	os.MkdirAll(cfg2.Registrar.StateDir, 0o700)
	for i := range uint64(2) {
		b, err := os.ReadFile(filepath.Join(cfg.Registrar.StateDir, coalesce.CheckpointFile(i)))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(cfg2.Registrar.StateDir, coalesce.CheckpointFile(i)), b, 0o600)
	}
	if m := restartFound(t, cfg2, nil); !m.Unclean || m.RecoveredCount != 7 || m.RecoveredRecords != 1 {
		t.Fatalf("restart member %+v, want the 7 throttled mints recovered in one record", m)
	}
}

func TestNoCheckpointIsWrittenOnTheRequestPath(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	cfg := testConfig(t)
	r := start(t, cfg)
	ctx := context.Background()
	before := r.d.ckpt.Writes()
	for range 20 {
		r.client.Mint(ctx, mint("review")) // 3 admitted, 17 throttled
		r.client.Mint(ctx, mint("BAD"))    // 2 refused, 18 limited
	}
	if got := r.d.ckpt.Writes() - before; got != 0 {
		t.Fatalf("%d checkpoint writes during 35 limited calls and no tick, want 0", got)
	}
	r.tick()
	r.tick()
	if got := r.d.ckpt.Writes() - before; got != 1 {
		t.Fatalf("%d checkpoint writes after two ticks with one change between, want 1", got)
	}
}

// Issue 41: a FIFO left at both checkpoint files while the daemon runs.
// No tick blocks on it: mints are answered, each tick that has windows to
// write fails at once and is counted, the failure is logged once, not on
// every tick; once the FIFOs go the next tick writes, and the stop
// completes.
func TestAFIFOAtTheCheckpointNeverBlocksTheTickAndIsLoggedOnce(t *testing.T) {
	t.Parallel() // its daemon's seams are its own
	cfg := testConfig(t)
	var logs logtest.Buffer
	r := launch(t, cfg, slog.New(slog.NewTextHandler(&logs, nil)), seams{})
	ctx := context.Background()
	r.tick()
	for i := range 2 {
		name := filepath.Join(cfg.Registrar.StateDir, coalesce.CheckpointFile(uint64(i)))
		os.Remove(name)
		if err := syscall.Mkfifo(name, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	before := r.d.ckpt.Failures()
	for i := range 3 {
		for range 5 {
			if resp, err := r.client.Mint(ctx, mint("BAD")); err != nil || resp.StatusCode == 0 {
				t.Fatalf("a mint beside the FIFO: %+v, %v", resp, err)
			}
		}
		r.tick()
		if got := r.d.ckpt.Failures() - before; got != uint64(i+1) {
			t.Fatalf("after tick %d past the FIFO: %d checkpoint failures counted, want %d", i+1, got, i+1)
		}
	}
	if n := len(logs.Lines("evidence-checkpoint", "not a regular file")); n != 1 {
		t.Fatalf("the FIFO's failure logged %d times in 3 ticks, want once:\n%s", n, logs.String())
	}
	for i := range 2 {
		os.Remove(filepath.Join(cfg.Registrar.StateDir, coalesce.CheckpointFile(uint64(i))))
	}
	writes := r.d.ckpt.Writes()
	r.tick()
	if r.d.ckpt.Writes() != writes+1 {
		t.Fatal("the tick after the FIFOs went did not write the checkpoint")
	}
	// A failure after a write is a new one: logged again.
	for i := range 2 {
		name := filepath.Join(cfg.Registrar.StateDir, coalesce.CheckpointFile(uint64(i)))
		os.Remove(name)
		if err := syscall.Mkfifo(name, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := r.client.Mint(ctx, mint("BAD")); err != nil || resp.StatusCode == 0 {
		t.Fatalf("a mint beside the FIFO again: %+v, %v", resp, err)
	}
	r.tick()
	if n := len(logs.Lines("evidence-checkpoint", "not a regular file")); n != 2 {
		t.Fatalf("the FIFO's failure after a written checkpoint: logged %d times in all, want twice:\n%s", n, logs.String())
	}
	for i := range 2 {
		os.Remove(filepath.Join(cfg.Registrar.StateDir, coalesce.CheckpointFile(uint64(i))))
	}
	r.stop(t)
}
