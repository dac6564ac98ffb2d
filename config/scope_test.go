package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// components is the components table of the inline documents below.
const components = `
[registrar.components.review]
multiplicity = "many-per-host"
[registrar.components.edge-proxy]
multiplicity = "one-per-host"
`

// TestScopedPoliciesLoadWhatTheFileSays: the deployment loads
// into the fields, an unset key left as any (nil), self and none, and
// CallerRules hands the callers package what each policy may do.
func TestScopedPoliciesLoadWhatTheFileSays(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "valid_callers_scoped.toml"), nil, nil)
	if err != nil {
		t.Fatal(errorLines(err))
	}
	type rules struct {
		scope callers.ScopeSpec
		owner vocab.Owner
		max   uint32
	}
	want := map[string]rules{
		"control-plane": {owner: vocab.OwnerAny},
		"agents": {scope: callers.ScopeSpec{Services: []string{"review", "edge-*"}, Components: []string{"review", "edge-proxy"},
			Hosts: []string{callers.IdentityPattern}, Verbs: []string{"mint"}}, owner: vocab.OwnerSelf, max: 64},
		"local":    {scope: callers.ScopeSpec{Components: []string{"rev?ew"}, Verbs: []string{"*"}}, owner: vocab.OwnerPolicy},
		"everyone": {scope: callers.ScopeSpec{Verbs: []string{"mint"}}, owner: vocab.OwnerSelf},
	}
	r := cfg.Registrar
	for i, p := range r.Callers {
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("unexpected policy %s", p.Name)
			continue
		}
		if got := (rules{p.Scope, p.Owner, p.MaxRegistrations}); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: scope %+v owner %v max %d, want %+v", p.Name, got.scope, got.owner, got.max, w)
		}
		if got, want := r.CallerRules()[i], (callers.Rules{Scope: w.scope, Owner: w.owner, MaxRegistrations: w.max}); !reflect.DeepEqual(got, want) {
			t.Errorf("CallerRules()[%d] = %+v, want %s's %+v", i, got, p.Name, want)
		}
	}
	if got, want := r.MaxInstancesPerHost, map[string]uint32{"review": 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("MaxInstancesPerHost = %v, want %v", got, want)
	}
	if len(r.CallerRules()) != len(r.Callers) {
		t.Errorf("CallerRules has %d rules for %d policies", len(r.CallerRules()), len(r.Callers))
	}
	if _, err := callers.NewAuthority(r.CallerPolicies(), r.CallerRules(), []string{"unix-peer:uid=0"}); err != nil {
		t.Errorf("the callers package refuses what Validate accepted: %v", err)
	}
	if w := cfg.AuthorizationWarnings(); w != nil {
		t.Errorf("AuthorizationWarnings() = %v, want none (no group, no TLS listener)", w)
	}
}

// TestEachAuthorizationRuleNamesTheKey: every rule of the authorization
// keys, each refusal a line that starts with the dotted key (a list
// element with its index) and says the rule; the cases a rule must let
// through load.
func TestEachAuthorizationRuleNamesTheKey(t *testing.T) {
	const policy = "[registrar.callers.p]\n"
	dns := policy + "identity_prefixes = [\"registrar-client:dns:\"]\n"
	for _, c := range []struct {
		name, doc string
		want      string // "" when the document loads
	}{
		// callers.CompileScope's rules, mapped to their keys.
		{"an empty list", dns + "scope_hosts = []\n",
			"registrar.callers.p.scope_hosts is empty, which matches nothing: leave the key out for any value"},
		{"an empty pattern", dns + "scope_services = [\"review\", \"\"]\n",
			`registrar.callers.p.scope_services[1] must not be empty: an empty pattern matches nothing, got ""`},
		{"a pattern that matches no verb", dns + "scope_verbs = [\"mint\", \"renew\"]\n",
			`registrar.callers.p.scope_verbs[1] matches neither "mint" nor "deregister", got "renew"`},
		{"{identity} outside scope_hosts", dns + "scope_services = [\"{identity}\"]\n",
			`registrar.callers.p.scope_services[0] may not hold {identity}: it names a host, so only scope_hosts takes it, got "{identity}"`},
		{"a pattern given twice", dns + "scope_hosts = [\"h1\", \"h*\", \"h1\"]\n",
			`registrar.callers.p.scope_hosts[2] repeats scope_hosts[0], got "h1"`},
		{"a pattern too long to match a label", dns + "scope_services = [\"" + strings.Repeat("a", 64) + "\"]\n",
			`registrar.callers.p.scope_services[0] matches no DNS label: the shortest value it matches that does not start or end with '-' is 64 bytes, over 63, got "` + strings.Repeat("a", 64) + `"`},
		{"a pattern over the byte bound states its length once", dns + "scope_services = [\"" + strings.Repeat("*", 128) + "\"]\n",
			"registrar.callers.p.scope_services[0] must be at most 127 bytes, got 128"},
		{"too many patterns", dns + "scope_hosts = [" + strings.TrimSuffix(strings.Repeat(`"h*",`, 65), ",") + "]\n",
			"registrar.callers.p.scope_hosts holds 65 patterns, more than 64"},

		// {identity} and the identities.
		{"{identity} for unix callers only", policy + "identity_prefixes = [\"unix-peer:\"]\nscope_hosts = [\"{identity}\"]\n",
			"registrar.callers.p.scope_hosts[0] must not be {identity} in a policy none of whose identities and prefixes can name a host: only a registrar-client:dns: or registrar-client:uri: identity names one (a unix-peer:uid= identity names none), so every call of the policy would be out of scope on host"},
		{"{identity} for a URI identity without a path", policy + "identities = [\"registrar-client:uri:spiffe://example.org\"]\nscope_hosts = [\"{identity}\"]\n",
			"registrar.callers.p.scope_hosts[0] must not be {identity} in a policy none of whose identities and prefixes can name a host: only a registrar-client:dns: or registrar-client:uri: identity names one (a unix-peer:uid= identity names none), so every call of the policy would be out of scope on host"},
		{"{identity} for a dns identity", policy + "identities = [\"unix-peer:uid=7\", \"registrar-client:dns:h1.example.net\"]\nscope_hosts = [\"{identity}\"]\n", ""},
		{"{identity} for a URI identity with a path", policy + "identities = [\"registrar-client:uri:spiffe://example.org/host/h1\"]\nscope_hosts = [\"{identity}\"]\n", ""},
		{"{identity} for a uri prefix", policy + "identity_prefixes = [\"unix-peer:\", \"registrar-client:uri:spiffe://example.org/host/\"]\nscope_hosts = [\"{identity}\"]\n", ""},
		{"{identity} for a prefix of both kinds", policy + "identity_prefixes = [\"registrar-client:\"]\nscope_hosts = [\"{identity}\"]\n", ""},
		{"{identity} for a prefix of the dns kind cut short", policy + "identity_prefixes = [\"registrar-client:d\"]\nscope_hosts = [\"{identity}\"]\n", ""},
		{"{identity} for the catch-all", policy + "identity_prefixes = [\"\"]\nscope_hosts = [\"{identity}\"]\n", ""},

		// Components.
		{"a component name not configured", components + dns + "scope_components = [\"review\", \"reveiw\"]\n",
			`registrar.callers.p.scope_components[1] names no configured component: the components are edge-proxy, review, got "reveiw"`},
		{"a glob matching no component", components + dns + "scope_components = [\"edge-*\", \"web-?\"]\n",
			`registrar.callers.p.scope_components[1] matches no configured component: the components are edge-proxy, review, got "web-?"`},
		{"a component scope with none configured", dns + "scope_components = [\"*\"]\n",
			`registrar.callers.p.scope_components[0] matches no configured component: the configuration has none, got "*"`},
		{"globs matching components", components + dns + "scope_components = [\"*-proxy\", \"r?view\", \"*\"]\n", ""},
		{"an invalid component pattern is refused once", components + dns + "scope_components = [\"Edge\"]\n",
			`registrar.callers.p.scope_components[0] holds "E" at byte 0: a pattern is made of a-z, 0-9, '-', '*' and '?', got "Edge"`},

		// scope_owner.
		{"an unknown owner", dns + "scope_owner = \"everyone\"\n",
			`registrar.callers.p.scope_owner must be "self" (the registrations the caller itself first minted), "policy" (those of any identity of the policy) or "any", got "everyone"`},
		{"an owner that is not a string", dns + "scope_owner = [\"any\"]\n",
			`registrar.callers.p.scope_owner must be "self" (the registrations the caller itself first minted), "policy" (those of any identity of the policy) or "any", got an array`},
		{"each owner", dns + "scope_owner = \"policy\"\n[registrar.callers.q]\nidentities = [\"x\"]\nscope_owner = \"any\"\n[registrar.callers.r]\nidentities = [\"y\"]\nscope_owner = \"self\"\n", ""},

		// max_registrations, strict as every u32.
		{"a zero ceiling", dns + "max_registrations = 0\n",
			"registrar.callers.p.max_registrations must be greater than 0; leave it out for no ceiling (a zero ceiling would refuse every first mint of the policy's callers)"},
		{"a negative ceiling", dns + "max_registrations = -1\n", "registrar.callers.p.max_registrations must be an unsigned integer, got -1"},
		{"a fractional ceiling", dns + "max_registrations = 64.0\n", "registrar.callers.p.max_registrations must be an unsigned integer, got 64.0"},
		{"a quoted ceiling", dns + "max_registrations = \"64\"\n", `registrar.callers.p.max_registrations must be an unsigned integer, got "64"`},
		{"a boolean ceiling", dns + "max_registrations = true\n", "registrar.callers.p.max_registrations must be an unsigned integer, got true"},
		{"a ceiling at the u32 bound", dns + "max_registrations = 4294967295\n", ""},

		// A component's max_instances_per_host.
		{"a ceiling on a one-per-host component", components + "max_instances_per_host = 2\n",
			"registrar.components.edge-proxy.max_instances_per_host applies only to a many-per-host component: edge-proxy is one-per-host, which holds at most one instance per host already"},
		{"a zero instance ceiling", "[registrar.components.review]\nmultiplicity = \"many-per-host\"\nmax_instances_per_host = 0\n",
			"registrar.components.review.max_instances_per_host must be greater than 0; leave it out for no ceiling (a zero ceiling would refuse every first mint of the component)"},
		{"a fractional instance ceiling", "[registrar.components.review]\nmultiplicity = \"many-per-host\"\nmax_instances_per_host = 1.5\n",
			"registrar.components.review.max_instances_per_host must be an unsigned integer, got 1.5"},
		{"a ceiling beside a bad multiplicity is not judged again", "[registrar.components.review]\nmultiplicity = \"often\"\nmax_instances_per_host = 4\n",
			`registrar.components.review.multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host", got "often"`},
		{"an instance ceiling", "[registrar.components.review]\nmultiplicity = \"many-per-host\"\nmax_instances_per_host = 999\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.want == "" {
				mustLoadBytes(t, c.doc)
				return
			}
			if got := loadErrors(t, c.doc); got != c.want+"\n" {
				t.Errorf("errors:\n%swant:\n%s", got, c.want)
			}
		})
	}
}

// TestAuthorizationKeysCannotComeFromTheEnvironment: like the identities,
// what a policy's callers may do is the file's alone; a component's
// instance ceiling is a number like its multiplicity, which a variable
// may set.
func TestAuthorizationKeysCannotComeFromTheEnvironment(t *testing.T) {
	file := components + "[registrar.callers.agents]\nidentity_prefixes = [\"registrar-client:dns:\"]\n"
	for _, c := range []struct{ env, want string }{
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__SCOPE_SERVICES=review",
			`registrar.callers.agents.scope_services cannot be set from the environment: it is an array of strings, set it in the configuration file, got "review" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__SCOPE_SERVICES)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__SCOPE_HOSTS={identity}",
			`registrar.callers.agents.scope_hosts cannot be set from the environment: it is an array of strings, set it in the configuration file, got "{identity}" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__SCOPE_HOSTS)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__SCOPE_OWNER=any",
			`registrar.callers.agents.scope_owner cannot be set from the environment: what a policy's callers may do is set in the configuration file, beside the identities it applies to, got "any" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__SCOPE_OWNER)`},
		{"REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__MAX_REGISTRATIONS=10",
			`registrar.callers.agents.max_registrations cannot be set from the environment: what a policy's callers may do is set in the configuration file, beside the identities it applies to, got "10" (from environment variable REGISTRAR_OTEL_REGISTRAR__CALLERS__AGENTS__MAX_REGISTRATIONS)`},
		{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__REVIEW__MAX_INSTANCES_PER_HOST=0",
			"registrar.components.review.max_instances_per_host must be greater than 0; leave it out for no ceiling (a zero ceiling would refuse every first mint of the component) (from environment variable REGISTRAR_OTEL_REGISTRAR__COMPONENTS__REVIEW__MAX_INSTANCES_PER_HOST)"},
		{"REGISTRAR_OTEL_REGISTRAR__COMPONENTS__REVIEW__MAX_INSTANCES_PER_HOST=-1",
			`registrar.components.review.max_instances_per_host must be an unsigned integer, got "-1" (from environment variable REGISTRAR_OTEL_REGISTRAR__COMPONENTS__REVIEW__MAX_INSTANCES_PER_HOST)`},
	} {
		if got := loadErrors(t, file, c.env); got != c.want+"\n" {
			t.Errorf("with %s:\n%swant:\n%s", c.env, got, c.want)
		}
	}
	cfg := mustLoadBytes(t, file, "REGISTRAR_OTEL_REGISTRAR__COMPONENTS__REVIEW__MAX_INSTANCES_PER_HOST=12")
	if got := cfg.Registrar.MaxInstancesPerHost; !reflect.DeepEqual(got, map[string]uint32{"review": 12}) {
		t.Errorf("MaxInstancesPerHost from the environment = %v, want review=12", got)
	}
}

// TestValidateChecksHandBuiltAuthorization: a Config built in code is held
// to the same rules; its zero owner reads as self.
func TestValidateChecksHandBuiltAuthorization(t *testing.T) {
	good := Default() // components review (many-per-host), edge-proxy, control-plane
	good.Registrar.Callers = []CallerPolicy{{Name: "a", Identities: []string{"x"}, Sizes: good.Registrar.DefaultSizes()}}
	if err := good.Validate(); err != nil {
		t.Fatalf("a policy with the zero owner: %v", err)
	}
	if got := good.Registrar.Callers[0].EffectiveOwner(); got != vocab.OwnerSelf {
		t.Errorf("EffectiveOwner of the zero owner = %v, want self", got)
	}
	if got := good.Registrar.CallerRules()[0].Owner; got != vocab.OwnerSelf {
		t.Errorf("CallerRules' owner of the zero owner = %v, want self", got)
	}

	c := good.Clone()
	p := &c.Registrar.Callers[0]
	p.Owner = vocab.Owner(9)
	p.Scope = callers.ScopeSpec{Components: []string{"nope"}, Hosts: []string{callers.IdentityPattern}, Verbs: []string{}}
	c.Registrar.MaxInstancesPerHost = map[string]uint32{"review": 0, "edge-proxy": 2, "gone": 3}
	sameErrors(t, c.Validate(), []string{
		"registrar.components.edge-proxy.max_instances_per_host applies only to a many-per-host component: edge-proxy is one-per-host, which holds at most one instance per host already",
		"registrar.components.gone.max_instances_per_host names no configured component: registrar.components.gone has no multiplicity",
		"registrar.components.review.max_instances_per_host must be greater than 0; leave it out for no ceiling (a zero ceiling would refuse every first mint of the component)",
		"registrar.callers.a.scope_verbs is empty, which matches nothing: leave the key out for any value",
		"registrar.callers.a.scope_hosts[0] must not be {identity} in a policy none of whose identities and prefixes can name a host: only a registrar-client:dns: or registrar-client:uri: identity names one (a unix-peer:uid= identity names none), so every call of the policy would be out of scope on host",
		`registrar.callers.a.scope_components[0] names no configured component: the components are control-plane, edge-proxy, review, got "nope"`,
		`registrar.callers.a.scope_owner must be "self" (the registrations the caller itself first minted), "policy" (those of any identity of the policy) or "any", got "Owner(9)"`,
	})
}

// TestDiffReportsEveryAuthorizationChange: a change of any scope key, of
// the owner or of the ceiling changes the policy, live; a component's
// instance ceiling is a live change of its own; an owner set to its
// default is no change.
func TestDiffReportsEveryAuthorizationChange(t *testing.T) {
	base := components + "[registrar.callers.agents]\nidentity_prefixes = [\"registrar-client:dns:\"]\n"
	old := mustLoadBytes(t, base)
	for _, c := range []struct{ add, shown string }{
		{"scope_services = [\"review\"]\n", `scope_services=["review"]`},
		{"scope_components = [\"review\"]\n", `scope_components=["review"]`},
		{"scope_hosts = [\"{identity}\"]\n", `scope_hosts=["{identity}"]`},
		{"scope_verbs = [\"mint\"]\n", `scope_verbs=["mint"]`},
		{"scope_owner = \"policy\"\n", `scope_owner="policy"`},
		{"max_registrations = 8\n", "max_registrations=8"},
	} {
		changes := Diff(old, mustLoadBytes(t, base+c.add))
		want := []Change{{Key: "registrar.callers.agents", Old: `identities=[] identity_prefixes=["registrar-client:dns:"]`,
			New: `identities=[] identity_prefixes=["registrar-client:dns:"] ` + c.shown, Live: true}}
		if !slices.Equal(changes, want) {
			t.Errorf("adding %q: Diff = %+v, want %+v", c.add, changes, want)
		}
	}
	if d := Diff(old, mustLoadBytes(t, base+"scope_owner = \"self\"\n")); d != nil {
		t.Errorf("scope_owner = \"self\", the default: Diff = %+v, want none", d)
	}
	withCeiling := mustLoadBytes(t, strings.Replace(base, "many-per-host\"\n", "many-per-host\"\nmax_instances_per_host = 3\n", 1))
	want := []Change{{Key: "registrar.components.<name>.max_instances_per_host", Old: "none", New: "{review=3}", Live: true}}
	if got := Diff(old, withCeiling); !slices.Equal(got, want) {
		t.Errorf("a component's ceiling: Diff = %+v, want %+v", got, want)
	}
	if RestartOnlyChanges(Diff(old, withCeiling)) != nil {
		t.Error("a component's ceiling needs a restart")
	}
	for _, key := range []string{"registrar.callers.agents.scope_hosts", "registrar.callers.agents.scope_owner", "registrar.callers.agents.max_registrations", "registrar.components.review.max_instances_per_host"} {
		if got := ReloadClass(key); got != Live {
			t.Errorf("ReloadClass(%q) = %q, want live", key, got)
		}
	}
	if got := ReloadClass("registrar.callers.agents.shadow.scope_hosts"); got != "" {
		t.Errorf("a shadow's scope_hosts has reload class %q; a shadow takes only sizes", got)
	}
}

// TestAShadowTakesNoAuthorizationKey: a shadow holds sizes only.
func TestAShadowTakesNoAuthorizationKey(t *testing.T) {
	got := loadErrors(t, components+"[registrar.callers.a]\nidentities = [\"x\"]\n[registrar.callers.a.shadow]\nscope_verbs = [\"mint\"]\nmax_registrations = 4\n")
	want := `registrar.callers.a.shadow.max_registrations is not a key of a shadow table: it takes only the four rate_limit_* keys (the identities and prefixes are the policy's)
registrar.callers.a.shadow.scope_verbs is not a key of a shadow table: it takes only the four rate_limit_* keys (the identities and prefixes are the policy's)
`
	if got != want {
		t.Errorf("errors:\n%swant:\n%s", got, want)
	}
}

func TestCloneCopiesTheScopeAndTheCeilings(t *testing.T) {
	a := mustLoadBytes(t, components+"[registrar.callers.a]\nidentities = [\"registrar-client:dns:h1\"]\nscope_services = [\"s\"]\nscope_components = [\"review\"]\nscope_hosts = [\"{identity}\"]\nscope_verbs = [\"mint\"]\n")
	a.Registrar.MaxInstancesPerHost = map[string]uint32{"review": 2}
	b := a.Clone()
	s := &b.Registrar.Callers[0].Scope
	s.Services[0], s.Components[0], s.Hosts[0], s.Verbs[0] = "x", "x", "x", "x"
	b.Registrar.MaxInstancesPerHost["review"] = 9
	p := a.Registrar.Callers[0]
	if p.Scope.Services[0] != "s" || p.Scope.Components[0] != "review" || p.Scope.Hosts[0] != callers.IdentityPattern || p.Scope.Verbs[0] != "mint" || a.Registrar.MaxInstancesPerHost["review"] != 2 {
		t.Errorf("changing a clone changed the original: %+v, ceilings %v", p.Scope, a.Registrar.MaxInstancesPerHost)
	}
	// A key left out stays left out, and an empty list stays empty: the
	// one is any value, the other refused.
	c := CallerPolicy{Scope: callers.ScopeSpec{Verbs: []string{}}}.clone()
	if c.Scope.Services != nil || c.Scope.Verbs == nil {
		t.Errorf("clone turned nil or empty lists into the other: %#v", c.Scope)
	}
}

// TestAuthorizationWarnings: a listener that admits callers no policy can
// match is named, with the fix; a policy that can match them, and a
// listener left off, silence it.
func TestAuthorizationWarnings(t *testing.T) {
	const (
		group = `[registrar]
socket_group = "registrar-callers"
`
		tls = `[registrar]
tls_listen = "0.0.0.0:8443"
tls_cert_file = "c"
tls_key_file = "k"
tls_client_ca_file = "ca"
`
		both = `[registrar]
socket_group = "registrar-callers"
tls_listen = "0.0.0.0:8443"
tls_cert_file = "c"
tls_key_file = "k"
tls_client_ca_file = "ca"
`
	)
	policy := func(list, id string) string {
		return "[registrar.callers.p]\n" + list + " = [\"" + id + "\"]\n"
	}
	const (
		unixWarning = `registrar.socket_group "registrar-callers" lets the group's members call the daemon, but no caller policy can match them (a unix-peer:uid=<uid> identity other than root's): until one does, every member of the group is refused no_policy; add a [registrar.callers.<name>] policy with identity_prefixes = ["unix-peer:"] (every local caller) or identities = ["unix-peer:uid=<uid>"] (each member), scoped with the scope_* keys`
		tlsWarning  = `registrar.tls_listen "0.0.0.0:8443" lets every holder of a client certificate the CA signs call the daemon, but no caller policy can match them (a registrar-client: identity): until one does, every certificate holder is refused no_policy; add a [registrar.callers.<name>] policy with identity_prefixes = ["registrar-client:"] (every certificate) or your certificates' own prefix (e.g. "registrar-client:uri:spiffe://example.org/host/"), scoped with the scope_* keys`
	)
	for _, c := range []struct {
		name, doc string
		want      []string // the keys warned about
	}{
		{"the defaults", "", nil},
		{"a group and no policy", group, []string{"registrar.socket_group"}},
		{"a group and root's policy only", group + policy("identities", "unix-peer:uid=0"), []string{"registrar.socket_group"}},
		{"a group and root's uid as a prefix", group + policy("identity_prefixes", "unix-peer:uid=0"), []string{"registrar.socket_group"}},
		{"a group and a certificate policy", group + policy("identity_prefixes", "registrar-client:"), []string{"registrar.socket_group"}},
		{"a group and a policy of a member", group + policy("identities", "unix-peer:uid=1000"), nil},
		{"a group and the unix prefix", group + policy("identity_prefixes", "unix-peer:"), nil},
		{"a group and the uid prefix", group + policy("identity_prefixes", "unix-peer:uid="), nil},
		{"a group and the prefix of some uids", group + policy("identity_prefixes", "unix-peer:uid=10"), nil},
		{"a group and the catch-all", group + policy("identity_prefixes", ""), nil},
		{"a group and a prefix no uid takes", group + policy("identity_prefixes", "unix-peer:uid=x"), []string{"registrar.socket_group"}},
		{"a TLS listener and no policy", tls, []string{"registrar.tls_listen"}},
		{"a TLS listener and a unix policy", tls + policy("identity_prefixes", "unix-peer:"), []string{"registrar.tls_listen"}},
		{"a TLS listener and a certificate's identity", tls + policy("identities", "registrar-client:dns:h1.example.net"), nil},
		{"a TLS listener and a uri prefix", tls + policy("identity_prefixes", "registrar-client:uri:spiffe://example.org/host/"), nil},
		{"a TLS listener and a prefix of the kinds", tls + policy("identity_prefixes", "registrar-"), nil},
		{"a TLS listener and the catch-all", tls + policy("identity_prefixes", ""), nil},
		{"both and no policy", both, []string{"registrar.socket_group", "registrar.tls_listen"}},
		{"both and the catch-all", both + policy("identity_prefixes", ""), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var keys []string
			for _, w := range mustLoadBytes(t, c.doc).AuthorizationWarnings() {
				keys = append(keys, w.Key)
				if !strings.HasPrefix(w.Message, w.Key+" ") || w.String() != w.Message {
					t.Errorf("warning %+v does not start with its key", w)
				}
				if want := map[string]string{"registrar.socket_group": unixWarning, "registrar.tls_listen": tlsWarning}[w.Key]; w.Message != want {
					t.Errorf("warning:\n%s\nwant:\n%s", w.Message, want)
				}
			}
			if !slices.Equal(keys, c.want) {
				t.Errorf("warned about %v, want %v", keys, c.want)
			}
		})
	}
}

// TestThePackagedConfigurationAdmitsItsSocketGroup: the package's
// configuration shares its socket with a group through systemd, which the
// file does not show; it names a policy for unix callers, so the group's
// members are not refused no_policy, and its commented scope, uncommented,
// is valid.
func TestThePackagedConfigurationAdmitsItsSocketGroup(t *testing.T) {
	path := filepath.Join("..", "packaging", "registrar.toml")
	cfg, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(errorLines(err))
	}
	cfg.Registrar.SocketGroup = "registrar-callers" // what the socket unit does
	if w := cfg.AuthorizationWarnings(); w != nil {
		t.Errorf("with the socket unit's group: %v", w)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	uncommented := 0
	for line := range strings.Lines(string(raw)) {
		for _, k := range []string{"scope_", "max_registrations"} {
			if rest, ok := strings.CutPrefix(line, "# "+k); ok {
				line = k + rest
				uncommented++
			}
		}
		lines = append(lines, line)
	}
	if uncommented < 5 {
		t.Fatalf("%s shows %d commented scope keys, want each of the four scope keys, scope_owner and max_registrations", path, uncommented)
	}
	scoped := mustLoadBytes(t, strings.Join(lines, ""))
	p, ok := scoped.Registrar.Policy("local")
	if !ok || p.Scope.Components == nil || p.Scope.Hosts == nil || p.Scope.Verbs == nil || p.Scope.Services == nil || p.MaxRegistrations == 0 {
		t.Errorf("the uncommented example sets %+v", p)
	}
}
