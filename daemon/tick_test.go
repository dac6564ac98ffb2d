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
