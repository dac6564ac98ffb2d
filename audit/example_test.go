//go:build unix

package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Example writes an intent and its outcome, shows the two lines, and scans
// the store.
func Example() {
	base, err := os.MkdirTemp("", "audit-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "audit")
	clock := time.Date(2026, 8, 23, 12, 34, 56, 789_000_000, time.UTC)

	store, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return clock }})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	rec := &audit.Record{
		Phase:          audit.PhaseIntent, // TS left zero: the store stamps it
		RequestID:      "Zm9vYmFyYmF6.1",
		Verb:           vocab.Mint,
		CallerIdentity: "unix-peer:uid=1000",
		Requested:      &audit.Requested{ServiceName: "review", Host: "h1", Instance: 7},
	}
	if err := store.Append(ctx, rec); err != nil {
		fmt.Println(err) // the verb refuses: the intent is unrecordable
		return
	}
	rec.Phase = audit.PhaseOutcome
	rec.RegistrationID = "h1-review-007"
	rec.Outcome = &audit.Outcome{Class: vocab.ClassFirstMint}
	if err := store.Append(ctx, rec); err != nil {
		fmt.Println(err)
		return
	}
	if err := store.Close(); err != nil {
		fmt.Println(err)
		return
	}

	content, _ := os.ReadFile(filepath.Join(dir, audit.ActiveFileName))
	fmt.Print(string(content))

	report, err := audit.Scan(ctx, audit.ScanOptions{Dir: dir, Now: clock.Add(time.Hour)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("anomalies:", report.Anomalies())
	// Output:
	// {"record_version":1,"phase":"intent","ts":"2026-08-23T12:34:56.789Z","request_id":"Zm9vYmFyYmF6.1","verb":"mint","caller_identity":"unix-peer:uid=1000","requested":{"service_name":"review","host":"h1","instance":7}}
	// {"record_version":1,"phase":"outcome","ts":"2026-08-23T12:34:56.789Z","request_id":"Zm9vYmFyYmF6.1","verb":"mint","caller_identity":"unix-peer:uid=1000","requested":{"service_name":"review","host":"h1","instance":7},"registration_id":"h1-review-007","outcome":{"class":"first_mint"}}
	// anomalies: false
}

// ExampleAdmin records an operator's `registrar-otel limits reset`: who
// reset (caller_identity) which identity's buckets (the subject). The
// subject's lists are written in vocab order whatever order they are
// given in.
func ExampleAdmin() {
	rec := &audit.Record{
		Phase:          audit.PhaseAdmin,
		TS:             time.Date(2026, 8, 23, 12, 40, 0, 0, time.UTC),
		CallerIdentity: "unix-peer:uid=0",
		Admin: &audit.Admin{
			Action:   audit.ActionLimitsReset,
			Identity: "registrar-client:uri:spiffe://example.org/agent/h7",
			Verbs:    []vocab.Verb{vocab.Deregister, vocab.Mint},
			Buckets:  []vocab.Bucket{vocab.Admission},
		},
	}
	// In the daemon: store.Append(ctx, rec), whose error the command
	// answers; Marshal shows the line Append writes.
	line, err := audit.Marshal(rec)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(line))
	// Output:
	// {"record_version":1,"phase":"admin","ts":"2026-08-23T12:40:00.000Z","caller_identity":"unix-peer:uid=0","action":"limits_reset","subject":{"identity":"registrar-client:uri:spiffe://example.org/agent/h7","verbs":["mint","deregister"],"buckets":["admission"]}}
}
