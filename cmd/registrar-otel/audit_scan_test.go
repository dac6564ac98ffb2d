package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// auditStore writes records into a fresh store and returns its directory.
// Records are stamped an hour ago, well past the settle grace.
func auditStore(t *testing.T, recs ...*audit.Record) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	at := time.Now().Add(-time.Hour)
	s, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range recs {
		if err := s.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func scanIntent(id string) *audit.Record {
	return &audit.Record{
		Phase: audit.PhaseIntent, RequestID: id, Verb: vocab.Mint, CallerIdentity: "unix-peer:uid=1000",
		Requested: &audit.Requested{ServiceName: "review", Host: "h1"},
	}
}

func scanOutcome(id string) *audit.Record {
	r := scanIntent(id)
	r.Phase = audit.PhaseOutcome
	r.Outcome = &audit.Outcome{Class: vocab.ClassRefused, Reason: vocab.ReasonComponentNotConfigured}
	return r
}

// scanRefusal is a refused outcome record of an authorization reason, as
// the registrar writes it: out_of_scope's detail names the scope, a
// not_owner or instance_ceiling refusal carries the registration id.
func scanRefusal(identity string, reason vocab.Reason, detail string) *audit.Record {
	scanRefusals++
	r := scanIntent(fmt.Sprintf("refused-%d", scanRefusals))
	r.Phase, r.CallerIdentity = audit.PhaseOutcome, identity
	r.Outcome = &audit.Outcome{Class: vocab.ClassRefused, Reason: reason, Detail: detail}
	if reason == vocab.ReasonNotOwner || reason == vocab.ReasonInstanceCeiling {
		r.RegistrationID = "h1-review"
	}
	return r
}

// scanRefusals numbers scanRefusal's request ids.
var scanRefusals int

func scanShadow(policy string, b vocab.Bucket, n uint64) *audit.Record {
	r := scanLimited(b, n)
	r.Policy, r.Shadow = policy, true
	return r
}

func scanReset(who, identity string) *audit.Record {
	return &audit.Record{
		Phase: audit.PhaseAdmin, CallerIdentity: who,
		Admin: &audit.Admin{Action: audit.ActionLimitsReset, Identity: identity, Verbs: []vocab.Verb{vocab.Mint}, Buckets: []vocab.Bucket{vocab.Admission}},
	}
}

func scanLimited(b vocab.Bucket, n uint64) *audit.Record {
	end := time.Now().Add(-time.Hour)
	return &audit.Record{
		Phase: audit.PhaseLimited, Verb: vocab.Mint, CallerIdentity: "unix-peer:uid=1000",
		LimitedBucket: b, Count: n, WindowStart: end.Add(-time.Minute), WindowEnd: end,
	}
}

func auditScanOutput(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runAuditScan(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestAuditScanCleanStoreExits0(t *testing.T) {
	dir := auditStore(t, scanIntent("q1"), scanOutcome("q1"), scanLimited(vocab.Admission, 7))
	code, out, errs := auditScanOutput("--dir", dir)
	if code != auditScanClean {
		t.Fatalf("exit %d, want 0; stderr %s", code, errs)
	}
	for _, want := range []string{"intent_without_outcome: 0", "malformed_records: 0", "admission", "1 records, 7 invocations", "result: clean"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestAuditScanAnomaliesExit1(t *testing.T) {
	dir := auditStore(t, scanIntent("crashed"), scanIntent("q2"), scanOutcome("q2"))
	f, err := os.OpenFile(filepath.Join(dir, audit.ActiveFileName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("not json\n")
	f.Close()

	code, out, _ := auditScanOutput("--dir", dir)
	if code != auditScanAnomalies {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	wantContains(t, "report", out,
		"intent_without_outcome: 1", "registrar-audit.jsonl:1 request_id crashed",
		"malformed_records: 1", "registrar-audit.jsonl:4 invalid_json", "ANOMALIES FOUND")
}

func TestAuditScanJSONIsStable(t *testing.T) {
	dir := auditStore(t, scanIntent("crashed"), scanLimited(vocab.PredecisionRefusal, 3))
	code, out, errs := auditScanOutput("--dir", dir, "--json", "--window", "48h")
	if code != auditScanAnomalies {
		t.Fatalf("exit %d, want 1; stderr %s", code, errs)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	keys := slices.Sorted(maps.Keys(got))
	want := []string{"admin", "anomalies", "by_policy", "by_policy_other", "dir", "evidence_gaps", "files", "grace_seconds", "intent_without_outcome",
		"late_limited_records", "limited", "malformed", "malformed_by_rule", "malformed_records", "now", "records", "refused", "refused_out_of_scope",
		"shadow_limited", "skipped", "store_anomalies", "unpaired_intents", "window_seconds"}
	if !slices.Equal(keys, want) {
		t.Errorf("got keys %v, want %v", keys, want)
	}
	if got["window_seconds"] != float64(48*3600) || got["intent_without_outcome"] != float64(1) || got["anomalies"] != true {
		t.Errorf("got %v", got)
	}
	lim := got["limited"].(map[string]any)
	if p := lim["predecision_refusal"].(map[string]any); p["records"] != float64(1) || p["count"] != float64(3) {
		t.Errorf("got limited %v, want predecision_refusal {1, 3}", lim)
	}
	if got["malformed"] == nil || got["skipped"] == nil || got["store_anomalies"] == nil || got["by_policy"] == nil ||
		got["admin"].(map[string]any)["records"] == nil {
		t.Error("empty lists are null; want []")
	}
}

func TestAuditScanUsageAndUnreadableStoreExit2(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, nil, 0o600)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "unknown flag --bogus"},
		{"positional argument", []string{"extra"}, "unexpected argument"},
		{"bad window", []string{"--window", "soon"}, `--window: got "soon", want a duration`},
		{"a day is no unit", []string{"--window", "1d"}, `--window: got "1d", want a duration: a number and a unit (ms, s, m or h), such as 90s or 24h; there is no d; for example: --window 24h`},
		{"negative window", []string{"--window", "-1h"}, `--window: got "-1h0m0s", want a positive duration`},
		{"unknown breakdown", []string{"--by", "identiy"}, `--by: got "identiy", want bucket or identity; did you mean identity?`},
		{"top without identity", []string{"--top", "3"}, "--top applies to --by identity only"},
		{"negative threshold", []string{"--fail-on-limited", "-1"}, `--fail-on-limited: got "-1", want a whole number, 0 or more`},
		{"missing store", []string{"--dir", filepath.Join(t.TempDir(), "none")}, "cannot read the record store"},
		{"store is a file", []string{"--dir", file}, "cannot read the record store"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := auditScanOutput(tc.args...)
			if code != auditScanFailed || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, tc.want)
			}
		})
	}
	if code, out, _ := auditScanOutput("-h"); code != auditScanClean || !strings.Contains(out, "usage: registrar-otel audit scan") {
		t.Errorf("-h: exit %d, stdout %q; want 0 and the usage", code, out)
	}
}

func TestAuditScanFindsTheDirectoryInTheConfig(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "records")
	cfg := filepath.Join(dir, "registrar.toml")
	writeFile(t, cfg, []byte(fmt.Sprintf("[registrar]\naudit_record_dir = %q\n[registrar.components.review]\nmultiplicity = \"many-per-host\"\n", records)), 0o600)
	// Missing directory: the scan names it (exit 2), proving it was read
	// from the configuration.
	var out, errOut bytes.Buffer
	if code := runAuditScan([]string{"--config", cfg}, &out, &errOut); code != auditScanFailed || !strings.Contains(errOut.String(), records) {
		t.Fatalf("exit %d, stderr %q; want 2 naming %s", code, errOut.String(), records)
	}
	mkdir(t, records, 0o700)
	out.Reset()
	errOut.Reset()
	if code := runAuditScan([]string{"--config", cfg}, &out, &errOut); code != auditScanClean {
		t.Fatalf("exit %d on an empty store from --config, want 0; stderr %s", code, errOut.String())
	}
}

func TestAuditScanListsARenamedActiveFileAndReportsTheMissingOne(t *testing.T) {
	dir := auditStore(t, scanIntent("q1"), scanOutcome("q1"))
	if err := os.Rename(filepath.Join(dir, audit.ActiveFileName), filepath.Join(dir, audit.ActiveFileName+".1")); err != nil {
		t.Fatal(err)
	}
	code, out, _ := auditScanOutput("--dir", dir)
	if code != auditScanAnomalies {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	wantContains(t, "report", out,
		"files read: 0, skipped: 1",
		"skipped registrar-audit.jsonl.1: unrecognised name",
		"store_anomalies: 1",
		"missing_active_file registrar-audit.jsonl:",
		"ANOMALIES FOUND")

	code, out, _ = auditScanOutput("--dir", dir, "--json")
	var got struct {
		Anomalies      bool `json:"anomalies"`
		Skipped        []struct{ Name, Reason string }
		StoreAnomalies []struct{ Kind, File, Detail string } `json:"store_anomalies"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != auditScanAnomalies {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if !got.Anomalies || len(got.StoreAnomalies) != 1 || got.StoreAnomalies[0].Kind != "missing_active_file" || got.StoreAnomalies[0].Detail == "" {
		t.Errorf("store_anomalies %+v", got.StoreAnomalies)
	}
	if len(got.Skipped) != 1 || got.Skipped[0].Name != "registrar-audit.jsonl.1" || !strings.HasPrefix(got.Skipped[0].Reason, "unrecognised name") {
		t.Errorf("skipped %+v", got.Skipped)
	}
}

func TestAuditScanReportsAGenerationGap(t *testing.T) {
	dir := auditStore(t, scanIntent("q1"), scanOutcome("q1"))
	for _, g := range []string{"registrar-audit-20260101T000000Z-000003.jsonl", "registrar-audit-20260101T000100Z-000005.jsonl"} {
		writeFile(t, filepath.Join(dir, g), nil, 0o600)
	}
	code, out, _ := auditScanOutput("--dir", dir, "--window", "87600h")
	if code != auditScanAnomalies || !strings.Contains(out, "generation_gap registrar-audit-20260101T000100Z-000005.jsonl: generation numbers jump from 000003") ||
		!strings.Contains(out, "1 generation(s) between them are missing") {
		t.Fatalf("exit %d, want 1 and the gap:\n%s", code, out)
	}
}

// TestAuditScanShowsShadowTotalsApartAndTheAdminRecords: shadow records
// are their own section, never in the limited totals, --by identity or
// --fail-on-limited; the policy table names each policy; the admin
// records say who reset whom. A store without them prints none of those
// sections.
func TestAuditScanShowsShadowTotalsApartAndTheAdminRecords(t *testing.T) {
	cp := scanLimited(vocab.Admission, 7)
	cp.Policy = "control-plane"
	dir := auditStore(t, scanLimited(vocab.Admission, 2), cp, scanShadow("agents", vocab.Admission, 500), scanShadow("agents", vocab.PredecisionRefusal, 3),
		scanReset("unix-peer:uid=0", "unix-peer:uid=1000"))
	code, out, errs := auditScanOutput("--dir", dir, "--by", "identity", "--fail-on-limited", "10")
	if code != auditScanClean {
		t.Fatalf("exit %d, want 0 (9 limited, not more than 10; 503 shadow never count); stderr %s\n%s", code, errs, out)
	}
	wantContains(t, "report", out,
		"records in window: 0 intent, 0 outcome, 4 limited, 1 admin",
		"limited (counted records of suppressed invocations):\n  predecision_refusal  0 records, 0 invocations\n  admission            2 records, 9 invocations",
		"shadow (counted records of calls their policy's shadow sizes would have limited; none was limited):\n  predecision_refusal  1 records, 3 invocations\n  admission            1 records, 500 invocations",
		"  agents         admission            shadow   1        500",
		"  control-plane  admission            limited  1        7",
		"  default        admission            limited  1        2",
		"admin (actions on the daemon's own state): 1 records\n  limits_reset         1",
		"limits_reset by unix-peer:uid=0: identity unix-peer:uid=1000, verbs mint, buckets admission",
		"unix-peer:uid=1000  admission  2        9",
		"fail-on-limited: 9 invocations limited in the window, not more than 10")

	plain := auditStore(t, scanLimited(vocab.Admission, 2))
	_, out, _ = auditScanOutput("--dir", plain)
	for _, absent := range []string{"shadow", "caller policy", "admin ("} {
		if strings.Contains(out, absent) {
			t.Errorf("a store without policies, shadows or admin records prints %q:\n%s", absent, out)
		}
	}
}

// TestAuditScanShowsEachCallersAuthorizationRefusals: the refusal totals
// are always printed, every reason (0 included); --by identity lists them
// per caller, reason and scope, most first, cut by --top (0 for all) apart
// from the limited rows; with --by identity and no refusal the JSON list is
// [], never absent; refusals are evidence: they change no exit status.
func TestAuditScanShowsEachCallersAuthorizationRefusals(t *testing.T) {
	plain := auditStore(t, scanIntent("q1"), scanOutcome("q1"))
	_, out, _ := auditScanOutput("--dir", plain)
	wantContains(t, "a store without refusals", out,
		"refused by caller authorization (CallerNotPermitted, InstanceCeilingReached; recorded refusals only, limited ones are under limited):\n"+
			"  no_policy            0 records\n"+
			"  out_of_scope         0 records (verb 0, service 0, component 0, host 0, unnamed 0)\n"+
			"  not_owner            0 records\n"+
			"  instance_ceiling     0 records\n")
	code, out, errs := auditScanOutput("--dir", plain, "--by", "identity", "--json")
	var empty map[string]any
	if err := json.Unmarshal([]byte(out), &empty); err != nil || code != auditScanClean {
		t.Fatalf("exit %d, %v; stderr %s", code, err, errs)
	}
	if rows, ok := empty["refused_by_identity"].([]any); !ok || len(rows) != 0 || empty["refused_by_identity_omitted"] != float64(0) {
		t.Errorf("--by identity without refusals: refused_by_identity %v, omitted %v; want [] and 0", empty["refused_by_identity"], empty["refused_by_identity_omitted"])
	}

	var recs []*audit.Record
	for range 3 {
		recs = append(recs, scanRefusal("registrar-client:dns:h2", vocab.ReasonOutOfScope, "component"))
	}
	recs = append(recs, scanRefusal("unix-peer:uid=1001", vocab.ReasonNoPolicy, ""), scanRefusal("unix-peer:uid=1001", vocab.ReasonNoPolicy, ""),
		scanRefusal("unix-peer:uid=1002", vocab.ReasonNotOwner, ""), scanLimited(vocab.PredecisionRefusal, 40))
	dir := auditStore(t, recs...)
	code, out, errs = auditScanOutput("--dir", dir, "--by", "identity", "--top", "1", "--fail-on-limited", "100")
	if code != auditScanClean {
		t.Fatalf("exit %d, want 0 (refusals are no anomaly, 40 limited not more than 100); stderr %s\n%s", code, errs, out)
	}
	wantContains(t, "report", out,
		"  no_policy            2 records\n  out_of_scope         3 records (verb 0, service 0, component 3, host 0, unnamed 0)\n  not_owner            1 records\n  instance_ceiling     0 records\n",
		"limited by caller identity (1 of 1, most limited invocations first):",
		"refused by caller identity (1 of 3, most refusals first):\n"+
			"  caller_identity          reason        scope      records\n"+
			"  registrar-client:dns:h2  out_of_scope  component  3\n"+
			"  ... and 2 more (--top 0 shows all)\n")
	_, out, _ = auditScanOutput("--dir", dir, "--by", "identity", "--top", "0")
	wantContains(t, "report with --top 0", out,
		"refused by caller identity (3 of 3, most refusals first):",
		"  unix-peer:uid=1001       no_policy     -          2\n  unix-peer:uid=1002       not_owner     -          1\n")
	_, out, _ = auditScanOutput("--dir", dir)
	if strings.Contains(out, "refused by caller identity") {
		t.Errorf("without --by identity the report lists refusals per identity:\n%s", out)
	}
}
