package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// TestLimiterConfigGivesEachRegistrarItsShare: with registrar.instances =
// N every bucket the limiter is given (the default sizes, a policy's
// enforced and shadow sizes) holds burst / N tokens, rounded down, and
// refills one per interval × N, so N daemons together admit no more than
// the policy.
func TestLimiterConfigGivesEachRegistrarItsShare(t *testing.T) {
	r := config.Default().Registrar
	r.Instances = 3
	sizes := config.CallerSizes{AdmissionBurst: 10, AdmissionRefillIntervalMS: 700, PredecisionRefusalBurst: 7, PredecisionRefusalRefillIntervalMS: 1000}
	shadow := config.CallerSizes{AdmissionBurst: 5, AdmissionRefillIntervalMS: 100, PredecisionRefusalBurst: 3, PredecisionRefusalRefillIntervalMS: 50}
	r.Callers = []config.CallerPolicy{{Name: "ci", Identities: []string{"registrar-client:dns:ci"}, Sizes: sizes, Shadow: &shadow}}
	lc, err := limiterConfig(r)
	if err != nil {
		t.Fatal(err)
	}
	bc := func(burst uint32, ms int64) limiter.BucketConfig {
		return limiter.BucketConfig{Burst: burst, RefillInterval: time.Duration(ms) * time.Millisecond}
	}
	for _, c := range []struct {
		name      string
		got, want limiter.BucketConfig
	}{
		{"default admission", lc.Admission, bc(512/3, 500*3)},
		{"default predecision_refusal", lc.PredecisionRefusal, bc(32/3, 1000*3)},
		{"policy admission", lc.Policies[0].Sizes.Admission, bc(3, 2100)},
		{"policy predecision_refusal", lc.Policies[0].Sizes.PredecisionRefusal, bc(2, 3000)},
		{"shadow admission", lc.Policies[0].Shadow.Admission, bc(1, 300)},
		{"shadow predecision_refusal", lc.Policies[0].Shadow.PredecisionRefusal, bc(1, 150)},
	} {
		if c.got != c.want {
			t.Errorf("%s with 3 instances = %+v, want %+v", c.name, c.got, c.want)
		}
	}
}

// TestReloadAppliesAChangeOfInstancesLive: registrar.instances is live; a
// reload that changes it alone re-expresses the buckets in the new share.
func TestReloadAppliesAChangeOfInstancesLive(t *testing.T) {
	rr := startFromFile(t)
	if got := rr.d.limiter.Params().Admission; got.Burst != 3 {
		t.Fatalf("admission burst at start = %d, want 3", got.Burst)
	}
	rr.write(t, reloadFile(rr.dir, startLimits+"instances = 2\n", twoComponents), 0o600)
	changes, err := rr.d.Reload(context.Background())
	if err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if len(changes) != 1 || changes[0].Key != "registrar.instances" || !changes[0].Live {
		t.Fatalf("changes = %+v, want registrar.instances alone, live", changes)
	}
	p := rr.d.limiter.Params()
	if want := (limiter.BucketConfig{Burst: 1, RefillInterval: 2 * time.Hour}); p.Admission != want {
		t.Errorf("admission after instances = 2: %+v, want %+v", p.Admission, want)
	}
	if want := (limiter.BucketConfig{Burst: 1, RefillInterval: 2 * time.Hour}); p.PredecisionRefusal != want {
		t.Errorf("predecision_refusal after instances = 2: %+v, want %+v", p.PredecisionRefusal, want)
	}
}

// TestRegistrarsWithTheirSharesAdmitNoMoreThanThePolicy is the limits
// rule on the real limiter, with an injected clock (no real time passes):
// N daemons each built from limiterConfig with registrar.instances = N,
// one caller charging a pseudo-random daemon at pseudo-random steps over
// ten simulated minutes. After every charge, the admitted total is at
// most the policy's burst + elapsed / interval, elapsed counted from the
// first charge; and a caller that waits long enough gets the policy's
// whole rate back from all of them together.
func TestRegistrarsWithTheirSharesAdmitNoMoreThanThePolicy(t *testing.T) {
	for _, tc := range []struct {
		n, burst, intervalMS uint32
	}{{2, 5, 1000}, {3, 10, 700}, {4, 512, 500}, {1, 7, 300}} {
		r := config.Default().Registrar
		r.Instances, r.RateLimitAdmissionBurst, r.RateLimitAdmissionRefillIntervalMS = tc.n, tc.burst, tc.intervalMS
		var now limiter.Instant
		daemons := make([]*limiter.Limiter, tc.n)
		for i := range daemons {
			lc, err := limiterConfig(r)
			if err != nil {
				t.Fatal(err)
			}
			lc.Now = func() limiter.Instant { return now }
			if daemons[i], err = limiter.New(lc, nil); err != nil {
				t.Fatal(err)
			}
		}
		interval := time.Duration(tc.intervalMS) * time.Millisecond
		seed := uint64(tc.n)*7919 + uint64(tc.burst)
		next := func(m uint64) uint64 { // xorshift: the same walk every run
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
			return seed % m
		}
		var admitted uint64
		for step := 0; time.Duration(now) < 10*time.Minute; step++ {
			d := daemons[next(uint64(tc.n))]
			if d.Charge(context.Background(), "registrar-client:dns:ci.example.net", vocab.Mint, vocab.Admission).Allowed {
				admitted++
			}
			if bound := uint64(tc.burst) + uint64(time.Duration(now)/interval); admitted > bound {
				t.Fatalf("%d registrars, burst %d, %v per token: %d admitted after %v (step %d), want at most %d",
					tc.n, tc.burst, interval, admitted, time.Duration(now), step, bound)
			}
			now += limiter.Instant(time.Duration(next(uint64(2*interval/time.Millisecond))) * time.Millisecond / 4)
		}
		if floor := uint64(time.Duration(now)/interval) / 2; admitted < floor {
			t.Errorf("%d registrars: only %d admitted in %v of steady demand, want at least half the policy's rate (%d)", tc.n, admitted, time.Duration(now), floor)
		}
	}
}
