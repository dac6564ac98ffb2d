package limiter

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/limitermodel"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// The exact integer model of the limiter with caller policies is
// internal/testing/limitermodel, shared with the verbs' authorization model
// test. The property tests drive the limiter and the model with the same
// charges and reconfigurations and require every decision to agree.

// scenario is one configuration of the property test: policies with
// sizes and shadows, and the identities' assignment.
type scenario struct {
	def      Sizes
	policies []Policy
	assign   map[string]string
}

func (s scenario) config() Config {
	idx := map[string]int{}
	for i, p := range s.policies {
		idx[p.Name] = i
	}
	assign := s.assign
	return Config{
		PredecisionRefusal: s.def.PredecisionRefusal, Admission: s.def.Admission,
		Policies: s.policies,
		Match: func(id string) (int, bool) {
			i, ok := idx[assign[id]]
			return i, ok
		},
	}
}

// promoted is s with every shadow enforced.
func (s scenario) promoted() scenario {
	p := s
	p.policies = make([]Policy, len(s.policies))
	for i, pol := range s.policies {
		if pol.Shadow != nil {
			pol.Sizes, pol.Shadow = *pol.Shadow, nil
		}
		p.policies[i] = pol
	}
	return p
}

func (s scenario) shadowed() map[string]bool {
	out := map[string]bool{}
	for _, p := range s.policies {
		if p.Shadow != nil {
			out[p.Name] = true
		}
	}
	return out
}

func msizes(s Sizes) limitermodel.Sizes {
	var m limitermodel.Sizes
	m[vocab.PredecisionRefusal].Burst, m[vocab.PredecisionRefusal].Interval = int64(s.PredecisionRefusal.Burst), int64(s.PredecisionRefusal.RefillInterval)
	m[vocab.Admission].Burst, m[vocab.Admission].Interval = int64(s.Admission.Burst), int64(s.Admission.RefillInterval)
	return m
}

// mapAssign is the model's assignment of assign: identity → policy name.
func mapAssign(assign map[string]string) func(string) string {
	return func(id string) string { return assign[id] }
}

func (s scenario) modelSizes() map[string]limitermodel.Sizes {
	out := map[string]limitermodel.Sizes{DefaultPolicy: msizes(s.def)}
	for _, p := range s.policies {
		out[p.Name] = msizes(p.Sizes)
	}
	return out
}

func randSizes(r *rand.Rand) Sizes {
	return Sizes{
		PredecisionRefusal: BucketConfig{Burst: 1 + r.Uint32N(6), RefillInterval: time.Duration(1+r.IntN(40)) * 75 * time.Millisecond},
		Admission:          BucketConfig{Burst: 1 + r.Uint32N(8), RefillInterval: time.Duration(1+r.IntN(40)) * 75 * time.Millisecond},
	}
}

// randScenario draws up to six of eight policy names, each with random
// sizes and, unless alwaysShadow names it, a shadow half the time.
func randScenario(r *rand.Rand, ids []string, alwaysShadow string) scenario {
	s := scenario{def: randSizes(r), assign: map[string]string{}}
	names := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, n := range names[:r.IntN(7)] {
		p := Policy{Name: n, Sizes: randSizes(r)}
		if r.IntN(2) == 0 {
			sh := randSizes(r)
			p.Shadow = &sh
		}
		s.policies = append(s.policies, p)
	}
	if alwaysShadow != "" {
		sh := randSizes(r)
		s.policies = append(s.policies, Policy{Name: alwaysShadow, Sizes: randSizes(r), Shadow: &sh})
	}
	for _, id := range ids {
		if r.IntN(4) > 0 { // a quarter stay on the default
			s.assign[id] = names[r.IntN(len(names))] // may name a policy not configured: default
		}
	}
	if alwaysShadow != "" {
		for _, id := range ids[:50] {
			s.assign[id] = alwaysShadow
		}
	}
	return s
}

// next draws the next reconfiguration from s: policies added, changed or
// removed, identities moved, and shadows promoted.
func (s scenario) next(r *rand.Rand, ids []string, alwaysShadow string) scenario {
	switch r.IntN(3) {
	case 0: // promote some shadows
		n := s
		n.policies = append([]Policy(nil), s.policies...)
		for i, p := range n.policies {
			if p.Shadow != nil && p.Name != alwaysShadow && r.IntN(2) == 0 {
				n.policies[i].Sizes, n.policies[i].Shadow = *p.Shadow, nil
			}
		}
		return n
	case 1: // change sizes and move a few identities
		n := s
		n.policies = append([]Policy(nil), s.policies...)
		if len(n.policies) > 0 {
			i := r.IntN(len(n.policies))
			n.policies[i].Sizes = randSizes(r)
		}
		n.assign = map[string]string{}
		for id, p := range s.assign {
			n.assign[id] = p
		}
		for range 100 {
			id := ids[50+r.IntN(len(ids)-50)]
			n.assign[id] = "p" + strconv.Itoa(r.IntN(8))
		}
		return n
	default:
		return randScenario(r, ids, alwaysShadow)
	}
}

func localID(id string) bool { return strings.HasPrefix(id, "u") }

// shadowCounter counts shadow and enforced events by policy.
type shadowCounter struct {
	shadow, limited map[string]int
}

func (c *shadowCounter) Limited(_ context.Context, ev Event) {
	if ev.Shadow {
		c.shadow[ev.Policy]++
	} else {
		c.limited[ev.Policy]++
	}
}

// sameCounts fails unless got (shadow events by policy) equals want (what
// reference limited, by policy), policy by policy.
func sameCounts(t *testing.T, got, want map[string]int, reference string) {
	t.Helper()
	for _, m := range []map[string]int{got, want} {
		for p := range m {
			if got[p] != want[p] {
				t.Errorf("policy %s: %d shadow events, %s limited %d", p, got[p], reference, want[p])
			}
		}
	}
}

func newShadowCounter() *shadowCounter {
	return &shadowCounter{shadow: map[string]int{}, limited: map[string]int{}}
}

// TestPoliciesAgreeWithTheExactModel: 1,000 identities (half local),
// random policies with random shadows, random charges, sweeps and
// reconfigurations (policies added, changed and removed, identities moved,
// shadows promoted): every decision of the limiter equals the model's, and
// every shadow event is a limited decision of a second model that enforces
// the shadow sizes from the moment they are configured (a copy of the first
// at that moment, reconfigured alongside it, dropped when no shadow is
// left), for an identity of a shadowed policy: no more, no fewer.
func TestPoliciesAgreeWithTheExactModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 35))
			ids := make([]string, 1000)
			for i := range ids {
				ids[i] = []string{"c", "u"}[i%2] + strconv.Itoa(i)
			}
			sc := randScenario(r, ids, "")
			cnt := newShadowCounter()
			cfg := sc.config()
			cfg.Local = localID
			l := mustNew(t, cfg, cnt)
			m := limitermodel.New(sc.modelSizes(), mapAssign(sc.assign), localID)
			var shadow *limitermodel.Model
			if len(sc.shadowed()) > 0 {
				shadow = m.Clone()
				shadow.Reconfigure(sc.promoted().modelSizes(), mapAssign(sc.assign), 0)
			}
			wantShadow := map[string]int{}
			overflows := 0
			now := int64(0)
			ctx := context.Background()
			hot := ids[:200] // 800 keys charged often: the pools (256 each) fill with drained entries
			for step := range 30000 {
				now += r.Int64N(int64(4 * time.Millisecond))
				switch {
				case step%997 == 996:
					sc = sc.next(r, ids, "")
					ncfg := sc.config()
					ncfg.Local = localID
					mustReconfigure(t, l, ncfg, Instant(now))
					switch hasShadow := len(sc.shadowed()) > 0; {
					case hasShadow && shadow == nil:
						shadow = m.Clone()
						shadow.Reconfigure(sc.promoted().modelSizes(), mapAssign(sc.assign), now)
					case hasShadow:
						shadow.Reconfigure(sc.promoted().modelSizes(), mapAssign(sc.assign), now)
					default:
						shadow = nil
					}
					m.Reconfigure(sc.modelSizes(), mapAssign(sc.assign), now)
					continue
				case step%251 == 250:
					l.reclaim(Instant(now))
					m.Sweep(now)
					if shadow != nil {
						shadow.Sweep(now)
						l.mirror.reclaim(Instant(now))
					}
					continue
				}
				id := ids[r.IntN(len(ids))]
				if r.IntN(3) > 0 {
					id = hot[r.IntN(len(hot))]
				}
				v, b := vocab.Verb(r.IntN(2)), vocab.Bucket(r.IntN(2))
				got := l.ChargeAt(ctx, id, v, b, Instant(now))
				want := Decision(m.Charge(id, v, b, now))
				if got != want {
					t.Fatalf("step %d: %s %v/%v at %d: limiter %+v, model %+v", step, id, v, b, now, got, want)
				}
				if got.Overflow {
					overflows++
				}
				if shadow != nil {
					sd := shadow.Charge(id, v, b, now)
					if !sd.Allowed && sc.shadowed()[sd.Policy] {
						wantShadow[sd.Policy]++
					}
				}
			}
			sameCounts(t, cnt.shadow, wantShadow, "the shadow model")
			total := 0
			for _, n := range wantShadow {
				total += n
			}
			if total == 0 || len(cnt.limited) < 3 || overflows == 0 || l.Stats().Reclaimed == 0 {
				t.Fatalf("the run exercised too little: %d shadow limits, %d limited policies, %d overflow charges, %d reclaimed",
					total, len(cnt.limited), overflows, l.Stats().Reclaimed)
			}
			t.Logf("shadow limits %v, limited %v, overflow charges %d, reclaimed %d", cnt.shadow, cnt.limited, overflows, l.Stats().Reclaimed)
		})
	}
}

// TestShadowCountsEqualASecondRunEnforcingTheShadow: a second limiter,
// enforcing every shadow from the start and reconfigured alongside,
// limits exactly the charges the first one counts as shadow limits, policy
// by policy (one policy keeps a shadow throughout, so the shadow run is
// never dropped and restarted).
func TestShadowCountsEqualASecondRunEnforcingTheShadow(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 35))
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = []string{"c", "u"}[i%2] + strconv.Itoa(i)
	}
	const canary = "canary"
	sc := randScenario(r, ids, canary)
	one, two := newShadowCounter(), newShadowCounter()
	c1, c2 := sc.config(), sc.promoted().config()
	c1.Local, c2.Local = localID, localID
	l1, l2 := mustNew(t, c1, one), mustNew(t, c2, two)
	// two's limited events, counted only where one's policy is shadowed.
	want := map[string]int{}
	now := int64(0)
	ctx := context.Background()
	for step := range 30000 {
		now += r.Int64N(int64(40 * time.Millisecond))
		if step%997 == 996 {
			sc = sc.next(r, ids, canary)
			c1, c2 := sc.config(), sc.promoted().config()
			c1.Local, c2.Local = localID, localID
			mustReconfigure(t, l1, c1, Instant(now))
			mustReconfigure(t, l2, c2, Instant(now))
			continue
		}
		id := ids[r.IntN(len(ids))]
		if r.IntN(3) > 0 {
			id = ids[r.IntN(60)]
		}
		v, b := vocab.Verb(r.IntN(2)), vocab.Bucket(r.IntN(2))
		l1.ChargeAt(ctx, id, v, b, Instant(now))
		if d := l2.ChargeAt(ctx, id, v, b, Instant(now)); !d.Allowed && sc.shadowed()[d.Policy] {
			want[d.Policy]++
		}
	}
	if len(want) == 0 {
		t.Fatal("no shadow limit happened: the test exercised nothing")
	}
	sameCounts(t, one.shadow, want, "the second run")
	t.Logf("shadow %v", one.shadow)
}
