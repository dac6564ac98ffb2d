package coalesce_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
)

// TestCountedRecordsThroughTheRealStoreAreNoAnomaly floods through the
// production store and reads it back with the anomaly scan: counted records
// raise neither signal, while a real crash-mid-mint intent and an
// unparseable line are still counted by the right rule.
func TestCountedRecordsThroughTheRealStoreAreNoAnomaly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	store, err := audit.Open(audit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	counts := counting.New()
	clk := &clock{t: time.Now().UTC().Add(-time.Hour)}
	s, err := coalesce.New(coalesce.Options{Next: counts, Store: store, Window: time.Minute, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Ten windows of a flood on both buckets from three identities.
	const perWindow = 500
	for range 10 {
		for i := range perWindow {
			id := "unix-peer:uid=" + strconv.Itoa(1000+i%3)
			s.Limited(ctx, limiter.Event{Identity: id, Verb: limiter.Mint, Bucket: limiter.Bucket(i % 2)})
		}
		clk.advance(time.Minute)
		s.Tick(ctx, clk.now())
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	rep, err := audit.Scan(ctx, audit.ScanOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.IntentWithoutOutcome != 0 || rep.MalformedRecords != 0 || rep.Anomalies() {
		t.Fatalf("counted records reported as anomalies: %+v", rep)
	}
	// 10 windows × 3 identities × 2 buckets, never one per invocation.
	if got := rep.Records[audit.PhaseLimited-1]; got != 60 {
		t.Fatalf("%d counted records, want 60", got)
	}
	for b := range limiter.NumBuckets {
		if got := rep.Limited[b].Count; got != 10*perWindow/2 {
			t.Fatalf("%v: counted %d limited invocations, want %d", limiter.Bucket(b), got, 10*perWindow/2)
		}
	}
	if c := counts.Counts(); c.PredecisionRefusal != 2500 || c.Admission != 2500 {
		t.Fatalf("counting sink %+v, want 2500 per bucket", c)
	}

	// Now a genuine crash-mid-mint intent and an unparseable line.
	store, err = audit.Open(audit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Append(ctx, &audit.Record{
		Phase: audit.PhaseIntent, TS: time.Now().Add(-10 * time.Minute), RequestID: "crash.1",
		Verb: limiter.Mint, CallerIdentity: "unix-peer:uid=1000",
		Requested: &audit.Requested{ServiceName: "review", Host: "h1", Instance: 7},
	}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	f, err := os.OpenFile(filepath.Join(dir, audit.ActiveFileName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{not json\n")
	f.Close()
	rep, err = audit.Scan(ctx, audit.ScanOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.IntentWithoutOutcome != 1 || rep.MalformedRecords != 1 {
		t.Fatalf("intent_without_outcome %d, malformed %d; want 1 and 1", rep.IntentWithoutOutcome, rep.MalformedRecords)
	}
}
