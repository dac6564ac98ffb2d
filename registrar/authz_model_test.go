package registrar_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/backendtest"
	"github.com/registrar-otel/registrar-otel/backend/embedded"
	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/internal/testing/limitermodel"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// The authorization model: issue 35's exact model of the limiter
// (internal/testing/limitermodel) extended with everything an invocation
// decides before and around the backend: the caller's policy (or
// no_policy), the request checks, the scope, the bucket charged, the
// ownership of an existing registration, the instance ceilings and the
// records written. It is written from the documented rules, not from the
// code: a reference glob, a reference longest-prefix match, the operators'
// rule, a plain map as the registry, and counts taken by walking it.

// mIdentity is one caller of the model: its identity and the host its
// identity names ("" for none, as callers.IdentityHost documents).
type mIdentity struct{ id, host string }

var modelIdentities = []mIdentity{
	{"unix-peer:uid=0", ""}, {"unix-peer:uid=999", ""}, // the operators
	{"unix-peer:uid=1000", ""}, {"unix-peer:uid=1001", ""}, {"unix-peer:uid=1002", ""}, {"unix-peer:uid=1010", ""},
	{"registrar-client:dns:h0.example.org", "h0"}, {"registrar-client:dns:h1.example.org", "h1"},
	{"registrar-client:dns:h2", "h2"}, {"registrar-client:dns:h3.example.org", "h3"},
	{"registrar-client:uri:spiffe://t/agent/h1", "h1"}, {"registrar-client:uri:spiffe://t/agent/h2/", "h2"},
	{"registrar-client:uri:spiffe://t/agent/Big", ""}, {"registrar-client:uri:spiffe://t", ""},
}

var modelOperators = []string{"unix-peer:uid=0", "unix-peer:uid=999"}

// modelSelectors are the identities and prefixes a random policy may
// name: a selector is named by one policy at most.
var modelSelectors = []struct {
	s      string
	prefix bool
}{
	{"", true}, {"unix-peer:", true}, {"unix-peer:uid=100", true}, {"registrar-client:", true},
	{"registrar-client:dns:", true}, {"registrar-client:dns:h1", true}, {"registrar-client:uri:spiffe://t/agent/", true},
	{"unix-peer:uid=0", false}, {"unix-peer:uid=1000", false}, {"unix-peer:uid=1010", false},
	{"registrar-client:dns:h2", false}, {"registrar-client:uri:spiffe://t/agent/h1", false},
}

var modelPatterns = [vocab.ScopeHost + 1]struct {
	key  func(*callers.ScopeSpec) *[]string
	pats []string
}{
	vocab.ScopeService:   {func(s *callers.ScopeSpec) *[]string { return &s.Services }, []string{"review", "edge-*", "pay*", "*ments", "e?ge-a"}},
	vocab.ScopeComponent: {func(s *callers.ScopeSpec) *[]string { return &s.Components }, []string{"review", "edge-proxy", "control-*", "*-proxy"}},
	vocab.ScopeHost:      {func(s *callers.ScopeSpec) *[]string { return &s.Hosts }, []string{callers.IdentityPattern, "h1", "h?", "*3", "h0"}},
	vocab.ScopeVerb:      {func(s *callers.ScopeSpec) *[]string { return &s.Verbs }, []string{"mint", "deregister", "*", "d*"}},
}

// mPolicy is one caller policy of a scenario.
type mPolicy struct {
	callers.Policy
	rules callers.Rules
	sizes limiter.Sizes
}

// mScenario is one configuration: the default sizes, the policies and
// the per-host ceilings.
type mScenario struct {
	def      limiter.Sizes
	policies []mPolicy
	perHost  map[string]uint32
}

func randModelSizes(r *rand.Rand) limiter.Sizes {
	b := func() limiter.BucketConfig {
		return limiter.BucketConfig{Burst: 1 + r.Uint32N(5), RefillInterval: time.Duration(1+r.IntN(40)) * 50 * time.Millisecond}
	}
	return limiter.Sizes{PredecisionRefusal: b(), Admission: b()}
}

func randModelScenario(r *rand.Rand) mScenario {
	sc := mScenario{def: randModelSizes(r), perHost: map[string]uint32{"review": []uint32{0, 1, 2, 3}[r.IntN(4)]}}
	sel := r.Perm(len(modelSelectors))
	for i := range r.IntN(5) {
		p := mPolicy{sizes: randModelSizes(r)}
		p.Name = "p" + strconv.Itoa(i)
		for range 1 + r.IntN(2) {
			if len(sel) == 0 {
				break
			}
			s := modelSelectors[sel[0]]
			sel = sel[1:]
			if s.prefix {
				p.IdentityPrefixes = append(p.IdentityPrefixes, s.s)
			} else {
				p.Identities = append(p.Identities, s.s)
			}
		}
		for d := vocab.ScopeVerb; d <= vocab.ScopeHost; d++ {
			if r.IntN(2) == 0 {
				continue
			}
			pats := modelPatterns[d].pats
			k := r.Perm(len(pats))[:1+r.IntN(2)]
			for _, j := range k {
				key := modelPatterns[d].key(&p.rules.Scope)
				*key = append(*key, pats[j])
			}
		}
		p.rules.Owner = []vocab.Owner{0, vocab.OwnerSelf, vocab.OwnerPolicy, vocab.OwnerAny}[r.IntN(4)]
		p.rules.MaxRegistrations = []uint32{0, 0, 1, 2, 3, 5}[r.IntN(6)]
		sc.policies = append(sc.policies, p)
	}
	return sc
}

// authority is the scenario's callers.Authority, and its limiter
// configuration (the daemon's: the policies sized by the Matcher's rule).
func (sc mScenario) authority(t *testing.T) (*callers.Authority, limiter.Config) {
	t.Helper()
	var ps []callers.Policy
	var rules []callers.Rules
	cfg := limiter.Config{PredecisionRefusal: sc.def.PredecisionRefusal, Admission: sc.def.Admission}
	for _, p := range sc.policies {
		ps, rules = append(ps, p.Policy), append(rules, p.rules)
		cfg.Policies = append(cfg.Policies, limiter.Policy{Name: p.Name, Sizes: p.sizes})
	}
	a, err := callers.NewAuthority(ps, rules, modelOperators)
	if err != nil {
		t.Fatalf("the scenario's policies: %v", err)
	}
	m, err := callers.New(ps)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Match = m.Match
	return a, cfg
}

func modelSizesOf(s limiter.Sizes) limitermodel.Sizes {
	var m limitermodel.Sizes
	m[vocab.PredecisionRefusal].Burst, m[vocab.PredecisionRefusal].Interval = int64(s.PredecisionRefusal.Burst), int64(s.PredecisionRefusal.RefillInterval)
	m[vocab.Admission].Burst, m[vocab.Admission].Interval = int64(s.Admission.Burst), int64(s.Admission.RefillInterval)
	return m
}

// matched is the documented matching rule: the policy naming id exactly,
// else the one with the longest prefix of id, else none.
func (sc mScenario) matched(id string) (int, bool) {
	best, bestLen := -1, -1
	for i, p := range sc.policies {
		for _, e := range p.Identities {
			if e == id {
				return i, true
			}
		}
		for _, pre := range p.IdentityPrefixes {
			if strings.HasPrefix(id, pre) && len(pre) > bestLen {
				best, bestLen = i, len(pre)
			}
		}
	}
	return best, best >= 0
}

// policy is the authorization's rule: an operator is unrestricted
// (callers.Operator) unless a policy names it exactly; anyone else takes
// the matching rule's policy or none.
func (sc mScenario) policy(id string) (int, bool) {
	for _, op := range modelOperators {
		if op != id {
			continue
		}
		for i, p := range sc.policies {
			for _, e := range p.Identities {
				if e == id {
					return i, true
				}
			}
		}
		return callers.Operator, true
	}
	return sc.matched(id)
}

func (sc mScenario) limiterModel() (map[string]limitermodel.Sizes, func(string) string) {
	sizes := map[string]limitermodel.Sizes{limitermodel.Default: modelSizesOf(sc.def)}
	for _, p := range sc.policies {
		sizes[p.Name] = modelSizesOf(p.sizes)
	}
	return sizes, func(id string) string {
		if i, ok := sc.matched(id); ok {
			return sc.policies[i].Name
		}
		return ""
	}
}

// refGlob is the reference glob: '*' any run, '?' one byte.
func refGlob(p, v string) bool {
	switch {
	case p == "":
		return v == ""
	case p[0] == '*':
		return refGlob(p[1:], v) || v != "" && refGlob(p, v[1:])
	case v == "":
		return false
	case p[0] == '?' || p[0] == v[0]:
		return refGlob(p[1:], v[1:])
	}
	return false
}

// outOfScope is the first dimension of the call, in the documented order
// (verb, service, component, host), that policy i's scope does not cover.
func (sc mScenario) outOfScope(i int, caller mIdentity, verb vocab.Verb, service, component, host string) vocab.Scope {
	if i == callers.Operator {
		return 0
	}
	spec := sc.policies[i].rules.Scope
	in := func(pats []string, v string) bool {
		if pats == nil {
			return true
		}
		for _, p := range pats {
			if p == callers.IdentityPattern && caller.host != "" && caller.host == v || refGlob(p, v) {
				return true
			}
		}
		return false
	}
	switch {
	case !in(spec.Verbs, verb.String()):
		return vocab.ScopeVerb
	case !in(spec.Services, service):
		return vocab.ScopeService
	case !in(spec.Components, component):
		return vocab.ScopeComponent
	case !in(spec.Hosts, host):
		return vocab.ScopeHost
	}
	return 0
}

// mayAct is the ownership rule.
func (sc mScenario) mayAct(i int, id, owner string) bool {
	switch {
	case i == callers.Operator || owner == id:
		return true
	case owner == "":
		return false
	}
	switch sc.policies[i].rules.Owner {
	case vocab.OwnerAny:
		return true
	case vocab.OwnerPolicy:
		p, ok := sc.policy(owner)
		return ok && p == i
	}
	return false
}

type mRegistration struct {
	host   string
	spec   registrar.Spec
	owner  string
	secret string // the last wrapped secret id delivered for it
}

var modelComponents = map[string]vocab.Multiplicity{
	"review": vocab.ManyPerHost, "edge-proxy": vocab.OnePerHost, "control-plane": vocab.OnePerDeployment,
}

// modelBackend is a backend under test, with the means to restart it (a
// crash: the same registry, opened again) and to ask whether a delivered
// secret id still logs in.
type modelBackend struct {
	b       registrar.Backend
	restart func() registrar.Backend
	valid   func(id, secret string) bool
}

// expected is the model's answer to one call.
type expected struct {
	outcome string // "first_mint", "idempotent_remint", "removed", "already_absent"; "" for an error
	reason  vocab.Reason
	scope   vocab.Scope
	ceiling vocab.Ceiling
	limit   uint32
	limited bool
	retry   uint64 // a throttle's retry_after; 0 for none
	records int
}

func got(res string, err error) expected {
	var e expected
	var ref *registrar.RefusedError
	var thr *registrar.ThrottledError
	switch {
	case err == nil:
		e.outcome = res
	case errors.As(err, &ref):
		e.reason, e.scope, e.ceiling, e.limit, e.limited = ref.Reason, ref.Scope, ref.Ceiling, ref.Limit, ref.Limited
	case errors.As(err, &thr):
		e.retry = thr.RetryAfterSeconds
	default:
		e.outcome = "error: " + err.Error()
	}
	return e
}

// runAuthorizationModel drives the verbs over backend and the model with
// the same random calls, reloads, clock steps and crashes, and requires
// every answer, every record count, the counts of live registrations and
// the refusal counters to agree.
func runAuthorizationModel(t *testing.T, seed uint64, steps int, mb *modelBackend) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 36))
	var now int64
	clock := func() limiter.Instant { return limiter.Instant(now) }
	wall := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sc := randModelScenario(r)
	var (
		v    *registrar.Verbs
		lim  *limiter.Limiter
		log  = &audittest.AuditLog{}
		lm   *limitermodel.Model
		regs = map[string]*mRegistration{}
		// refusals and theirs: the refusal counters of this run of the
		// verbs (since the last crash), the model's and the verbs'.
		refusals    [vocab.NumVerbs][len(registrar.AuthorizationReasons)]uint64
		decisions   = map[string]int{}
		checkCounts func(step int)
	)
	start := func() {
		auth, cfg := sc.authority(t)
		cfg.Now, cfg.Local = clock, func(id string) bool { return strings.HasPrefix(id, "unix-peer:") }
		var err error
		if lim, err = limiter.New(cfg, limiter.Discard); err != nil {
			t.Fatal(err)
		}
		v, err = registrar.New(registrar.Config{Components: modelComponents, MaxWrapTTLSeconds: 300, Authority: auth, MaxInstancesPerHost: sc.perHost},
			registrar.Deps{Limiter: lim, Audit: log, Backend: mb.b, Now: func() time.Time { return wall }})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Rebuild(ctx); err != nil {
			t.Fatal(err)
		}
		sizes, assign := sc.limiterModel()
		lm = limitermodel.New(sizes, assign, func(id string) bool { return strings.HasPrefix(id, "unix-peer:") })
		refusals = [vocab.NumVerbs][len(registrar.AuthorizationReasons)]uint64{}
	}
	start()
	checkCounts = func(step int) {
		t.Helper()
		live, busiest, byPolicy := map[string]uint64{}, map[string]uint32{}, map[int]uint64{}
		perHost := map[[2]string]uint32{}
		for _, g := range regs {
			live[g.spec.Component]++
			perHost[[2]string{g.spec.Component, g.host}]++
			busiest[g.spec.Component] = max(busiest[g.spec.Component], perHost[[2]string{g.spec.Component, g.host}])
			if p, ok := sc.policy(g.owner); ok && p >= 0 {
				byPolicy[p]++
			}
		}
		st := v.Stock()
		for _, c := range st.Components {
			if c.Live != live[c.Component] || c.BusiestHost != busiest[c.Component] || c.Ceiling != sc.perHost[c.Component] {
				t.Fatalf("step %d: %s: %d live, busiest host %d, ceiling %d; the model: %d, %d, %d",
					step, c.Component, c.Live, c.BusiestHost, c.Ceiling, live[c.Component], busiest[c.Component], sc.perHost[c.Component])
			}
		}
		for _, p := range st.Policies {
			if p.Live != byPolicy[p.Policy] {
				t.Fatalf("step %d: policy %d owns %d live registrations, the model %d", step, p.Policy, p.Live, byPolicy[p.Policy])
			}
			delete(byPolicy, p.Policy)
		}
		for p, n := range byPolicy {
			t.Fatalf("step %d: policy %d owns %d live registrations in the model, none in Stock", step, p, n)
		}
		if theirs := v.AuthorizationRefusals(); theirs != refusals {
			t.Fatalf("step %d: refusal counters %v, the model %v", step, theirs, refusals)
		}
	}
	for step := range steps {
		now += r.Int64N(int64(60 * time.Millisecond))
		switch {
		case step%149 == 148: // a reload of the caller policies and the ceilings
			sc = randModelScenario(r)
			auth, cfg := sc.authority(t)
			if err := lim.Reconfigure(cfg); err != nil {
				t.Fatal(err)
			}
			v.SetAuthority(auth)
			v.SetCeilings(sc.perHost)
			sizes, assign := sc.limiterModel()
			lm.Reconfigure(sizes, assign, now)
			decisions["reload"]++
			checkCounts(step)
			continue
		case step%997 == 996: // a crash: the registry stays, the memory goes
			checkCounts(step)
			mb.b = mb.restart()
			start()
			decisions["crash"]++
			checkCounts(step)
			continue
		}
		caller := modelIdentities[r.IntN(len(modelIdentities))]
		verb := vocab.Verb(r.IntN(2))
		component := []string{"review", "review", "edge-proxy", "control-plane", "unknown"}[r.IntN(5)]
		service := []string{"review", "edge-a", "payments"}[r.IntN(3)]
		host := "h" + strconv.Itoa(r.IntN(4))
		var instance uint32
		if component == "review" {
			instance = 1 + r.Uint32N(3)
		}
		spec := registrar.Spec{Component: component, ServiceName: service}
		if r.IntN(10) == 0 {
			spec.Reload = "systemctl reload " + service // a spec conflict with a registration minted without it
		}

		// The model's answer.
		var want expected
		pol, hasPolicy := sc.policy(caller.id)
		var reason vocab.Reason
		var scope vocab.Scope
		switch {
		case !hasPolicy:
			reason = vocab.ReasonNoPolicy
		case modelComponents[component] == 0:
			reason = vocab.ReasonComponentNotConfigured
		default:
			if scope = sc.outOfScope(pol, caller, verb, service, component, host); scope != 0 {
				reason = vocab.ReasonOutOfScope
			}
		}
		countRefusal := func(reason vocab.Reason) {
			for i, a := range registrar.AuthorizationReasons {
				if a == reason {
					refusals[verb][i]++
				}
			}
		}
		id := backendtest.RegistrationID(modelComponents[component], component, host, instance)
		g := regs[id]
		if reason != 0 {
			d := lm.Charge(caller.id, verb, vocab.PredecisionRefusal, now)
			want = expected{reason: reason, scope: scope, limited: !d.Allowed}
			if d.Allowed {
				want.records = 2
			}
			countRefusal(reason)
		} else if d := lm.Charge(caller.id, verb, vocab.Admission, now); !d.Allowed {
			want = expected{retry: d.RetryAfterSeconds}
		} else {
			want.records = 2
			switch {
			case verb == vocab.Deregister && g == nil:
				want.outcome = "already_absent"
			case g != nil && !sc.mayAct(pol, caller.id, g.owner):
				want.reason = vocab.ReasonNotOwner
				countRefusal(want.reason)
			case verb == vocab.Deregister && g.host != host:
				want.reason = vocab.ReasonHostMismatch
			case verb == vocab.Deregister:
				want.outcome = "removed"
			case g != nil && g.host != host:
				want.reason = vocab.ReasonRegistrationIDCollision
			case g != nil && g.spec != spec:
				want.reason = vocab.ReasonStoredSpecConflict
			case g != nil:
				want.outcome = "idempotent_remint"
			default:
				want.outcome = "first_mint"
				if c := sc.perHost[component]; c != 0 {
					n := uint32(0)
					for _, o := range regs {
						if o.spec.Component == component && o.host == host {
							n++
						}
					}
					if n >= c {
						want.outcome, want.reason, want.ceiling, want.limit = "", vocab.ReasonInstanceCeiling, vocab.CeilingInstancesPerHost, c
					}
				}
				if want.reason == 0 && pol >= 0 {
					if c := sc.policies[pol].rules.MaxRegistrations; c != 0 {
						n := uint32(0)
						for _, o := range regs {
							if p, ok := sc.policy(o.owner); ok && p == pol {
								n++
							}
						}
						if n >= c {
							want.outcome, want.reason, want.ceiling, want.limit = "", vocab.ReasonInstanceCeiling, vocab.CeilingRegistrations, c
						}
					}
				}
				if want.reason != 0 {
					countRefusal(want.reason)
				}
			}
		}

		// The verbs' answer.
		before := log.Len()
		var have expected
		var secret string
		if verb == vocab.Mint {
			res, err := v.Mint(ctx, registrar.MintRequest{CallerIdentity: caller.id, ServiceName: service, Host: host, Instance: instance,
				Component: component, Spec: spec, WrapTTLSeconds: 300})
			out := ""
			if err == nil {
				out, secret = res.Outcome.String(), res.Material.WrappedSecretID
			}
			have = got(out, err)
		} else {
			res, err := v.Deregister(ctx, registrar.DeregisterRequest{CallerIdentity: caller.id, ServiceName: service, Host: host,
				Instance: instance, Component: component})
			out := ""
			if err == nil {
				out = res.Outcome.String()
			}
			have = got(out, err)
		}
		have.records = log.Len() - before
		if have != want {
			t.Fatalf("step %d: %s %v %s/%s on %s #%d (policy %d %v, owner %v): the verbs %+v, the model %+v",
				step, caller.id, verb, service, component, host, instance, pol, hasPolicy, g, have, want)
		}
		key := want.outcome
		if key == "" {
			key = want.reason.String()
			if want.ceiling != 0 {
				key += " " + want.ceiling.String()
			}
			if want.limited {
				key += " (limited)"
			}
			if want.retry != 0 {
				key = "throttled"
			}
		}
		decisions[key]++

		// The model's registry follows the answer.
		switch want.outcome {
		case "first_mint":
			regs[id] = &mRegistration{host: host, spec: spec, owner: caller.id, secret: secret}
		case "idempotent_remint":
			g.secret = secret
		case "removed":
			delete(regs, id)
		}
		if want.reason == vocab.ReasonNotOwner && !mb.valid(id, g.secret) {
			t.Fatalf("step %d: after %s's refused %v of %s, its owner's last secret id no longer logs in", step, caller.id, verb, id)
		}
		if step%50 == 0 {
			checkCounts(step)
		}
	}
	checkCounts(steps)
	for _, k := range []string{"no_policy", "out_of_scope", "not_owner", "instance_ceiling max_instances_per_host", "instance_ceiling max_registrations", "no_policy (limited)", "out_of_scope (limited)",
		"throttled", "first_mint", "idempotent_remint", "removed", "already_absent", "reload", "crash"} {
		if decisions[k] == 0 {
			t.Errorf("no %s decision in %d steps: the run exercised too little (%v)", k, steps, decisions)
		}
	}
	t.Logf("decisions: %v", decisions)
}

// TestAuthorizationAgreesWithTheExactModel is issue 36's model test:
// random identities (operators, socket-group members, certificates of
// dns and uri names, with and without a host), random caller policies
// (exact identities and prefixes, the catch-all among them, scopes of
// random patterns and {identity}, every scope_owner, max_registrations),
// per-host ceilings, random mints, remints, deregisters, reloads, clock
// steps and crashes: every answer of the verbs, the records each wrote,
// the live counts and the refusal counters equal the model's, on the fake
// registry and on the embedded one (bbolt). An owner refused to another
// caller still logs in with its last secret id.
func TestAuthorizationAgreesWithTheExactModel(t *testing.T) {
	steps := 10000
	if testing.Short() {
		steps = 4000
	}
	t.Run("fake", func(t *testing.T) {
		for seed := range uint64(2) {
			t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
				fake := registrartest.NewBackend(t)
				runAuthorizationModel(t, seed, steps, &modelBackend{
					b:       fake,
					restart: func() registrar.Backend { return fake },
					valid:   fake.Valid,
				})
			})
		}
	})
	t.Run("embedded", func(t *testing.T) {
		dir := t.TempDir()
		open := func() *embedded.Backend {
			b, err := embedded.Open(dir, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		cur := open()
		t.Cleanup(func() { cur.Close() })
		valid := func(id, secret string) bool {
			ok, err := cur.VerifySecret(id, secret, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			return err == nil && ok
		}
		runAuthorizationModel(t, 7, steps, &modelBackend{
			b: cur,
			restart: func() registrar.Backend {
				if err := cur.Close(); err != nil {
					t.Fatal(err)
				}
				cur = open()
				return cur
			},
			valid: valid,
		})
	})
}
