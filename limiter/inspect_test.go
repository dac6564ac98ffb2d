package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// policyConfig is the default sizes (refusal 4/s, admission 8/500 ms) and
// one policy "bulk" (admission 20/100 ms) for the identities starting
// "bulk-", with a shadow of admission 2/1 s when shadow is set.
func policyConfig(now *Instant, shadow bool) Config {
	c := cfg(4, time.Second, 8, 500*time.Millisecond)
	bulk := Policy{Name: "bulk", Sizes: Sizes{
		PredecisionRefusal: BucketConfig{Burst: 4, RefillInterval: time.Second},
		Admission:          BucketConfig{Burst: 20, RefillInterval: 100 * time.Millisecond},
	}}
	if shadow {
		bulk.Shadow = &Sizes{
			PredecisionRefusal: BucketConfig{Burst: 4, RefillInterval: time.Second},
			Admission:          BucketConfig{Burst: 2, RefillInterval: time.Second},
		}
	}
	c.Policies = []Policy{bulk}
	c.Match = func(id string) (int, bool) { return 0, strings.HasPrefix(id, "bulk-") }
	c.Now = func() Instant { return *now }
	c.Local = func(id string) bool { return strings.HasPrefix(id, "unix-") }
	return c
}

func TestAPolicySizesItsIdentitiesBucketsOnly(t *testing.T) {
	now := 10 * sec
	l := mustNew(t, policyConfig(&now, false), nil)
	ctx := context.Background()
	if got := admitted(l, "bulk-1", vocab.Mint, vocab.Admission, now, 100); got != 20 {
		t.Errorf("bulk identity: %d admitted, want its policy's 20", got)
	}
	if got := admitted(l, "agent", vocab.Mint, vocab.Admission, now, 100); got != 8 {
		t.Errorf("default identity: %d admitted, want the default 8", got)
	}
	d := l.Charge(ctx, "bulk-1", vocab.Mint, vocab.Admission)
	if d.Allowed || d.Policy != "bulk" {
		t.Errorf("drained bulk charge: %+v, want limited under policy bulk", d)
	}
	if d := l.Charge(ctx, "agent", vocab.Deregister, vocab.Admission); !d.Allowed || d.Policy != DefaultPolicy {
		t.Errorf("agent's other verb: %+v, want allowed under the default policy (a policy never merges keys)", d)
	}
}

func TestStatusDescribesABucketWithoutChargingIt(t *testing.T) {
	now := 10 * sec
	l := mustNew(t, policyConfig(&now, true), nil)
	c := l.Caller("bulk-1")
	st := l.Status(c, vocab.Mint, vocab.Admission)
	if st.State != StateAbsent || st.Tokens != 20 || st.Burst != 20 || st.RefillInterval != 100*time.Millisecond || st.Policy != "bulk" || st.NextIn != 0 || st.FullIn != 0 {
		t.Fatalf("absent key: %+v", st)
	}
	if st.Shadow == nil || st.Shadow.Burst != 2 || st.Shadow.Tokens != 2 {
		t.Fatalf("absent key's shadow: %+v, want the shadow burst 2", st.Shadow)
	}
	for range 3 {
		l.ChargeCaller(context.Background(), &c, vocab.Mint, vocab.Admission, time.Time{})
	}
	now += 30 * ms // a banked partial interval
	st = l.Status(c, vocab.Mint, vocab.Admission)
	if st.State != StateEntry || st.Tokens != 17 || st.NextIn != 70*time.Millisecond || st.FullIn != 270*time.Millisecond || st.RetryAfter != 0 {
		t.Fatalf("charged three times, 30 ms later: %+v, want 17 tokens, next in 70 ms, full in 270 ms", st)
	}
	if st.Shadow == nil || st.Shadow.Tokens != 0 || st.Shadow.RetryAfter != 970*time.Millisecond {
		t.Fatalf("shadow after three charges of burst 2: %+v, want empty with its next token 970 ms away", st.Shadow)
	}
	if again := l.Status(c, vocab.Mint, vocab.Admission); again.Tokens != 17 {
		t.Fatalf("a second Status changed the bucket: %+v", again)
	}
	if st := l.Status(c, vocab.Verb(9), vocab.Admission); st != (BucketStatus{}) {
		t.Fatalf("invalid verb: %+v, want the zero status", st)
	}
}

func TestInspectResetAndIdentities(t *testing.T) {
	now := 10 * sec
	l := mustNew(t, policyConfig(&now, true), nil)
	admitted(l, "bulk-1", vocab.Mint, vocab.Admission, now, 100)
	admitted(l, "unix-0", vocab.Deregister, vocab.PredecisionRefusal, now, 100)
	if got := l.Identities(); len(got) != 2 || got[0] != "bulk-1" || got[1] != "unix-0" {
		t.Fatalf("Identities = %q, want [bulk-1 unix-0]", got)
	}
	in := l.Inspect("unix-0")
	if !in.Local || in.Policy != DefaultPolicy || in.Buckets[vocab.Deregister][vocab.PredecisionRefusal].Tokens != 0 ||
		in.Buckets[vocab.Mint][vocab.Admission].State != StateAbsent {
		t.Fatalf("Inspect(unix-0) = %+v", in)
	}
	after := l.Reset("bulk-1", []vocab.Verb{vocab.Mint}, []vocab.Bucket{vocab.Admission})
	if len(after) != 1 || after[0].Tokens != 20 || after[0].Shadow == nil || after[0].Shadow.Tokens != 2 {
		t.Fatalf("Reset = %+v, want the enforced bucket at 20 and the shadow at 2", after)
	}
	if got := admitted(l, "bulk-1", vocab.Mint, vocab.Admission, now, 100); got != 20 {
		t.Fatalf("after the reset %d admitted, want the burst 20", got)
	}
	if got := admitted(l, "unix-0", vocab.Deregister, vocab.PredecisionRefusal, now, 1); got != 0 {
		t.Fatal("a reset of bulk-1 refilled unix-0")
	}
	if all := l.Reset("unix-0", nil, nil); len(all) != 4 || all[3].Verb != vocab.Deregister {
		t.Fatalf("Reset of every key = %+v, want four", all)
	}
	if got := admitted(l, "unix-0", vocab.Deregister, vocab.PredecisionRefusal, now, 100); got != 4 {
		t.Fatalf("after a reset of every key %d admitted, want 4", got)
	}
}

func TestOverflowBucketsArePerPolicy(t *testing.T) {
	now := 10 * sec
	l := mustNew(t, policyConfig(&now, false), nil)
	// Fill the remote pool with drained default entries.
	for i := range MaxEntries {
		id := "agent-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		admitted(l, id, vocab.Mint, vocab.Admission, now, 8)
	}
	d := l.ChargeAt(context.Background(), "bulk-9", vocab.Mint, vocab.Admission, now)
	if !d.Overflow || d.Policy != "bulk" || !d.Allowed || d.Remaining != 19 {
		t.Fatalf("a bulk identity at the drained cap: %+v, want bulk's own overflow bucket (19 left)", d)
	}
	if st := l.Status(l.Caller("bulk-10"), vocab.Mint, vocab.Admission); st.State != StateOverflow || st.Tokens != 19 {
		t.Fatalf("another bulk identity's status: %+v, want overflow with 19", st)
	}
	var seen int
	for _, o := range l.Overflow() {
		if !o.Local && o.Policy == "bulk" && o.Verb == vocab.Mint && o.Bucket == vocab.Admission {
			seen++
			if o.Tokens != 19 || o.Charges != 1 {
				t.Fatalf("bulk's remote overflow bucket: %+v", o)
			}
		}
	}
	if seen != 1 {
		t.Fatalf("Overflow listed bulk's remote mint admission bucket %d times", seen)
	}
}

func TestPolicyConfigurationErrorsAreNamed(t *testing.T) {
	var now Instant
	for name, mutate := range map[string]func(*Config){
		"empty name":     func(c *Config) { c.Policies[0].Name = "" },
		"reserved name":  func(c *Config) { c.Policies[0].Name = DefaultPolicy },
		"duplicate name": func(c *Config) { c.Policies = append(c.Policies, c.Policies[0]) },
		"zero burst":     func(c *Config) { c.Policies[0].Sizes.Admission.Burst = 0 },
		"zero interval":  func(c *Config) { c.Policies[0].Sizes.PredecisionRefusal.RefillInterval = 0 },
		"zero shadow":    func(c *Config) { c.Policies[0].Shadow.Admission.Burst = 0 },
		"no matcher":     func(c *Config) { c.Match = nil },
	} {
		c := policyConfig(&now, true)
		mutate(&c)
		if _, err := New(c, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New err = %v, want ErrInvalidConfig", name, err)
		}
		l := mustNew(t, policyConfig(&now, true), nil)
		if err := l.Reconfigure(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Reconfigure err = %v, want ErrInvalidConfig", name, err)
		}
		if p := l.Params(); len(p.Policies) != 1 || p.Policies[0].Shadow == nil || p.Policies[0].Shadow.Admission.Burst != 2 {
			t.Errorf("%s: a refused Reconfigure changed the policies: %+v", name, p.Policies)
		}
	}
}

func TestAMatcherAnsweringOutsideThePoliciesGivesTheDefault(t *testing.T) {
	var now Instant
	c := policyConfig(&now, false)
	c.Match = func(string) (int, bool) { return 7, true }
	l := mustNew(t, c, nil)
	if d := l.ChargeAt(context.Background(), "x", vocab.Mint, vocab.Admission, 0); d.Policy != DefaultPolicy || d.Remaining != 7 {
		t.Fatalf("%+v, want the default policy", d)
	}
}

// TestShadowRunStartsAndStopsUnderConcurrentCharges: reconfigurations
// that start and drop the shadow run while other goroutines charge (run
// with -race): nothing races, and a shadow event is only ever published
// for the shadowed policy.
func TestShadowRunStartsAndStopsUnderConcurrentCharges(t *testing.T) {
	now := 10 * sec
	on, off := policyConfig(&now, true), policyConfig(&now, false)
	on.Now, off.Now = nil, nil
	rec := &recorder{}
	l := mustNew(t, off, rec)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			ids := []string{"bulk-a", "bulk-b", "agent", "unix-1"}
			for i := range 2000 {
				l.Charge(context.Background(), ids[(g+i)%4], vocab.Verb(i%2), vocab.Admission)
			}
		}()
	}
	for i := range 40 {
		c := off
		if i%2 == 0 {
			c = on
		}
		if err := l.Reconfigure(c); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		<-done
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ev := range rec.events {
		if ev.Shadow && ev.Policy != "bulk" {
			t.Fatalf("shadow event of policy %q, which has no shadow", ev.Policy)
		}
	}
}
