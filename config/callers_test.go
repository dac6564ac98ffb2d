package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/vocab"
)

const allSizesSet = SetAdmissionBurst | SetAdmissionRefillInterval | SetPredecisionRefusalBurst | SetPredecisionRefusalRefillInterval

// TestCallerPoliciesLoadSortedWithTheirSizes: the example loads
// into policies sorted by name; a size a policy leaves unset is the
// [registrar] key's, a size a shadow leaves unset the policy's, and Set
// says which the file set.
func TestCallerPoliciesLoadSortedWithTheirSizes(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "valid_callers.toml"), nil, nil)
	if err != nil {
		t.Fatal(errorLines(err))
	}
	want := []CallerPolicy{
		{
			Name:             "agents",
			IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/host/"},
			Sizes:            CallerSizes{AdmissionBurst: 4, AdmissionRefillIntervalMS: 500, PredecisionRefusalBurst: 32, PredecisionRefusalRefillIntervalMS: 1000, Set: SetAdmissionBurst},
			Owner:            vocab.OwnerSelf, // the default, filled
		},
		{
			Name:             "control-plane",
			Identities:       []string{"unix-peer:uid=0"},
			IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/control-plane/"},
			Sizes:            CallerSizes{AdmissionBurst: 1600, AdmissionRefillIntervalMS: 100, PredecisionRefusalBurst: 32, PredecisionRefusalRefillIntervalMS: 1000, Set: SetAdmissionBurst | SetAdmissionRefillInterval},
			Shadow:           &CallerSizes{AdmissionBurst: 800, AdmissionRefillIntervalMS: 100, PredecisionRefusalBurst: 32, PredecisionRefusalRefillIntervalMS: 1000, Set: SetAdmissionBurst},
			Owner:            vocab.OwnerSelf,
		},
	}
	if !reflect.DeepEqual(cfg.Registrar.Callers, want) {
		t.Errorf("Callers =\n%+v\nwant\n%+v", cfg.Registrar.Callers, want)
	}
	r := cfg.Registrar
	if got, want := r.DefaultSizes(), (CallerSizes{AdmissionBurst: 8, AdmissionRefillIntervalMS: 500, PredecisionRefusalBurst: 32, PredecisionRefusalRefillIntervalMS: 1000}); got != want {
		t.Errorf("DefaultSizes() = %+v, want %+v", got, want)
	}
	cp, ok := r.Policy("control-plane")
	if !ok || cp.EnforcedSizes() != want[1].Sizes || cp.ShadowSizes() != *want[1].Shadow {
		t.Errorf("Policy(control-plane) = %+v, %v: enforced %+v, shadow %+v", cp, ok, cp.EnforcedSizes(), cp.ShadowSizes())
	}
	agents, _ := r.Policy("agents")
	if agents.ShadowSizes() != agents.EnforcedSizes() {
		t.Errorf("a policy without a shadow: ShadowSizes() = %+v, want its enforced %+v", agents.ShadowSizes(), agents.EnforcedSizes())
	}
	if _, ok := r.Policy(callers.DefaultName); ok {
		t.Errorf(`Policy("default") found a policy; the default is DefaultSizes`)
	}
	if _, ok := r.Policy("nope"); ok {
		t.Errorf("Policy(nope) found a policy")
	}
}

// TestCallersMatcherIndexesTheConfiguredPolicies: policy i of the Matcher
// is Registrar.Callers[i].
func TestCallersMatcherIndexesTheConfiguredPolicies(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "valid_callers.toml"), nil, nil)
	if err != nil {
		t.Fatal(errorLines(err))
	}
	m, err := cfg.Registrar.CallersMatcher()
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"unix-peer:uid=0": "control-plane",
		"registrar-client:uri:spiffe://example.org/control-plane/eu1": "control-plane",
		"registrar-client:uri:spiffe://example.org/host/web-1":        "agents",
		"unix-peer:uid=1000": callers.DefaultName,
	} {
		i, ok := m.Match(id)
		if m.Name(i) != want || (ok && cfg.Registrar.Callers[i].Name != want) {
			t.Errorf("Match(%q) = %d (%s), want %s", id, i, m.Name(i), want)
		}
	}
}

func TestSizeValuesAreTheFourKeysInDocumentationOrder(t *testing.T) {
	s := CallerSizes{AdmissionBurst: 1, AdmissionRefillIntervalMS: 2, PredecisionRefusalBurst: 3, PredecisionRefusalRefillIntervalMS: 4, Set: SetAdmissionRefillInterval | SetPredecisionRefusalRefillInterval}
	want := []SizeValue{
		{"rate_limit_admission_burst", 1, false},
		{"rate_limit_admission_refill_interval_ms", 2, true},
		{"rate_limit_predecision_refusal_burst", 3, false},
		{"rate_limit_predecision_refusal_refill_interval_ms", 4, true},
	}
	if got := s.Values(); !slices.Equal(got, want) {
		t.Errorf("Values() = %+v, want %+v", got, want)
	}
	// The keys are the [registrar] keys of the same names, whose values
	// DefaultSizes takes.
	r := Default().Registrar
	for i, v := range r.DefaultSizes().Values() {
		var row Row
		for _, x := range Table() {
			if x.Key == "registrar."+want[i].Key {
				row = x
			}
		}
		if row.Key == "" || row.Default != showU32(v.Value) {
			t.Errorf("DefaultSizes %s = %d; the [registrar] row %+v", v.Key, v.Value, row)
		}
	}
	if !allSizesSet.Has(SetAdmissionBurst|SetPredecisionRefusalBurst) || SetAdmissionBurst.Has(SetAdmissionBurst|SetAdmissionRefillInterval) {
		t.Error("SizeSet.Has is not a subset test")
	}
}

// TestCallerSizesFromTheEnvironment: a variable sets a size of a policy the
// file defines, and of its shadow, as it sets a [registrar] key.
func TestCallerSizesFromTheEnvironment(t *testing.T) {
	cfg := mustLoadBytes(t, "[registrar.callers.agents]\nidentity_prefixes = [\"registrar-client:dns:\"]\n",
		"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__RATE_LIMIT_ADMISSION_BURST=16",
		"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__SHADOW__RATE_LIMIT_ADMISSION_REFILL_INTERVAL_MS=2000")
	p := cfg.Registrar.Callers[0]
	if p.Sizes.AdmissionBurst != 16 || p.Sizes.Set != SetAdmissionBurst {
		t.Errorf("sizes %+v, want the admission burst 16 set", p.Sizes)
	}
	if p.Shadow == nil || *p.Shadow != (CallerSizes{AdmissionBurst: 16, AdmissionRefillIntervalMS: 2000, PredecisionRefusalBurst: 32, PredecisionRefusalRefillIntervalMS: 1000, Set: SetAdmissionRefillInterval}) {
		t.Errorf("shadow %+v, want the interval 2000 set and the rest the policy's", p.Shadow)
	}
}

// TestCallerListsCannotComeFromTheEnvironment: identities and prefixes are
// arrays, which a variable cannot spell; every refusal names the variable.
func TestCallerListsCannotComeFromTheEnvironment(t *testing.T) {
	file := "[registrar.callers.agents]\nidentity_prefixes = [\"registrar-client:dns:\"]\n"
	for _, c := range []struct {
		env, want string
	}{
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__IDENTITIES=unix-peer:uid=0",
			`registrar.callers.agents.identities cannot be set from the environment: it is an array of strings, set it in the configuration file, got "unix-peer:uid=0" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__IDENTITIES)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__IDENTITY_PREFIXES=unix-peer:",
			`registrar.callers.agents.identity_prefixes cannot be set from the environment: it is an array of strings, set it in the configuration file, got "unix-peer:" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__IDENTITY_PREFIXES)`},
		// A policy only variables make names no caller.
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__BULK__RATE_LIMIT_ADMISSION_BURST=1600",
			`registrar.callers.bulk.identities must name at least one identity unless identity_prefixes names a prefix: a policy that names neither applies to no caller (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__BULK__RATE_LIMIT_ADMISSION_BURST)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__BULK__SHADOW__RATE_LIMIT_ADMISSION_BURST=1600",
			`registrar.callers.bulk.identities must name at least one identity unless identity_prefixes names a prefix: a policy that names neither applies to no caller (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__BULK__SHADOW__RATE_LIMIT_ADMISSION_BURST)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS=agents",
			`registrar.callers must be a table of caller policies, one [registrar.callers.<name>] table each, got "agents" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS=x",
			`registrar.callers.agents must be a table: [registrar.callers.agents] with identities, identity_prefixes and the rate_limit_* keys, got "x" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__RATE_LIMIT_ADMISSION_BURST=0",
			`registrar.callers.agents.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__RATE_LIMIT_ADMISSION_BURST)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__RATE_LIMIT_ADMISSION_BURST=1.5",
			`registrar.callers.agents.rate_limit_admission_burst must be an unsigned integer, got "1.5" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__RATE_LIMIT_ADMISSION_BURST)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__BURST=8",
			`registrar.callers.agents.burst is not a key of a caller policy: it takes identities, identity_prefixes, the four rate_limit_* keys, the four scope_* keys, scope_owner, max_registrations and a shadow table (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__BURST)`},
	} {
		if got := loadErrors(t, file, c.env); got != c.want+"\n" {
			t.Errorf("with %s:\n%swant:\n%s", c.env, got, c.want)
		}
	}
}

// TestATooLongIdentityIsRefused: the bound is the server's own; the
// message shows the start of the identity and its length.
func TestATooLongIdentityIsRefused(t *testing.T) {
	at := "unix-peer:uid=" + strings.Repeat("0", callers.MaxIdentityBytes-len("unix-peer:uid="))
	mustLoadBytes(t, "[registrar.callers.a]\nidentities = [\""+at+"\"]\n")
	got := loadErrors(t, "[registrar.callers.a]\nidentity_prefixes = [\""+at+"0\"]\n")
	want := `registrar.callers.a.identity_prefixes[0] must be at most 512 bytes, the longest identity the server gives, got "unix-peer:uid=` + strings.Repeat("0", 200-len("unix-peer:uid=")) + `"… (513 bytes)` + "\n"
	if got != want {
		t.Errorf("errors:\n%swant:\n%s", got, want)
	}
}

// TestCallerErrorsComePolicyByPolicy: decoding and validation errors of the
// policies are reported in one order, policy by policy, keys in
// documentation order, after the [registrar] keys before them.
func TestCallerErrorsComePolicyByPolicy(t *testing.T) {
	got := loadErrors(t, `[registrar]
rate_limit_admission_burst = 0
[registrar.callers.b]
rate_limit_admission_burst = 0
rate_limit_predecision_refusal_burst = 1.5
[registrar.callers.a]
identities = ["x"]
rate_limit_admission_burst = -1
[registrar.callers.a.shadow]
rate_limit_admission_burst = 0
`)
	want := `registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint
registrar.callers.a.rate_limit_admission_burst must be an unsigned integer, got -1
registrar.callers.a.shadow.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint
registrar.callers.b.identities must name at least one identity unless identity_prefixes names a prefix: a policy that names neither applies to no caller
registrar.callers.b.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint
registrar.callers.b.rate_limit_predecision_refusal_burst must be an unsigned integer, got 1.5
`
	if got != want {
		t.Errorf("errors:\n%swant:\n%s", got, want)
	}
}

// TestAZeroDefaultIsReportedOnceNotPerPolicy: a policy that inherits a
// zero from [registrar] adds no error of its own; the one of the key it
// inherits from says it all.
func TestAZeroDefaultIsReportedOnceNotPerPolicy(t *testing.T) {
	got := loadErrors(t, "[registrar]\nrate_limit_admission_burst = 0\n[registrar.callers.a]\nidentities = [\"x\"]\n[registrar.callers.a.shadow]\n")
	if want := "registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint\n"; got != want {
		t.Errorf("errors:\n%swant:\n%s", got, want)
	}
}

// TestValidateChecksHandBuiltPolicies: a Config built in code is held to
// the rules Load applies, a zero left unset included.
func TestValidateChecksHandBuiltPolicies(t *testing.T) {
	good := CallerSizes{AdmissionBurst: 1, AdmissionRefillIntervalMS: 1, PredecisionRefusalBurst: 1, PredecisionRefusalRefillIntervalMS: 1}
	c := Default()
	c.Registrar.Callers = []CallerPolicy{
		{Name: "a", Identities: []string{"x"}, Sizes: good},
		{Name: "a", Identities: []string{"y"}, Sizes: good},                                                     // the name twice
		{Name: "b", Identities: []string{"x"}, Sizes: CallerSizes{AdmissionRefillIntervalMS: 1}},                // zeros, unset: forgotten
		{Name: "c", IdentityPrefixes: []string{"p"}, Sizes: good, Shadow: &CallerSizes{Set: SetAdmissionBurst}}, // zeros in the shadow
		{Name: "d", Sizes: good},
	}
	sameErrors(t, c.Validate(), []string{
		"registrar.callers.b.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint",
		"registrar.callers.b.rate_limit_predecision_refusal_burst must be greater than 0; a zero burst throttles the first legitimate mint",
		"registrar.callers.b.rate_limit_predecision_refusal_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently",
		"registrar.callers.c.shadow.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint",
		"registrar.callers.c.shadow.rate_limit_admission_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently",
		"registrar.callers.c.shadow.rate_limit_predecision_refusal_burst must be greater than 0; a zero burst throttles the first legitimate mint",
		"registrar.callers.c.shadow.rate_limit_predecision_refusal_refill_interval_ms must be greater than 0; a zero interval is an unbounded token supply that disables the limiter silently",
		"registrar.callers.d.identities must name at least one identity unless identity_prefixes names a prefix: a policy that names neither applies to no caller",
		"registrar.callers.a names two policies",
		`registrar.callers.b.identities[0] must not name an identity registrar.callers.a.identities names too: an identity takes one policy, got "x"`,
	})
	for _, e := range Errors(c.Validate()) {
		var ke *KeyError
		if !errors.As(e, &ke) {
			t.Errorf("%v is a %T, want a *KeyError", e, e)
		}
	}
}

// TestDiffReportsOneLiveChangePerPolicy: a policy added, changed or
// removed is one live change named for it; a policy that only inherits a
// changed default does not change (the default's own change is reported).
func TestDiffReportsOneLiveChangePerPolicy(t *testing.T) {
	old := mustLoadBytes(t, `
[registrar.callers.agents]
identity_prefixes = ["registrar-client:dns:"]
[registrar.callers.bulk]
identities = ["unix-peer:uid=0"]
rate_limit_admission_burst = 1600
[registrar.callers.gone]
identities = ["unix-peer:uid=1"]
`)
	new := mustLoadBytes(t, `
[registrar]
rate_limit_admission_burst = 8
[registrar.callers.agents]
identity_prefixes = ["registrar-client:dns:"]
[registrar.callers.bulk]
identities = ["unix-peer:uid=0"]
rate_limit_admission_burst = 1600
[registrar.callers.bulk.shadow]
rate_limit_admission_burst = 800
[registrar.callers.added]
identities = ["unix-peer:uid=2", "unix-peer:uid=3"]
`)
	want := []Change{
		{Key: "registrar.rate_limit_admission_burst", Old: "512", New: "8", Live: true},
		{Key: "registrar.callers.added", Old: "", New: `identities=["unix-peer:uid=2","unix-peer:uid=3"] identity_prefixes=[]`, Live: true},
		{Key: "registrar.callers.bulk", Old: `identities=["unix-peer:uid=0"] identity_prefixes=[] rate_limit_admission_burst=1600`,
			New: `identities=["unix-peer:uid=0"] identity_prefixes=[] rate_limit_admission_burst=1600 shadow shadow.rate_limit_admission_burst=800`, Live: true},
		{Key: "registrar.callers.gone", Old: `identities=["unix-peer:uid=1"] identity_prefixes=[]`, New: "", Live: true},
	}
	if got := Diff(old, new); !slices.Equal(got, want) {
		t.Errorf("Diff =\n%+v\nwant\n%+v", got, want)
	}
	if got := Diff(new, new.Clone()); got != nil {
		t.Errorf("Diff of a configuration and its clone = %+v, want none", got)
	}
	if RestartOnlyChanges(Diff(old, new)) != nil {
		t.Error("a policy change needs a restart")
	}
}

func TestReloadClassOfCallerKeys(t *testing.T) {
	for key, want := range map[string]string{
		"registrar.callers.<name>.identities":                        Live,
		"registrar.callers.agents.identities":                        Live,
		"registrar.callers.agents.shadow.rate_limit_admission_burst": Live,
		"registrar.callers.agents":                                   Live, // Diff's name of a policy
		"registrar.components.review.multiplicity":                   Live,
		"registrar.callers":                                          "",
		"registrar.callers.agents.nope":                              "",
		"registrar.callers.":                                         "",
		"registrar.callers.agents.shadow.identities":                 "",
	} {
		if got := ReloadClass(key); got != want {
			t.Errorf("ReloadClass(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestCloneCopiesTheCallers(t *testing.T) {
	a := mustLoadBytes(t, "[registrar.callers.a]\nidentities = [\"x\"]\nidentity_prefixes = [\"p\"]\n[registrar.callers.a.shadow]\nrate_limit_admission_burst = 4\n")
	b := a.Clone()
	b.Registrar.Callers[0].Identities[0] = "changed"
	b.Registrar.Callers[0].IdentityPrefixes[0] = "changed"
	b.Registrar.Callers[0].Shadow.AdmissionBurst = 99
	b.Registrar.Callers[0].Name = "changed"
	p := a.Registrar.Callers[0]
	if p.Name != "a" || p.Identities[0] != "x" || p.IdentityPrefixes[0] != "p" || p.Shadow.AdmissionBurst != 4 {
		t.Errorf("changing a clone changed the original: %+v, shadow %+v", p, p.Shadow)
	}
	if c := (Config{}).Clone(); c.Registrar.Callers != nil {
		t.Errorf("the clone of no policy is %v, want nil", c.Registrar.Callers)
	}
}

// TestPolicyKeysFollowTheRegistrarKeys: the four size keys of a policy
// are [registrar] keys of the same names, types and rules, and a policy's
// rows are live.
func TestPolicyKeysFollowTheRegistrarKeys(t *testing.T) {
	rows := map[string]Row{}
	for _, r := range Table() {
		rows[r.Key] = r
	}
	for _, k := range sizeKeys {
		reg, ok := rows["registrar."+k.name]
		if !ok {
			t.Fatalf("no [registrar] key %s", k.name)
		}
		for _, pk := range []string{callersTable + ".<name>." + k.name, callersTable + ".<name>.shadow." + k.name} {
			r := rows[pk]
			if r.Type != reg.Type || r.Reload != Live || !strings.HasSuffix(r.Doc, reg.Doc) {
				t.Errorf("%s: %+v, the [registrar] key: %+v", pk, r, reg)
			}
		}
		if rows[callersTable+".<name>."+k.name].Default != reg.Key || rows[callersTable+".<name>.shadow."+k.name].Default != callersTable+".<name>."+k.name {
			t.Errorf("%s: the default columns do not name the key an unset value is taken from", k.name)
		}
	}
}
