package coalesce

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

func TestAPowerLossDuringACheckpointWriteFallsBackToTheOlderFileNeverRefusesAndNeverDoubleCounts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tornAt  int
		keepOld bool
		want    string
	}{
		{"truncated empty", 0, false, checkpointStale},
		{"cut mid-header", 20, false, checkpointStale},
		{"cut mid-window", 60, false, checkpointStale},
		{"write never reached the disk", 0, true, checkpointOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.limited("uid:1", 5)
			f.limited("uid:2", 2)
			f.clock = f.clock.Add(time.Second)
			if err := f.tick(); err != nil {
				t.Fatal(err)
			}
			// The last tick before the power loss: 3 more for uid:1, and its
			// checkpoint write is lost.
			f.limited("uid:1", 3)
			f.clock = f.clock.Add(time.Second)
			f.fs.loseNext, f.fs.tornAt, f.fs.keepOld = true, tc.tornAt, tc.keepOld
			if err := f.tick(); !errors.Is(err, errPowerLost) {
				t.Fatalf("the lost write: %v", err)
			}
			f.clock = f.clock.Add(500 * time.Millisecond)
			rec := f.restart()
			if !rec.Unclean || rec.Checkpoint != tc.want {
				t.Fatalf("recovery %+v, want unclean with checkpoint %q", rec, tc.want)
			}
			if tc.want == checkpointStale && !strings.Contains(rec.Problem, "torn") {
				t.Errorf("problem %q does not say torn", rec.Problem)
			}
			sum, n := f.counted()
			// 7 counted at the durable checkpoint; the 3 of the lost tick are
			// the one tick the bound allows to lose.
			if sum != 7 || n != 2 || rec.Count != 7 || rec.Records != 2 {
				t.Fatalf("store Σ %d in %d records, recovery %+v; want 7 in 2", sum, n, rec)
			}
			// A second unclean start finds the cleared checkpoint: nothing
			// again.
			f.clock = f.clock.Add(time.Second)
			rec = f.restart()
			if sum2, _ := f.counted(); sum2 != 7 || rec.Records != 0 {
				t.Fatalf("after a second restart Σ %d, recovered %d; want 7, 0", sum2, rec.Records)
			}
		})
	}
}

func TestBothFilesTornIsReportedUnreadableAndStartGoesOn(t *testing.T) {
	f := newFixture(t)
	f.fs.files[CheckpointFile(0)] = []byte("garbage")
	f.fs.files[CheckpointFile(1)] = []byte{}
	rec := f.restart()
	if !rec.Unclean || rec.Checkpoint != checkpointUnreadable || !rec.GapFrom.IsZero() || rec.Records != 0 {
		t.Fatalf("got %+v, want unclean, unreadable, no gap start, nothing recovered", rec)
	}
	for name, b := range f.fs.snapshot() {
		if _, err := DecodeCheckpoint(b); err != nil {
			t.Fatalf("after start %s: %v, want a valid empty checkpoint", name, err)
		}
	}
}

func TestAWindowWhoseRecordIsDurableIsNeverWrittenAgain(t *testing.T) {
	f := newFixture(t)
	f.limited("uid:1", 4) // will close on the deadline after the checkpoint
	f.clock = f.clock.Add(time.Second)
	f.limited("uid:2", 6) // stays open
	if err := f.tick(); err != nil {
		t.Fatal(err)
	}
	// uid:1's window closes on its deadline and is written; the crash comes
	// before the next checkpoint, so the durable checkpoint still holds it.
	f.clock = ckptT0.Add(f.window)
	f.sink.Tick(context.Background(), f.clock)
	f.clock = f.clock.Add(time.Millisecond)
	rec := f.restart()
	sum, n := f.counted()
	if rec.Durable != 1 || rec.Records != 1 || rec.Count != 6 || sum != 10 || n != 2 {
		t.Fatalf("recovery %+v, store Σ %d in %d records; want uid:1 skipped as durable, uid:2's 6 recovered, Σ 10 in 2", rec, sum, n)
	}
	recs, _ := audit.LimitedSince(context.Background(), filepath.Join(f.dir, "audit"), ckptT0.Add(-time.Hour))
	got := recs[1]
	if got.CallerIdentity != "uid:2" || !got.WindowEnd.Equal(ckptT0.Add(time.Second)) || !got.WindowStart.Equal(ckptT0.Add(time.Second)) {
		t.Errorf("recovered record %+v: want uid:2 with window_end at the checkpoint instant", got)
	}
}

func TestAStartWithoutACheckpointIsCleanAndLogsNothing(t *testing.T) {
	f := newFixture(t)
	if err := f.ckpt.Clear(); err != nil {
		t.Fatal(err)
	}
	rec := f.restart()
	var buf bytes.Buffer
	LogRecovery(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), rec, "s")
	if rec.Unclean || rec.Checkpoint != checkpointNone || buf.Len() != 0 {
		t.Fatalf("got %+v and log %q, want clean and silent", rec, buf.String())
	}
}
