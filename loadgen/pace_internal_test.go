package loadgen

import (
	"math"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/wire"
)

// budget takes the fewest tokens any policy of an answer has left, and
// the longest wait among the policies that have that few: each policy's
// w/q when the answer states it, else its t.
func TestBudgetIsTheMostRestrictivePolicy(t *testing.T) {
	limit := func(name string, r, tsec uint64) wire.ServiceLimit {
		return wire.ServiceLimit{Name: name, Remaining: r, EffectiveWindow: tsec, HasEffectiveWindow: true}
	}
	policies := &wire.RateLimitPolicy{Policies: []wire.QuotaPolicy{
		{Name: "a", Quota: 8, Window: 4},  // 500 ms a token
		{Name: "b", Quota: 10, Window: 2}, // 200 ms
		{Name: "n", Quota: 10},            // no window: no rate stated
	}}
	for _, tc := range []struct {
		name      string
		resp      *wire.Response
		remaining uint64
		refill    time.Duration
		ok        bool
	}{
		{"no answer", nil, 0, 0, false},
		{"no field", &wire.Response{}, 0, 0, false},
		{"one policy, stated", &wire.Response{RateLimitPolicy: policies, RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("a", 3, 1)}}}, 3, 500 * time.Millisecond, true},
		{"one policy, not stated", &wire.Response{RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("a", 0, 2)}}}, 0, 2 * time.Second, true},
		{"a policy without a window", &wire.Response{RateLimitPolicy: policies, RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("n", 1, 3)}}}, 1, 3 * time.Second, true},
		{"a policy of another name", &wire.Response{RateLimitPolicy: policies, RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("z", 1, 4)}}}, 1, 4 * time.Second, true},
		{"the fewest first", &wire.Response{RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("x", 2, 3), limit("y", 5, 1)}}}, 2, 3 * time.Second, true},
		{"the fewest later", &wire.Response{RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("y", 5, 1), limit("x", 2, 3)}}}, 2, 3 * time.Second, true},
		{"a tie: the longer wait", &wire.Response{RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("x", 2, 9), limit("y", 2, 1), limit("z", 2, 4)}}}, 2, 9 * time.Second, true},
		{"a tie, stated", &wire.Response{RateLimitPolicy: policies, RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("b", 0, 1), limit("a", 0, 1)}}}, 0, 500 * time.Millisecond, true},
		{"a t too long for a duration", &wire.Response{RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{limit("x", 0, wire.MaxSFInteger)}}}, 0, math.MaxInt64, true},
	} {
		remaining, refill, ok := budget(tc.resp)
		if remaining != tc.remaining || refill != tc.refill || ok != tc.ok {
			t.Errorf("%s: budget %d, %v, %v; want %d, %v, %v", tc.name, remaining, refill, ok, tc.remaining, tc.refill, tc.ok)
		}
	}
}
