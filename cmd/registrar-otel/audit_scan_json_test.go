package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestGoldenAuditScanJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "audit")
	s, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	lim := scanLimited(vocab.Admission, 41)
	lim.WindowStart, lim.WindowEnd = at.Add(-time.Minute), at
	// A record recovered after an unclean stop: window_end at the
	// checkpoint, written 30 s later at the restart.
	recovered := scanLimited(vocab.Admission, 9)
	recovered.WindowStart, recovered.WindowEnd = at.Add(-40*time.Second), at.Add(-30*time.Second)
	cp := scanLimited(vocab.Admission, 4)
	cp.Policy, cp.WindowStart, cp.WindowEnd = "control-plane", at.Add(-time.Minute), at
	shadow := scanShadow("agents", vocab.PredecisionRefusal, 12)
	shadow.WindowStart, shadow.WindowEnd = at.Add(-time.Minute), at
	reset := scanReset("unix-peer:uid=0", "registrar-client:uri:spiffe://example.org/agent/h7")
	reset.Admin.Verbs = []vocab.Verb{vocab.Deregister, vocab.Mint}
	for _, r := range []*audit.Record{scanIntent("r-1"), scanOutcome("r-1"), scanIntent("r-crashed"), lim, recovered, cp, shadow, reset} {
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: at.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeScanJSON(&out, scanView{rep: rep}); err != nil {
		t.Fatal(err)
	}
	golden(t, "audit_scan.json", []byte(strings.ReplaceAll(out.String(), dir, "$DIR")))
}

// TestGoldenAuditScanByIdentity holds both forms of --by identity --top 3
// over a store with limited records and authorization refusals of every
// reason: the rows most first, each list cut by --top with its own count
// of rows left out, out_of_scope split by scope (an unnamed one
// included), and the refusals of the keys past the scan's bound in the
// remainder.
func TestGoldenAuditScanByIdentity(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "audit")
	s, err := audit.Open(audit.Options{Dir: dir, MaxFileBytes: 64 << 20, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*audit.Record
	lim := func(id string, b vocab.Bucket, n uint64) {
		r := scanLimited(b, n)
		r.CallerIdentity, r.WindowStart, r.WindowEnd = id, at.Add(-time.Minute), at
		recs = append(recs, r)
	}
	lim("unix-peer:uid=6666", vocab.PredecisionRefusal, 8000)
	lim("unix-peer:uid=1000", vocab.Admission, 10)
	lim("unix-peer:uid=1001", vocab.Admission, 3)
	lim("unix-peer:uid=1002", vocab.Admission, 2)
	ref := func(id string, n int, reason vocab.Reason, detail string) {
		for range n {
			recs = append(recs, scanRefusal(id, reason, detail))
		}
	}
	ref("registrar-client:dns:h2", 5, vocab.ReasonOutOfScope, "host")
	ref("registrar-client:dns:h2", 1, vocab.ReasonOutOfScope, "service")
	ref("unix-peer:uid=1001", 4, vocab.ReasonNoPolicy, "")
	ref("unix-peer:uid=1002", 2, vocab.ReasonNotOwner, "")
	ref("registrar-client:dns:h3", 2, vocab.ReasonInstanceCeiling, "")
	ref("registrar-client:dns:h3", 3, vocab.ReasonOutOfScope, "") // names no scope
	// Past the scan's bound: one no_policy refusal each of as many more
	// identities, the last 3 summed in the remainder.
	for i := range audit.MaxScanIdentities - 6 + 3 {
		ref(fmt.Sprintf("unix-peer:uid=%d", 20000+i), 1, vocab.ReasonNoPolicy, "")
	}
	for i, err := range s.AppendBatch(context.Background(), recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	s.Close()
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: at.Add(time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	view := scanView{rep: rep, byIdentity: true, top: 3}
	var out bytes.Buffer
	if err := writeScanJSON(&out, view); err != nil {
		t.Fatal(err)
	}
	golden(t, "audit_scan_by_identity.json", []byte(strings.ReplaceAll(out.String(), dir, "$DIR")))
	out.Reset()
	if err := writeScanText(&out, view); err != nil {
		t.Fatal(err)
	}
	golden(t, "audit_scan_by_identity.txt", []byte(strings.ReplaceAll(out.String(), dir, "$DIR")))
}
