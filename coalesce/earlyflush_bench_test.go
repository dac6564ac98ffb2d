package coalesce_test

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

// BenchmarkLimitedAtTheCap is the limited call that flushes the oldest
// window early, with a real store on the test's disk: every iteration is a
// new key with the ring full. It compiles against the previous commit too
// (where the flush was written, with an fsync, on this goroutine), so the
// two can be run interleaved; here the writer is started when the sink has
// one.
func BenchmarkLimitedAtTheCap(b *testing.B) {
	store, err := audit.Open(audit.Options{Dir: filepath.Join(b.TempDir(), "audit")})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	s, err := coalesce.New(coalesce.Options{Store: store, Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if w, ok := any(s).(interface{ Run(context.Context) }); ok {
		go w.Run(ctx)
	}
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = fmt.Sprintf("spiffe://fleet/host-%06d", i)
	}
	for i := range coalesce.MaxOpenWindows {
		s.Limited(ctx, limiter.Event{Identity: ids[i%len(ids)] + "/fill", Verb: limiter.Mint, Bucket: limiter.Admission})
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		s.Limited(ctx, limiter.Event{Identity: ids[i%len(ids)], Verb: limiter.Verb(i / len(ids) % 2), Bucket: limiter.Admission})
		i++
	}
}
