package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

func TestTickLoopRunsEveryIntervalInOrderAndSurvivesFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var order []string
		var logs bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		var ticks []time.Duration
		done := make(chan struct{})
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		go func() {
			defer close(done)
			tickLoop(ctx, tk.C, slog.New(slog.NewTextHandler(&logs, nil)), nil,
				tickTask{"first", func(_ context.Context, now time.Time) error {
					order = append(order, "first")
					ticks = append(ticks, now.Sub(start))
					return errors.New("store unwritable")
				}},
				tickTask{"second", func(context.Context, time.Time) error {
					order = append(order, "second")
					return nil
				}},
			)
		}()
		time.Sleep(3500 * time.Millisecond) // fake time inside the bubble
		synctest.Wait()
		cancel()
		<-done
		if got := strings.Join(order, ","); got != "first,second,first,second,first,second" {
			t.Fatalf("order %s, want three passes of first,second", got)
		}
		if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; len(ticks) != 3 || ticks[0] != want[0] || ticks[2] != want[2] {
			t.Fatalf("ticks at %v, want %v", ticks, want)
		}
		if !strings.Contains(logs.String(), "store unwritable") || strings.Count(logs.String(), "maintenance task failed") != 3 {
			t.Fatalf("logs %q, want each failure logged", logs.String())
		}
	})
}

// TestTheTickClosesDueWindows drives the daemon's own maintenance pass (the
// task list its tick loop runs) at an instant past a window's deadline and
// finds the counted record written while the daemon still runs, with
// window_end at the deadline: the tick, not the shutdown flush, closes due
// windows.
func TestTheTickClosesDueWindows(t *testing.T) {
	cfg := testConfig(t)
	cfg.Registrar.RateLimitCoalesceWindowSeconds = 1
	r := start(t, cfg)
	ctx := context.Background()
	for range 6 {
		r.client.Mint(ctx, mint("BAD")) // 2 recorded, 4 limited
	}
	scan := func() *audit.Report {
		t.Helper()
		rep, err := audit.Scan(ctx, audit.ScanOptions{Dir: cfg.Registrar.AuditRecordDir})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if got := scan().Limited[0]; got.Records != 0 {
		t.Fatalf("a counted record before any tick: %+v", got)
	}
	// A pass before the deadline closes nothing.
	runTasks(ctx, time.Now(), r.d.logger, r.d.tickTasks())
	if got := scan().Limited[0]; got.Records != 0 {
		t.Fatalf("a counted record from a tick before the deadline: %+v", got)
	}
	// A pass at an instant past it. The daemon's clock is not injectable
	// and the shortest window is 1 s, so rather than wait, the pass is
	// given the instant the ticker would report 2 s from now.
	runTasks(ctx, time.Now().Add(2*time.Second), r.d.logger, r.d.tickTasks())
	if got := scan().Limited[0]; got.Records != 1 || got.Count != 4 {
		t.Fatalf("after a tick past the deadline: %+v, want one record counting 4", got)
	}
	if st := r.d.coalescer.Stats(); st.OpenWindows != 0 || st.Records[0] != 1 {
		t.Fatalf("coalescer %+v, want the window closed by the tick", st)
	}
	// The record's window ends at its deadline (start + the 1 s window),
	// not at the tick's instant 2 s on, nor at the write.
	lim := limitedRecords(t, cfg.Registrar.AuditRecordDir)
	if len(lim) != 1 {
		t.Fatalf("%d limited records in the store, want 1", len(lim))
	}
	if got, want := lim[0].WindowEnd, lim[0].WindowStart.Add(time.Second); !got.Equal(want) {
		t.Fatalf("window_end %v, want the deadline %v (window_start + 1 s)", got, want)
	}
}
