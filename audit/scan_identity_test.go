package audit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// TestScanByIdentitySumsLimitedRecordsPerIdentityAndBucket: with
// ByIdentity the limited records are summed per (caller identity, bucket),
// the most limited invocations first; the per-bucket totals are
// unchanged, and without ByIdentity there is no breakdown.
func TestScanByIdentitySumsLimitedRecordsPerIdentityAndBucket(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	rec := func(id string, b limiter.Bucket, n uint64) *audit.Record {
		r := limited(b, n)
		r.CallerIdentity = id
		return r
	}
	for _, r := range []*audit.Record{
		rec("unix-peer:uid=1000", limiter.Admission, 5),
		rec("unix-peer:uid=2000", limiter.Admission, 40),
		rec("unix-peer:uid=1000", limiter.PredecisionRefusal, 3),
		rec("unix-peer:uid=1000", limiter.Admission, 2),
		rec("unix-peer:uid=3000", limiter.PredecisionRefusal, 7),
	} {
		appendOK(t, s, r)
	}
	now := t0.Add(time.Hour)
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now, ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []audit.IdentityLimited{
		{CallerIdentity: "unix-peer:uid=2000", Bucket: limiter.Admission, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 40}},
		{CallerIdentity: "unix-peer:uid=1000", Bucket: limiter.Admission, LimitedSummary: audit.LimitedSummary{Records: 2, Count: 7}},
		{CallerIdentity: "unix-peer:uid=3000", Bucket: limiter.PredecisionRefusal, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 7}},
		{CallerIdentity: "unix-peer:uid=1000", Bucket: limiter.PredecisionRefusal, LimitedSummary: audit.LimitedSummary{Records: 1, Count: 3}},
	}
	if !slices.Equal(rep.LimitedByIdentity, want) {
		t.Errorf("LimitedByIdentity =\n%+v\nwant\n%+v", rep.LimitedByIdentity, want)
	}
	if got := rep.Limited[limiter.Admission]; got != (audit.LimitedSummary{Records: 3, Count: 47}) {
		t.Errorf("admission total %+v, want 3 records, 47 invocations", got)
	}
	rep, err = audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if rep.LimitedByIdentity != nil {
		t.Errorf("without ByIdentity: LimitedByIdentity %+v, want none", rep.LimitedByIdentity)
	}
}

// TestScanByIdentityIsBounded: past MaxScanIdentities keys, the records of
// new keys are summed in LimitedOtherIdentities, and nothing is lost.
func TestScanByIdentityIsBounded(t *testing.T) {
	s, dir := openStore(t, audit.Options{MaxFileBytes: 64 << 20}, audit.TestHooks{})
	const extra = 10
	recs := make([]*audit.Record, audit.MaxScanIdentities+extra)
	for i := range recs {
		r := limited(limiter.Admission, 1)
		r.CallerIdentity = fmt.Sprintf("unix-peer:uid=%d", i)
		recs[i] = r
	}
	for i, err := range s.AppendBatch(context.Background(), recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.LimitedByIdentity); n != audit.MaxScanIdentities {
		t.Errorf("%d keys kept, want %d", n, audit.MaxScanIdentities)
	}
	if got := rep.LimitedOtherIdentities[limiter.Admission]; got != (audit.LimitedSummary{Records: extra, Count: extra}) {
		t.Errorf("other identities %+v, want %d records and invocations", got, extra)
	}
}
