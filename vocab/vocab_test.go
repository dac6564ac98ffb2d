package vocab_test

import (
	"errors"
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
)

type textEnum interface {
	MarshalText() ([]byte, error)
	String() string
}

// The spellings are the specs' (wire, audit line, configuration, metric
// label): a change here is a change of every surface.
func TestEnumSpellingsAreTheSpecs(t *testing.T) {
	cases := []struct {
		v    textEnum
		want string
	}{
		{vocab.Mint, "mint"},
		{vocab.Deregister, "deregister"},
		{vocab.PredecisionRefusal, "predecision_refusal"},
		{vocab.Admission, "admission"},
		{vocab.ClassFirstMint, "first_mint"},
		{vocab.ClassIdempotentRemint, "idempotent_remint"},
		{vocab.ClassIdentityRemoved, "identity_removed"},
		{vocab.ClassIdempotentAlreadyAbsent, "idempotent_already_absent"},
		{vocab.ClassRefused, "refused"},
		{vocab.ReasonInvalidServiceName, "invalid_service_name"},
		{vocab.ReasonInvalidHost, "invalid_host"},
		{vocab.ReasonReservedServiceName, "reserved_service_name"},
		{vocab.ReasonSpecIdentityDisagreement, "spec_identity_disagreement"},
		{vocab.ReasonComponentNotConfigured, "component_not_configured"},
		{vocab.ReasonServiceInstanceMismatch, "service_instance_mismatch"},
		{vocab.ReasonInvalidWrapTTL, "invalid_wrap_ttl"},
		{vocab.ReasonDerivedKeyInvalid, "derived_key_invalid"},
		{vocab.ReasonRegistrationIDCollision, "registration_id_collision"},
		{vocab.ReasonStoredSpecConflict, "stored_spec_conflict"},
		{vocab.ReasonHostMismatch, "host_mismatch"},
		{vocab.ReasonBackendUnavailable, "backend_unavailable"},
		{vocab.OnePerDeployment, "one-per-deployment"},
		{vocab.OnePerHost, "one-per-host"},
		{vocab.ManyPerHost, "many-per-host"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			got, err := tc.v.MarshalText()
			if err != nil || string(got) != tc.want || tc.v.String() != tc.want {
				t.Fatalf("MarshalText = %q, %v, String = %q; want %q", got, err, tc.v.String(), tc.want)
			}
		})
	}
}

// Each type round-trips every value through its text, and refuses what is
// not one of its spellings.
func TestEveryValueRoundTripsAndMisspellingsAreRefused(t *testing.T) {
	n := 0
	for v := vocab.Verb(0); v < vocab.NumVerbs; v++ {
		var back vocab.Verb
		if err := back.UnmarshalText([]byte(v.String())); err != nil || back != v {
			t.Errorf("Verb %v: UnmarshalText = %v, %v", v, back, err)
		}
		n++
	}
	for b := vocab.Bucket(0); b < vocab.NumBuckets; b++ {
		if got, err := vocab.ParseBucket(b.String()); err != nil || got != b {
			t.Errorf("ParseBucket(%q) = %v, %v", b, got, err)
		}
		var back vocab.Bucket
		if err := back.UnmarshalText([]byte(b.String())); err != nil || back != b {
			t.Errorf("Bucket %v: UnmarshalText = %v, %v", b, back, err)
		}
		n++
	}
	for c := vocab.ClassFirstMint; c <= vocab.ClassRefused; c++ {
		var back vocab.OutcomeClass
		if got, err := vocab.ParseOutcomeClass(c.String()); err != nil || got != c || back.UnmarshalText([]byte(c.String())) != nil || back != c {
			t.Errorf("OutcomeClass %v: Parse = %v, %v; UnmarshalText = %v", c, got, err, back)
		}
		n++
	}
	reasons := 0
	for r := vocab.ReasonInvalidServiceName; r.Valid(); r++ {
		var back vocab.Reason
		if got, err := vocab.ParseReason(r.String()); err != nil || got != r || back.UnmarshalText([]byte(r.String())) != nil || back != r {
			t.Errorf("Reason %v: Parse = %v, %v; UnmarshalText = %v", r, got, err, back)
		}
		reasons++
	}
	if reasons != 16 {
		t.Errorf("got %d reasons, want 16", reasons)
	}
	scopes := 0
	for s := vocab.ScopeVerb; s.Valid(); s++ {
		var back vocab.Scope
		if got, err := vocab.ParseScope(s.String()); err != nil || got != s || back.UnmarshalText([]byte(s.String())) != nil || back != s {
			t.Errorf("Scope %v: Parse = %v, %v; UnmarshalText = %v", s, got, err, back)
		}
		scopes++
	}
	if scopes != 4 || vocab.ScopeVerb.String() != "verb" || vocab.ScopeHost.String() != "host" {
		t.Errorf("got %d scopes (verb %q, host %q), want 4 from verb to host", scopes, vocab.ScopeVerb, vocab.ScopeHost)
	}
	for c := vocab.CeilingInstancesPerHost; c <= vocab.CeilingRegistrations; c++ {
		var back vocab.Ceiling
		if got, err := vocab.ParseCeiling(c.String()); err != nil || got != c || back.UnmarshalText([]byte(c.String())) != nil || back != c {
			t.Errorf("Ceiling %v: Parse = %v, %v; UnmarshalText = %v", c, got, err, back)
		}
	}
	for o := vocab.OwnerSelf; o <= vocab.OwnerAny; o++ {
		var back vocab.Owner
		if got, err := vocab.ParseOwner(o.String()); err != nil || got != o || back.UnmarshalText([]byte(o.String())) != nil || back != o {
			t.Errorf("Owner %v: Parse = %v, %v; UnmarshalText = %v", o, got, err, back)
		}
	}
	if vocab.OwnerSelf.String() != "self" || vocab.OwnerPolicy.String() != "policy" || vocab.OwnerAny.String() != "any" || vocab.Owner(0).Valid() || vocab.Owner(4).Valid() {
		t.Errorf("owner scopes spelt %q %q %q, want self policy any, and 0 and 4 invalid", vocab.OwnerSelf, vocab.OwnerPolicy, vocab.OwnerAny)
	}
	if vocab.CeilingInstancesPerHost.String() != "max_instances_per_host" || vocab.CeilingRegistrations.String() != "max_registrations" {
		t.Errorf("ceilings spelt %q and %q, want the configuration keys", vocab.CeilingInstancesPerHost, vocab.CeilingRegistrations)
	}
	for _, m := range []vocab.Multiplicity{vocab.OnePerDeployment, vocab.OnePerHost, vocab.ManyPerHost} {
		var back vocab.Multiplicity
		if got, err := vocab.ParseMultiplicity(m.String()); err != nil || got != m || back.UnmarshalText([]byte(m.String())) != nil || back != m {
			t.Errorf("Multiplicity %v: Parse = %v, %v; UnmarshalText = %v", m, got, err, back)
		}
	}
	if n != 2+2+5 {
		t.Errorf("walked %d verbs, buckets and classes, want 9", n)
	}
	for _, bad := range []string{"", "Mint", "MINT", "mint ", " deregister", "admission", "other"} {
		if _, err := vocab.ParseVerb(bad); !errors.Is(err, vocab.ErrUnknown) {
			t.Errorf("ParseVerb(%q) = %v; want ErrUnknown", bad, err)
		}
	}
	for _, bad := range []string{"", "Admission", "throttled", "mint"} {
		if _, err := vocab.ParseBucket(bad); !errors.Is(err, vocab.ErrUnknown) {
			t.Errorf("ParseBucket(%q) = %v; want ErrUnknown", bad, err)
		}
	}
	var c vocab.OutcomeClass
	var r vocab.Reason
	if c.UnmarshalText([]byte("Refused")) == nil || r.UnmarshalText([]byte("other")) == nil {
		t.Error("UnmarshalText accepted a misspelling")
	}
	for _, in := range []string{"", "Many-Per-Host", " many-per-host", "many-per-host ", "many_per_host", "sometimes"} {
		if got, err := vocab.ParseMultiplicity(in); !errors.Is(err, vocab.ErrUnknown) {
			t.Errorf("ParseMultiplicity(%q) = %v, %v; want ErrUnknown", in, got, err)
		}
	}
}

// The zero value of the enums that start at 1 is no value: a record or a
// component that forgot to set one fails validation.
func TestZeroValuesThatAreNotMembers(t *testing.T) {
	if vocab.Reason(0).Valid() || vocab.OutcomeClass(0).Valid() || vocab.Multiplicity(0).Valid() || vocab.Scope(0).Valid() || vocab.Ceiling(0).Valid() {
		t.Error("a zero Reason, OutcomeClass, Multiplicity, Scope or Ceiling is valid; want invalid")
	}
	if !vocab.Verb(0).Valid() || vocab.Verb(0) != vocab.Mint || !vocab.Bucket(0).Valid() {
		t.Error("the zero Verb and Bucket must be Mint and PredecisionRefusal")
	}
	for _, v := range []textEnum{vocab.Reason(0), vocab.OutcomeClass(0), vocab.Multiplicity(0), vocab.Verb(2), vocab.Bucket(2), vocab.Scope(0), vocab.Scope(5), vocab.Ceiling(0), vocab.Ceiling(3)} {
		if _, err := v.MarshalText(); err == nil {
			t.Errorf("%v.MarshalText succeeded; want an error", v)
		}
	}
	for _, c := range []struct {
		v    textEnum
		want string
	}{
		{vocab.Multiplicity(0), "multiplicity(0)"},
		{vocab.Verb(7), "Verb(7)"},
		{vocab.Bucket(2), "Bucket(2)"},
		{vocab.Reason(17), "Reason(17)"},
		{vocab.OutcomeClass(0), "OutcomeClass(0)"},
		{vocab.Scope(5), "Scope(5)"},
		{vocab.Ceiling(3), "Ceiling(3)"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}
