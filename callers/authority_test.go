package callers

import (
	"errors"
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
)

const (
	root     = "unix-peer:uid=0"
	daemonID = "unix-peer:uid=998"
	member   = "unix-peer:uid=1000"
	agentH1  = "registrar-client:dns:h1.example.org"
	agentH2  = "registrar-client:dns:h2.example.org"
)

func testAuthority(t *testing.T, extra ...Policy) *Authority {
	t.Helper()
	ps := append([]Policy{
		{Name: "control-plane", Identities: []string{"registrar-client:uri:spiffe://example.org/control-plane"}},
		{Name: "agents", IdentityPrefixes: []string{"registrar-client:dns:"}},
		{Name: "members", IdentityPrefixes: []string{"unix-peer:"}},
	}, extra...)
	rules := []Rules{
		{},
		{Scope: ScopeSpec{Services: []string{"review", "edge-*"}, Hosts: []string{IdentityPattern}, Verbs: []string{"mint"}}, MaxRegistrations: 40},
		{Owner: vocab.OwnerPolicy},
	}
	for range extra {
		rules = append(rules, Rules{Owner: vocab.OwnerAny})
	}
	a, err := NewAuthority(ps, rules, []string{root, daemonID})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthorityPolicyOperatorsAndNoPolicy(t *testing.T) {
	a := testAuthority(t)
	for id, want := range map[string]string{
		root:     "", // operators: a prefix ("unix-peer:") never restricts them
		daemonID: "",
		member:   "members",
		agentH1:  "agents",
		"registrar-client:uri:spiffe://example.org/control-plane": "control-plane",
	} {
		p, ok := a.Policy(id)
		switch {
		case !ok:
			t.Errorf("Policy(%q): no policy, want %q", id, want)
		case want == "" && p != Operator:
			t.Errorf("Policy(%q) = %s, want an operator", id, a.Name(p))
		case want != "" && a.Name(p) != want:
			t.Errorf("Policy(%q) = %s, want %s", id, a.Name(p), want)
		}
	}
	if p, ok := a.Policy("registrar-client:uri:spiffe://example.org/other"); ok {
		t.Errorf("an identity no policy matches got policy %d", p)
	}
	// A policy naming an operator exactly restricts it.
	named := testAuthority(t, Policy{Name: "root", Identities: []string{root}})
	if p, ok := named.Policy(root); !ok || named.Name(p) != "root" {
		t.Errorf("root named by a policy: Policy = %d, %v; want the policy root", p, ok)
	}
	if p, _ := named.Policy(daemonID); p != Operator {
		t.Errorf("the daemon's uid, not named: %d, want Operator", p)
	}
}

func TestAuthorityOutOfScope(t *testing.T) {
	a := testAuthority(t)
	agents, _ := a.Policy(agentH1)
	for _, tc := range []struct {
		identity                 string
		verb                     vocab.Verb
		service, component, host string
		want                     vocab.Scope
	}{
		{agentH1, vocab.Mint, "review", "review", "h1", 0},
		{agentH1, vocab.Mint, "edge-eu", "edge-proxy", "h1", 0},
		{agentH1, vocab.Deregister, "review", "review", "h1", vocab.ScopeVerb},
		{agentH1, vocab.Mint, "payments", "review", "h1", vocab.ScopeService},
		{agentH1, vocab.Mint, "review", "review", "h2", vocab.ScopeHost},
		{agentH2, vocab.Mint, "review", "review", "h2", 0},
		{"registrar-client:dns:H1_x.example.org", vocab.Mint, "review", "review", "h1", vocab.ScopeHost}, // no host of its own
	} {
		if got := a.OutOfScope(agents, tc.identity, tc.verb, tc.service, tc.component, tc.host); got != tc.want {
			t.Errorf("%s %v %s/%s/%s: %v, want %v", tc.identity, tc.verb, tc.service, tc.component, tc.host, got, tc.want)
		}
	}
	if got := a.OutOfScope(Operator, root, vocab.Deregister, "payments", "x", "y"); got != 0 {
		t.Errorf("an operator's call out of scope: %v", got)
	}
	cp, _ := a.Policy("registrar-client:uri:spiffe://example.org/control-plane")
	if got := a.OutOfScope(cp, "", vocab.Deregister, "payments", "x", "y"); got != 0 {
		t.Errorf("a policy without scope keys refused %v", got)
	}
}

func TestAuthorityMayAct(t *testing.T) {
	a := testAuthority(t, Policy{Name: "ops", Identities: []string{"registrar-client:dns:ops.example.org"}})
	agents, _ := a.Policy(agentH1)
	members, _ := a.Policy(member)
	ops, _ := a.Policy("registrar-client:dns:ops.example.org")
	for _, tc := range []struct {
		policy          int
		identity, owner string
		want            bool
	}{
		{agents, agentH1, agentH1, true},                             // its own
		{agents, agentH1, agentH2, false},                            // self: not another agent's
		{agents, agentH1, "", false},                                 // no recorded owner: the operators'
		{members, member, "unix-peer:uid=1001", true},                // policy: a member's
		{members, member, agentH1, false},                            // not another policy's
		{members, member, root, false},                               // root is no member
		{ops, "registrar-client:dns:ops.example.org", agentH1, true}, // any
		{ops, "registrar-client:dns:ops.example.org", "", false},
		{Operator, root, agentH1, true},
		{Operator, root, "", true},
	} {
		if got := a.MayAct(tc.policy, tc.identity, tc.owner); got != tc.want {
			t.Errorf("MayAct(%s, %q, owner %q) = %v, want %v", a.Name(tc.policy), tc.identity, tc.owner, got, tc.want)
		}
	}
	if a.MaxRegistrations(agents) != 40 || a.MaxRegistrations(members) != 0 || a.MaxRegistrations(Operator) != 0 {
		t.Errorf("MaxRegistrations = %d, %d, %d; want 40, 0, 0", a.MaxRegistrations(agents), a.MaxRegistrations(members), a.MaxRegistrations(Operator))
	}
}

func TestNewAuthorityRefusesWhatNewAndCompileScopeRefuse(t *testing.T) {
	_, err := NewAuthority([]Policy{{Name: "a", Identities: []string{""}}, {Name: "b", Identities: []string{"x"}}},
		[]Rules{{Scope: ScopeSpec{Services: []string{"UP"}}}, {Owner: 9}}, nil)
	var ie *IdentityError
	var pe *PatternError
	var ke *ScopeKeyError
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) || !errors.As(err, &pe) || !errors.As(err, &ke) || ke.Key != "scope_owner" {
		t.Fatalf("NewAuthority = %v; want the identity, the pattern and the owner refused", err)
	}
	if a, err := NewAuthority([]Policy{{Name: "a", Identities: []string{"x"}}}, nil, nil); a != nil || err == nil {
		t.Fatalf("NewAuthority without rules = %v, %v; want an error", a, err)
	}
}

// Every policy index is judged by its own rules, the first included, and
// an index that is neither Operator nor a policy's is refused everything:
// a caller's mistake fails closed.
func TestAuthorityJudgesEveryIndexAndFailsClosedOutsideThem(t *testing.T) {
	a := testAuthority(t)
	cp, _ := a.Policy("registrar-client:uri:spiffe://example.org/control-plane")
	if cp != 0 {
		t.Fatalf("control-plane is policy %d, want 0", cp)
	}
	if a.MayAct(0, "registrar-client:uri:spiffe://example.org/control-plane", agentH1) {
		t.Error("policy 0 (scope_owner self) may act on another identity's registration")
	}
	if !a.MayAct(0, "registrar-client:uri:spiffe://example.org/control-plane", "registrar-client:uri:spiffe://example.org/control-plane") {
		t.Error("policy 0 may not act on its own registration")
	}
	for _, p := range []int{3, 4, -2} {
		if a.MayAct(p, agentH1, agentH1) {
			t.Errorf("MayAct(%d): an index of no policy may act", p)
		}
		if got := a.OutOfScope(p, agentH1, vocab.Mint, "review", "review", "h1"); got == 0 {
			t.Errorf("OutOfScope(%d): an index of no policy is in scope", p)
		}
		if a.MaxRegistrations(p) != 0 {
			t.Errorf("MaxRegistrations(%d) != 0", p)
		}
	}
}
