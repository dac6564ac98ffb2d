//go:build unix

package audit_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// refusalIDs numbers the refusals' request ids.
var refusalIDs atomic.Uint64

// refusal is a refused outcome record of reason by identity at ts, with
// detail (out_of_scope: the scope's spelling).
func refusal(identity string, reason vocab.Reason, detail string, ts time.Time) *audit.Record {
	r := outcome(fmt.Sprintf("RRRRRRRRRRRR.%d", refusalIDs.Add(1)), audit.Outcome{Class: vocab.ClassRefused, Reason: reason, Detail: detail})
	r.CallerIdentity, r.TS = identity, ts
	if reason != vocab.ReasonNotOwner && reason != vocab.ReasonInstanceCeiling {
		r.RegistrationID = "" // a pre-derivation refusal has no registration id
	}
	return r
}

// refusalStore writes, with the store, one refusal of every kind the scan
// must tell apart, and records it must not count: other refusals, other
// outcomes, the counted record of limited refusals (which wrote no
// outcome), and authorization refusals before the window. It returns the
// directory and the scan's options (window of an hour ending at now).
func refusalStore(t *testing.T) (string, audit.ScanOptions) {
	t.Helper()
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	now := t0.Add(time.Hour)
	in := t0.Add(30 * time.Minute)
	before := t0.Add(-time.Minute) // the window opens at t0
	var recs []*audit.Record
	add := func(n int, identity string, reason vocab.Reason, detail string, ts time.Time) {
		for i := range n {
			recs = append(recs, refusal(identity, reason, detail, ts.Add(time.Duration(i)*time.Millisecond)))
		}
	}
	add(4, "registrar-client:dns:h2", vocab.ReasonOutOfScope, "host", in)
	add(2, "registrar-client:dns:h2", vocab.ReasonOutOfScope, "service", in)
	add(1, "registrar-client:dns:h2", vocab.ReasonOutOfScope, "verb", in)
	add(1, "registrar-client:dns:h3", vocab.ReasonOutOfScope, "component", in)
	add(1, "registrar-client:dns:h3", vocab.ReasonOutOfScope, "", in)             // no detail: names no scope
	add(1, "registrar-client:dns:h3", vocab.ReasonOutOfScope, "service_name", in) // names none of the four
	add(3, "unix-peer:uid=1001", vocab.ReasonNoPolicy, "", in)                    // a group member with no policy
	add(2, "unix-peer:uid=1002", vocab.ReasonNotOwner, "", in)                    // another's registration
	add(2, "registrar-client:dns:h2", vocab.ReasonInstanceCeiling, "", in)        // detail may be empty
	add(1, "registrar-client:dns:h3", vocab.ReasonInstanceCeiling, "max_registrations", in)
	// Not authorization refusals, or not in the window: never counted.
	add(5, "registrar-client:dns:h2", vocab.ReasonInvalidHost, "", in)
	add(1, "registrar-client:dns:h2", vocab.ReasonBackendUnavailable, "embedded backend: bbolt: timeout", in)
	add(6, "unix-peer:uid=1001", vocab.ReasonNoPolicy, "", before)
	add(6, "registrar-client:dns:h2", vocab.ReasonOutOfScope, "host", before)
	ok := outcome("ok-1", audit.Outcome{Class: vocab.ClassFirstMint})
	ok.TS = in
	recs = append(recs, intent("ok-1"), ok)
	// 50 refusals of uid=1001 limited past predecision_refusal: a counted
	// record, no outcome.
	lim := limited(vocab.PredecisionRefusal, 50)
	lim.CallerIdentity, lim.TS, lim.WindowStart, lim.WindowEnd = "unix-peer:uid=1001", in, in.Add(-time.Minute), in
	recs = append(recs, lim)
	for _, r := range recs {
		appendOK(t, s, r)
	}
	return dir, audit.ScanOptions{Dir: dir, Now: now, Window: time.Hour}
}

// TestScanCountsTheRecordedAuthorizationRefusalsByReason: the refused
// outcome records of the four authorization reasons in the window are
// counted per reason, out_of_scope also per scope its detail names; other
// refusals, other outcomes, records before the window and the counted
// record of limited refusals are not; no breakdown without ByIdentity.
func TestScanCountsTheRecordedAuthorizationRefusalsByReason(t *testing.T) {
	_, opts := refusalStore(t)
	rep, err := audit.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var want [vocab.ReasonInstanceCeiling + 1]uint64
	want[vocab.ReasonNoPolicy] = 3
	want[vocab.ReasonOutOfScope] = 10
	want[vocab.ReasonNotOwner] = 2
	want[vocab.ReasonInstanceCeiling] = 3
	if rep.Refused != want {
		t.Errorf("Refused = %v, want %v", rep.Refused, want)
	}
	wantScope := [vocab.ScopeHost + 1]uint64{0: 2, vocab.ScopeVerb: 1, vocab.ScopeService: 2, vocab.ScopeComponent: 1, vocab.ScopeHost: 4}
	if rep.RefusedOutOfScope != wantScope {
		t.Errorf("RefusedOutOfScope = %v (unnamed, verb, service, component, host), want %v", rep.RefusedOutOfScope, wantScope)
	}
	if got := rep.Limited[vocab.PredecisionRefusal]; got != (audit.LimitedSummary{Records: 1, Count: 50}) {
		t.Errorf("limited predecision_refusal %+v, want 1 record of 50 (its refusals counted there only)", got)
	}
	if rep.RefusedByIdentity != nil || rep.RefusedOtherIdentities != [vocab.ReasonInstanceCeiling + 1]uint64{} {
		t.Errorf("without ByIdentity: RefusedByIdentity %+v, other %v; want none", rep.RefusedByIdentity, rep.RefusedOtherIdentities)
	}
	if rep.Anomalies() {
		t.Errorf("refusals are evidence, not anomalies: %+v", rep)
	}
	for _, r := range audit.AuthorizationReasons {
		if int(r) >= len(rep.Refused) || int(r) >= len(rep.RefusedOtherIdentities) {
			t.Errorf("reason %s is past the report's arrays", r)
		}
	}
}

// TestScanByIdentitySumsRefusalsPerIdentityReasonAndScope: with ByIdentity
// the refusals are summed per (caller identity, reason, scope), the most
// first, then by identity, reason and scope.
func TestScanByIdentitySumsRefusalsPerIdentityReasonAndScope(t *testing.T) {
	_, opts := refusalStore(t)
	opts.ByIdentity = true
	rep, err := audit.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	row := func(id string, r vocab.Reason, s vocab.Scope, n uint64) audit.IdentityRefused {
		return audit.IdentityRefused{CallerIdentity: id, Reason: r, Scope: s, Records: n}
	}
	want := []audit.IdentityRefused{
		row("registrar-client:dns:h2", vocab.ReasonOutOfScope, vocab.ScopeHost, 4),
		row("unix-peer:uid=1001", vocab.ReasonNoPolicy, 0, 3),
		row("registrar-client:dns:h2", vocab.ReasonOutOfScope, vocab.ScopeService, 2),
		row("registrar-client:dns:h2", vocab.ReasonInstanceCeiling, 0, 2),
		row("registrar-client:dns:h3", vocab.ReasonOutOfScope, 0, 2), // both details that name no scope
		row("unix-peer:uid=1002", vocab.ReasonNotOwner, 0, 2),
		row("registrar-client:dns:h2", vocab.ReasonOutOfScope, vocab.ScopeVerb, 1),
		row("registrar-client:dns:h3", vocab.ReasonOutOfScope, vocab.ScopeComponent, 1),
		row("registrar-client:dns:h3", vocab.ReasonInstanceCeiling, 0, 1),
	}
	if !slices.Equal(rep.RefusedByIdentity, want) {
		t.Errorf("RefusedByIdentity =\n%+v\nwant\n%+v", rep.RefusedByIdentity, want)
	}
	var sum uint64
	for _, r := range rep.RefusedByIdentity {
		sum += r.Records
	}
	if sum != 18 {
		t.Errorf("the rows sum %d refusals, want the 18 of Refused", sum)
	}
}

// TestScanRefusedByIdentityIsBounded: past MaxScanIdentities keys, the
// refusals of new keys are summed per reason in RefusedOtherIdentities and
// nothing is lost; the limited records' keys have their own bound, so a
// store full of them leaves room for every refusal.
func TestScanRefusedByIdentityIsBounded(t *testing.T) {
	s, dir := openStore(t, audit.Options{MaxFileBytes: 64 << 20}, audit.TestHooks{})
	const extra = 10
	recs := make([]*audit.Record, 0, 2*audit.MaxScanIdentities+extra+1)
	for i := range audit.MaxScanIdentities + extra {
		reason := vocab.ReasonNoPolicy
		if i >= audit.MaxScanIdentities+extra/2 {
			reason = vocab.ReasonOutOfScope
		}
		recs = append(recs, refusal(fmt.Sprintf("unix-peer:uid=%d", i), reason, "host", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	recs = append(recs, refusal("unix-peer:uid=0", vocab.ReasonNoPolicy, "", t0.Add(time.Hour))) // a kept key: counted in its row
	for i, err := range s.AppendBatch(context.Background(), recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(2 * time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.RefusedByIdentity); n != audit.MaxScanIdentities {
		t.Errorf("%d keys kept, want %d", n, audit.MaxScanIdentities)
	}
	if got := rep.RefusedOtherIdentities; got[vocab.ReasonNoPolicy] != extra/2 || got[vocab.ReasonOutOfScope] != extra/2 {
		t.Errorf("other identities %v, want %d no_policy and %d out_of_scope", got, extra/2, extra/2)
	}
	if top := rep.RefusedByIdentity[0]; top != (audit.IdentityRefused{CallerIdentity: "unix-peer:uid=0", Reason: vocab.ReasonNoPolicy, Records: 2}) {
		t.Errorf("first row %+v, want unix-peer:uid=0's 2 no_policy refusals", top)
	}
	if rep.Refused[vocab.ReasonNoPolicy]+rep.Refused[vocab.ReasonOutOfScope] != audit.MaxScanIdentities+extra+1 {
		t.Errorf("Refused %v, want all %d counted", rep.Refused, audit.MaxScanIdentities+extra+1)
	}

	// A store whose limited records fill their bound: the refusals' keys
	// are their own.
	s2, dir2 := openStore(t, audit.Options{MaxFileBytes: 64 << 20}, audit.TestHooks{})
	recs = recs[:0]
	for i := range audit.MaxScanIdentities + 1 {
		r := limited(vocab.Admission, 1)
		r.CallerIdentity = fmt.Sprintf("unix-peer:uid=%d", i)
		recs = append(recs, r)
	}
	recs = append(recs, refusal("unix-peer:uid=7", vocab.ReasonNotOwner, "", t0))
	for i, err := range s2.AppendBatch(context.Background(), recs) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	rep, err = audit.Scan(context.Background(), audit.ScanOptions{Dir: dir2, Now: t0.Add(time.Hour), ByIdentity: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.RefusedByIdentity) != 1 || rep.RefusedOtherIdentities[vocab.ReasonNotOwner] != 0 {
		t.Errorf("RefusedByIdentity %+v, other %v; want the one not_owner row", rep.RefusedByIdentity, rep.RefusedOtherIdentities)
	}
}

// TestScanCountsRefusalsWithoutAnAllocationPerRecord: counting refusals
// allocates per key, never per record: a store of 3000 refusals from three
// identities costs the scan what 3000 other outcomes cost, and ByIdentity
// adds only its few keys.
func TestScanCountsRefusalsWithoutAnAllocationPerRecord(t *testing.T) {
	const n = 3000
	write := func(o func(i int) audit.Outcome) string {
		s, dir := openStore(t, audit.Options{MaxFileBytes: 64 << 20}, audit.TestHooks{})
		recs := make([]*audit.Record, n)
		for i := range recs {
			r := outcome(fmt.Sprintf("AAAAAAAAAAAA.%d", i), o(i))
			r.CallerIdentity = fmt.Sprintf("registrar-client:dns:h%d", i%3)
			recs[i] = r
		}
		for i, err := range s.AppendBatch(context.Background(), recs) {
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		return dir
	}
	refusals := write(func(i int) audit.Outcome {
		return audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonOutOfScope, Detail: []string{"verb", "host", "bogus"}[i%3]}
	})
	others := write(func(int) audit.Outcome { return audit.Outcome{Class: vocab.ClassIdempotentRemint} })
	allocs := func(dir string, byIdentity bool) float64 {
		return testing.AllocsPerRun(3, func() {
			rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(time.Hour), ByIdentity: byIdentity})
			if err != nil || rep.Refused[vocab.ReasonOutOfScope]+rep.Records[audit.PhaseOutcome-1] == 0 {
				t.Fatalf("scan: %v %+v", err, rep)
			}
		})
	}
	base, counted, byIdentity := allocs(others, false), allocs(refusals, false), allocs(refusals, true)
	t.Logf("allocations a scan of %d outcomes: %.0f other outcomes, %.0f refusals, %.0f refusals with ByIdentity", n, base, counted, byIdentity)
	// Slack for the map and slice growth of a few keys, far below one
	// allocation per record.
	const slack = 64
	if counted > base+slack {
		t.Errorf("scanning %d refusals allocates %.0f, %d other outcomes %.0f: want at most %d more", n, counted, n, base, slack)
	}
	if byIdentity > counted+slack {
		t.Errorf("with ByIdentity %.0f allocations, without %.0f: want at most %d more for 3 keys", byIdentity, counted, slack)
	}
}
