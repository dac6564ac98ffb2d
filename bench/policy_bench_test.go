package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/callers"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// policyLimiter is ours with 1,024 caller policies matched by the daemon's
// own matcher (callers.Matcher): half name one exact identity each, half
// an identity prefix each, as a large [registrar.callers] table would.
func policyLimiter(tb testing.TB) *limiter.Limiter {
	sizes := limiter.Sizes{
		PredecisionRefusal: limiter.BucketConfig{Burst: 32, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: burst, RefillInterval: interval},
	}
	ps := make([]callers.Policy, benchPolicies)
	lps := make([]limiter.Policy, benchPolicies)
	for i := range ps {
		name := "p" + strconv.Itoa(i)
		if i%2 == 0 {
			ps[i] = callers.Policy{Name: name, Identities: []string{"registrar-client:uri:spiffe://example.org/host/" + strconv.Itoa(i)}}
		} else {
			ps[i] = callers.Policy{Name: name, IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/team-" + strconv.Itoa(i) + "/"}}
		}
		lps[i] = limiter.Policy{Name: name, Sizes: sizes}
	}
	m, err := callers.New(ps)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := limiter.New(limiter.Config{
		PredecisionRefusal: sizes.PredecisionRefusal, Admission: sizes.Admission,
		Policies: lps, Match: m.Match,
	}, limiter.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// BenchmarkPolicyMissAtTheCap is the worst case a policy adds: an identity
// new to a map saturated with drained entries (the attack path of
// BenchmarkChurnDrainedMap), so the charge must look its policy up among
// 1,024 (the longest of the prefixes, for an identity under one of them)
// and fall on that policy's overflow bucket. Its budget is 0.35 µs and no
// allocation. Every charge is a fresh Caller, as a fresh connection's
// would be: the identity is hashed too.
func BenchmarkPolicyMissAtTheCap(b *testing.B) {
	l := policyLimiter(b)
	ctx := context.Background()
	for i := range limiter.MaxEntries {
		c := l.Caller("drained" + strconv.Itoa(i))
		for l.ChargeCaller(ctx, &c, vocab.Mint, vocab.Admission, time.Time{}).Allowed {
		}
	}
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = "registrar-client:uri:spiffe://example.org/team-" + strconv.Itoa(2*(i%512)+1) + "/agent-" + strconv.Itoa(i)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		c := l.Caller(ids[i&4095])
		d := l.ChargeCaller(ctx, &c, vocab.Mint, vocab.Admission, time.Time{})
		if !d.Overflow {
			b.Fatal("the charge did not fall on an overflow bucket: the map was not at its cap")
		}
		i++
	}
}
