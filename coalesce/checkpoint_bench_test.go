package coalesce

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// BenchmarkCheckpointTick is the tick's added cost at the window cap: 4,096
// open windows of 64-byte identities (344,104 bytes a checkpoint), one of
// them counting between ticks, so each tick rewrites the checkpoint.
// /disk writes a file of the state directory (the real fdatasync, on
// whatever file system TMPDIR is); /memory writes to the fault seam, which
// is the snapshot and encoding alone. Both report fsyncs per tick.
func BenchmarkCheckpointTick(b *testing.B) {
	for _, where := range []string{"disk", "memory"} {
		b.Run(where, func(b *testing.B) {
			store, err := audit.Open(audit.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			sink, err := New(Options{Store: store, Window: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, MaxOpenWindows/4)
			for i := range ids {
				ids[i] = fmt.Sprintf("spiffe://fleet.example/host-%04d/%034d", i, i)[:64]
			}
			ctx := context.Background()
			for _, id := range ids {
				for _, v := range []limiter.Verb{limiter.Mint, limiter.Deregister} {
					for _, bk := range []limiter.Bucket{limiter.PredecisionRefusal, limiter.Admission} {
						sink.Limited(ctx, limiter.Event{Identity: id, Verb: v, Bucket: bk})
					}
				}
			}
			if st := sink.Stats(); st.OpenWindows != MaxOpenWindows {
				b.Fatalf("%d open windows, want %d", st.OpenWindows, MaxOpenWindows)
			}
			var cfs checkpointFS = newPowerFS()
			if where == "disk" {
				d, err := os.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				cfs = dirFS{dir: d}
			}
			c := &Checkpointer{fs: cfs, sink: sink, started: time.Now()}
			if err := c.start(0, time.Now()); err != nil {
				b.Fatal(err)
			}
			base := c.writes.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				sink.Limited(ctx, limiter.Event{Identity: ids[0], Verb: limiter.Mint, Bucket: limiter.Admission})
				if err := c.Tick(ctx, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.writes.Load()-base)/float64(b.N), "fsyncs/tick")
			b.ReportMetric(float64(c.bytes.Load()), "bytes/checkpoint")
		})
	}
}
