package audit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// TestScanByIdentityFoldsRotatedCountsAndOthers: the invocations per
// identity add a rotated record's counts (shown apart as Rotated) to the
// retained records', its others go to the remainder, and a rotated record
// older than the window adds nothing.
func TestScanByIdentityFoldsRotatedCountsAndOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	s, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	old := rotatedRec()
	old.TS = t0.Add(-48 * time.Hour) // outside a 24h window
	old.Admin.Rotation, old.Admin.Folded = 1, 0
	recent := rotatedRec()
	recent.Admin.Rotation, recent.Admin.Folded = 2, 0
	recent.Admin.Counts = []audit.InvocationCount{{Identity: "unix-peer:uid=1000", Verb: vocab.Mint, Result: audit.ResultFirstMint, Invocations: 5}}
	recent.Admin.Others = []audit.InvocationCount{{Verb: vocab.Mint, Result: audit.ResultLimited, Invocations: 12}}
	for _, r := range []*audit.Record{old, recent, mintOutcome("q1", "unix-peer:uid=1000"), limited(vocab.Admission, 3), intent("q2")} {
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour), Window: 24 * time.Hour, ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]audit.IdentityInvocations{}
	for _, r := range rep.InvocationsByIdentity {
		got[r.CallerIdentity+" "+r.Verb.String()+" "+r.Result.String()] = r
	}
	if r := got["unix-peer:uid=1000 mint first_mint"]; r.Invocations != 6 || r.Rotated != 5 {
		t.Errorf("first_mint row %+v, want 6 invocations, 5 of them rotated", r)
	}
	if r := got["unix-peer:uid=1000 mint limited"]; r.Invocations != 3 || r.Rotated != 0 {
		t.Errorf("limited row %+v, want the counted record's 3", r)
	}
	if len(got) != 2 {
		t.Errorf("rows %v, want the two (the old rotated record's counts and the intent add none)", got)
	}
	if o := rep.InvocationsOtherIdentities[vocab.Mint][audit.ResultLimited]; o.Invocations != 12 || o.Rotated != 12 {
		t.Errorf("remainder %+v, want the rotated record's others", o)
	}
}

// TestScanByIdentityInvocationsAreBounded: MaxScanIdentities keys are
// kept, not one more; the invocations of a key met past them are summed in
// the remainder, and a kept key's later invocations still go to its row.
func TestScanByIdentityInvocationsAreBounded(t *testing.T) {
	s, dir := openStore(t, audit.Options{MaxFileBytes: 64 << 20}, audit.TestHooks{})
	recs := make([]*audit.Record, 0, audit.MaxScanIdentities+2)
	for i := range audit.MaxScanIdentities + 1 {
		recs = append(recs, mintOutcome(fmt.Sprintf("q%05d", i), fmt.Sprintf("unix-peer:uid=%d", i)))
	}
	recs = append(recs, mintOutcome("again", "unix-peer:uid=0")) // a kept key: counted in its row
	for i, err := range s.AppendBatch(context.Background(), recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.InvocationsByIdentity); n != audit.MaxScanIdentities {
		t.Errorf("%d keys kept, want %d", n, audit.MaxScanIdentities)
	}
	if o := rep.InvocationsOtherIdentities[vocab.Mint][audit.ResultFirstMint]; o != (audit.InvocationTotals{Invocations: 1}) {
		t.Errorf("remainder %+v, want the one invocation of the key past the bound", o)
	}
	if top := rep.InvocationsByIdentity[0]; top.CallerIdentity != "unix-peer:uid=0" || top.Invocations != 2 {
		t.Errorf("first row %+v, want unix-peer:uid=0's 2 first mints", top)
	}
}
