//go:build unix

package audit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// floodWindows opens n windows in s, one per identity, at clk.
func floodWindows(s *coalesce.Sink, n int) {
	for i := range n {
		s.Limited(context.Background(), limiter.Event{Identity: fmt.Sprintf("spiffe://fleet/host-%05d", i), Verb: limiter.Verb(i % 2), Bucket: limiter.Bucket(i / 2 % 2)})
	}
}

// TestTickOf256DueWindowsCostsOneFsync counts fsyncs through the store's
// file seam: the tick closing 256 due windows, and the shutdown flush of
// 256 open ones, each cost one fsync (two when the batch crosses a
// rotation), not 256.
func TestTickOf256DueWindowsCostsOneFsync(t *testing.T) {
	for _, close := range []string{"tick", "shutdown flush"} {
		t.Run(close, func(t *testing.T) {
			var f faults
			store, dir := openStore(t, audit.Options{}, f.hooks())
			start := time.Now()
			s, err := coalesce.New(coalesce.Options{Store: store, Window: time.Minute, Now: func() time.Time { return start }})
			if err != nil {
				t.Fatal(err)
			}
			floodWindows(s, 256)
			f.reset()
			if close == "tick" {
				s.Tick(context.Background(), start.Add(time.Minute))
			} else {
				s.Flush(context.Background(), start.Add(time.Second))
			}
			if f.syncs > 2 || f.syncs < 1 {
				t.Fatalf("%s of 256 windows cost %d fsyncs, want at most 2", close, f.syncs)
			}
			if n := len(lines(readActive(t, dir))); n != 256 {
				t.Fatalf("%d lines, want 256", n)
			}
			if st := s.Stats(); st.Records[0]+st.Records[1] != 256 || st.WriteFailures != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// BenchmarkTickOf256DueWindows measures closing 256 due windows into a
// real store on the test's disk: the batch the tick now writes, against
// the previous behaviour of one durable Append per window, in the same run.
func BenchmarkTickOf256DueWindows(b *testing.B) {
	b.Run("batch", func(b *testing.B) {
		store, err := audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit")})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		start := time.Now()
		s, err := coalesce.New(coalesce.Options{Store: store, Window: time.Minute, Now: func() time.Time { return start }})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			floodWindows(s, 256)
			b.StartTimer()
			s.Tick(context.Background(), start.Add(time.Minute))
		}
	})
	b.Run("append-each", func(b *testing.B) {
		store, err := audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit")})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		recs := limitedN(256)
		b.ReportAllocs()
		for b.Loop() {
			for _, r := range recs {
				if err := store.Append(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
