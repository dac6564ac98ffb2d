package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

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
}
