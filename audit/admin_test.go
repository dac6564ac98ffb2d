package audit_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func adminBase() *audit.Record {
	return adminReset("unix-peer:uid=0", "unix-peer:uid=1000", []vocab.Verb{vocab.Mint}, []vocab.Bucket{vocab.Admission})
}

func shadowBase() *audit.Record {
	r := limited(vocab.Admission, 3)
	r.Policy, r.Shadow = "agents", true
	return r
}

func TestActionSpellingsAreTheSpecs(t *testing.T) {
	for a, want := range map[audit.Action]string{audit.ActionLimitsReset: "limits_reset"} {
		got, err := a.MarshalText()
		if err != nil || string(got) != want {
			t.Errorf("MarshalText = %q, %v; want %q", got, err, want)
		}
		var back audit.Action
		if err := back.UnmarshalText([]byte(want)); err != nil || back != a {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", want, back, err, a)
		}
	}
	if audit.Action(0).Valid() {
		t.Error("the zero Action is valid; want it invalid")
	}
	for _, bad := range []string{"", "Limits_reset", "limits-reset", "limits_reset "} {
		if _, err := audit.ParseAction(bad); err == nil {
			t.Errorf("ParseAction(%q) succeeded; want an error", bad)
		}
	}
	if p, err := audit.ParsePhase("admin"); err != nil || p != audit.PhaseAdmin {
		t.Errorf("ParsePhase(admin) = %v, %v", p, err)
	}
}

// TestValidateAdminPolicyAndShadow: the admin phase's and the limited
// record's new fields are checked like every other, naming the field.
func TestValidateAdminPolicyAndShadow(t *testing.T) {
	cases := []struct {
		name    string
		base    func() *audit.Record
		mutate  func(r *audit.Record)
		field   string
		missing bool
		phase   bool // *PhaseError (else *FieldError)
	}{
		{"admin without Admin", adminBase, func(r *audit.Record) { r.Admin = nil }, "action", true, true},
		{"admin with an unknown action", adminBase, func(r *audit.Record) { r.Admin.Action = 9 }, "action", false, false},
		{"admin with a verb", adminBase, func(r *audit.Record) { r.Verb = vocab.Deregister }, "verb", false, true},
		{"admin with a request_id", adminBase, func(r *audit.Record) { r.RequestID = "q1" }, "request_id", false, true},
		{"admin with requested", adminBase, func(r *audit.Record) { r.Requested = &audit.Requested{} }, "requested", false, true},
		{"admin with registration_id", adminBase, func(r *audit.Record) { r.RegistrationID = "x" }, "registration_id", false, true},
		{"admin with an outcome", adminBase, func(r *audit.Record) { r.Outcome = &audit.Outcome{Class: vocab.ClassFirstMint} }, "outcome", false, true},
		{"admin with a count", adminBase, func(r *audit.Record) { r.Count = 1 }, "count", false, true},
		{"admin with a bucket", adminBase, func(r *audit.Record) { r.LimitedBucket = vocab.Admission }, "limited_bucket", false, true},
		{"admin with a policy", adminBase, func(r *audit.Record) { r.Policy = "agents" }, "policy", false, true},
		{"admin with shadow", adminBase, func(r *audit.Record) { r.Shadow = true }, "shadow", false, true},
		{"admin with a window", adminBase, func(r *audit.Record) { r.WindowStart = t0 }, "window_start", false, true},
		{"reset without identity", adminBase, func(r *audit.Record) { r.Admin.Identity = "" }, "subject.identity", true, true},
		{"reset without verbs", adminBase, func(r *audit.Record) { r.Admin.Verbs = nil }, "subject.verbs", true, true},
		{"reset with no verb", adminBase, func(r *audit.Record) { r.Admin.Verbs = []vocab.Verb{} }, "subject.verbs", false, false},
		{"reset without buckets", adminBase, func(r *audit.Record) { r.Admin.Buckets = nil }, "subject.buckets", true, true},
		{"reset with an invalid verb", adminBase, func(r *audit.Record) { r.Admin.Verbs = []vocab.Verb{vocab.Mint, 5} }, "subject.verbs", false, false},
		{"reset with a verb twice", adminBase, func(r *audit.Record) { r.Admin.Verbs = []vocab.Verb{vocab.Deregister, vocab.Deregister} }, "subject.verbs", false, false},
		{"reset with an invalid bucket", adminBase, func(r *audit.Record) { r.Admin.Buckets = []vocab.Bucket{2} }, "subject.buckets", false, false},
		{"reset with a bucket twice", adminBase, func(r *audit.Record) {
			r.Admin.Buckets = []vocab.Bucket{vocab.Admission, vocab.PredecisionRefusal, vocab.Admission}
		}, "subject.buckets", false, false},
		{"reset truncated for another field", adminBase, func(r *audit.Record) {
			r.Truncated = map[string]audit.Truncation{audit.PathRequestedHost: {FullSHA256: strings.Repeat("a", 64), FullBytes: 600}}
		}, "truncated.requested.host", false, true},
		{"intent with an Admin", func() *audit.Record { return intent("q1") }, func(r *audit.Record) { r.Admin = adminBase().Admin }, "action", false, true},
		{"intent with a policy", func() *audit.Record { return intent("q1") }, func(r *audit.Record) { r.Policy = "agents" }, "policy", false, true},
		{"outcome with shadow", outcomeBase, func(r *audit.Record) { r.Shadow = true }, "shadow", false, true},
		{"limited with an Admin", limitedBase, func(r *audit.Record) { r.Admin = adminBase().Admin }, "action", false, true},
		{"limited with a policy of 65 bytes", shadowBase, func(r *audit.Record) { r.Policy = strings.Repeat("p", 65) }, "policy", false, false},
		{"limited with a policy with a space", shadowBase, func(r *audit.Record) { r.Policy = "a b" }, "policy", false, false},
		{"limited with a non-ASCII policy", shadowBase, func(r *audit.Record) { r.Policy = "정책" }, "policy", false, false},
		{"limited truncated subject.identity", limitedBase, func(r *audit.Record) {
			r.Truncated = map[string]audit.Truncation{audit.PathSubjectIdentity: {FullSHA256: strings.Repeat("a", 64), FullBytes: 600}}
		}, "truncated.subject.identity", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.base()
			tc.mutate(r)
			assertInvalid(t, r, tc.phase, tc.field, tc.missing)
		})
	}
}

// TestMarshalWritesSubjectListsInVocabOrder: the store writes a subject's
// lists in one order whatever order they came in, and never reorders the
// caller's slices.
func TestMarshalWritesSubjectListsInVocabOrder(t *testing.T) {
	verbs := []vocab.Verb{vocab.Deregister, vocab.Mint}
	buckets := []vocab.Bucket{vocab.Admission, vocab.PredecisionRefusal}
	r := adminReset("unix-peer:uid=0", "unix-peer:uid=1000", verbs, buckets)
	line := string(mustMarshal(t, r))
	if !strings.Contains(line, `"verbs":["mint","deregister"],"buckets":["predecision_refusal","admission"]`) {
		t.Errorf("line %s: lists not in vocab order", line)
	}
	if !slices.Equal(verbs, []vocab.Verb{vocab.Deregister, vocab.Mint}) || !slices.Equal(buckets, []vocab.Bucket{vocab.Admission, vocab.PredecisionRefusal}) {
		t.Errorf("Marshal reordered the caller's slices: %v %v", verbs, buckets)
	}
	back, err := audit.Unmarshal([]byte(line))
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if back.Admin == nil || back.Admin.Identity != "unix-peer:uid=1000" || back.CallerIdentity != "unix-peer:uid=0" ||
		!slices.Equal(back.Admin.Verbs, []vocab.Verb{vocab.Mint, vocab.Deregister}) ||
		!slices.Equal(back.Admin.Buckets, []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission}) {
		t.Errorf("decoded %+v %+v", back, back.Admin)
	}
}

// TestDefaultPolicyIsWrittenAsNoKey: a counted record of the default
// policy, whether the policy is "" or "default", is byte for byte the line
// written before policies existed, and reads back with no policy.
func TestDefaultPolicyIsWrittenAsNoKey(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "limited_counted.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", audit.DefaultPolicy} {
		r := limited(vocab.PredecisionRefusal, 42)
		r.Policy = p
		got := mustMarshal(t, r)
		if !bytes.Equal(got, want) {
			t.Errorf("policy %q: got %s, want the pre-policy line %s", p, got, want)
		}
		if r.Policy != p {
			t.Errorf("Marshal changed the caller's policy to %q", r.Policy)
		}
		back, err := audit.Unmarshal(got)
		if err != nil || back.Policy != "" || back.PolicyName() != audit.DefaultPolicy || back.Shadow {
			t.Errorf("read back %+v, %v; want policy \"\" (named %q), not shadow", back, err, audit.DefaultPolicy)
		}
	}
}

func TestShadowAndPolicyRoundTrip(t *testing.T) {
	r := shadowBase()
	back, err := audit.Unmarshal(mustMarshal(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if back.Policy != "agents" || !back.Shadow || back.PolicyName() != "agents" {
		t.Errorf("read back policy %q shadow %v", back.Policy, back.Shadow)
	}
}

func TestCheckPolicy(t *testing.T) {
	for name, ok := range map[string]bool{
		"default": true, "control-plane": true, "a": true, strings.Repeat("p", 64): true, `a"b\c`: true,
		"": false, strings.Repeat("p", 65): false, "a b": false, "tab\t": false, "é": false, "\x7f": false,
	} {
		if err := audit.CheckPolicy(name); (err == nil) != ok {
			t.Errorf("CheckPolicy(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
