package config

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestShareDividesEveryBudgetSoTheSharesAddUpToAtMostThePolicy: n shares
// of a burst never hold more than the burst (rounded down, the rest held
// by none), and n shares' rates add up to exactly the policy's (the
// interval multiplied, never rounded).
func TestShareDividesEveryBudgetSoTheSharesAddUpToAtMostThePolicy(t *testing.T) {
	s := CallerSizes{AdmissionBurst: 512, AdmissionRefillIntervalMS: 500, PredecisionRefusalBurst: 33, PredecisionRefusalRefillIntervalMS: math.MaxUint32}
	for _, tc := range []struct {
		n    uint32
		want Share
	}{
		{0, Share{1, 512, 500, 33, math.MaxUint32}}, // a Config built in code
		{1, Share{1, 512, 500, 33, math.MaxUint32}},
		{2, Share{2, 256, 1000, 16, 2 * math.MaxUint32}},
		{3, Share{3, 170, 1500, 11, 3 * math.MaxUint32}},
		{MaxInstances, Share{MaxInstances, 0, 500 * MaxInstances, 0, MaxInstances * math.MaxUint32}},
	} {
		got := s.Share(tc.n)
		if got != tc.want {
			t.Errorf("Share(%d) = %+v, want %+v", tc.n, got, tc.want)
		}
		if got.AdmissionBurst*got.Instances > s.AdmissionBurst || got.PredecisionRefusalBurst*got.Instances > s.PredecisionRefusalBurst {
			t.Errorf("Share(%d): %d shares hold more than the policy's bursts", tc.n, got.Instances)
		}
		if got.AdmissionRefillIntervalMS != uint64(s.AdmissionRefillIntervalMS)*uint64(got.Instances) {
			t.Errorf("Share(%d): interval %d ms, want the policy's × %d exactly", tc.n, got.AdmissionRefillIntervalMS, got.Instances)
		}
	}
}

// TestInstancesAtMostEveryBurstIsAccepted: the edges of the rule that
// fixtures do not show: a burst equal to instances is one token each, and
// one registrar takes any burst.
func TestInstancesAtMostEveryBurstIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		instances, burst uint32
		bad              bool
	}{
		{1, 1, false}, {2, 2, false}, {2, 1, true}, {MaxInstances, MaxInstances, false}, {MaxInstances + 1, math.MaxUint32, true},
	} {
		c := Default()
		c.Registrar.Instances = tc.instances
		c.Registrar.RateLimitAdmissionBurst = tc.burst
		c.Registrar.RateLimitPredecisionRefusalBurst = tc.burst
		err := c.Validate()
		var ke *KeyError
		if bad := err != nil; bad != tc.bad {
			t.Errorf("instances %d, bursts %d: Validate() = %v, want error %v", tc.instances, tc.burst, err, tc.bad)
		} else if bad && (!errors.As(err, &ke) || !strings.Contains(err.Error(), "registrar.")) {
			t.Errorf("instances %d, bursts %d: %v, want a *KeyError naming a key", tc.instances, tc.burst, err)
		}
	}
}
