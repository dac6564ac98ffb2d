package main

import (
	"bytes"
	"context"
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
