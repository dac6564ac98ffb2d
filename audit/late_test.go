package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestScanGroupsRecordsWrittenLateIntoOneGapPerWindowEnd(t *testing.T) {
	clock := t0.Add(2 * time.Minute)
	s, dir := openStore(t, audit.Options{Now: func() time.Time { return clock }}, audit.TestHooks{})
	normal := limited(vocab.Admission, 5) // ts 1 s after window_end: on time
	appendOK(t, s, normal)
	// A restart at t0+2m recovering two windows of a checkpoint at t0+90s.
	for _, n := range []uint64{7, 4} {
		r := limited(vocab.Admission, n)
		r.TS = clock
		r.WindowStart, r.WindowEnd = t0.Add(80*time.Second), t0.Add(90*time.Second)
		appendOK(t, s, r)
	}
	// Late by exactly the bound: not a gap.
	edge := limited(vocab.PredecisionRefusal, 1)
	edge.TS = edge.WindowEnd.Add(audit.LateLimitedAfter)
	appendOK(t, s, edge)
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: clock.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LateLimitedRecords != 2 || len(rep.Gaps) != 1 || rep.Anomalies() {
		t.Fatalf("late %d, gaps %+v, anomalies %v; want 2 late records in one gap, no anomaly", rep.LateLimitedRecords, rep.Gaps, rep.Anomalies())
	}
	g := rep.Gaps[0]
	if !g.From.Equal(t0.Add(90*time.Second)) || !g.To.Equal(clock) || g.Records != 2 || g.Count != 11 || g.Line != 2 {
		t.Fatalf("gap %+v, want from t0+90s to t0+2m, 2 records of 11, first at line 2", g)
	}
}

func TestLimitedSinceReadsOnlyLimitedRecordsFromThatInstant(t *testing.T) {
	clock := t0
	s, dir := openStore(t, audit.Options{Now: func() time.Time { return clock }}, audit.TestHooks{})
	old := limited(vocab.Admission, 1)
	old.TS = t0
	appendOK(t, s, old)
	appendOK(t, s, intent("r-1"))
	recent := limited(vocab.Admission, 2)
	recent.TS = t0.Add(time.Hour)
	appendOK(t, s, recent)
	got, err := audit.LimitedSince(context.Background(), dir, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("got %d records (%+v), want the one limited record after the instant", len(got), got)
	}
	if _, err := audit.LimitedSince(context.Background(), dir+"-missing", t0); err == nil {
		t.Fatal("LimitedSince of a missing directory: no error")
	}
}
