package server

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// The RateLimit-Policy and RateLimit answer headers (docs/en/wire.md
// #ratelimit): on every verb answer, the caller's own admission bucket of
// the verb called.

// RateLimits is what the server needs of the verbs' limiter for the
// headers: *registrar.Verbs implements it. Verbs that do not answer no
// RateLimit headers and leave each request's Caller unprepared.
type RateLimits interface {
	// Caller prepares a connection's identity once, when it is accepted.
	Caller(identity string) limiter.Caller
	// RateLimit is c's admission bucket of verb, after the call.
	RateLimit(c limiter.Caller, verb vocab.Verb) limiter.BucketStatus
}

var _ RateLimits = (*registrar.Verbs)(nil)

// The header names as net/http keeps them (canonical), for setting the
// header map directly.
var (
	keyRateLimitPolicy = http.CanonicalHeaderKey(wire.HeaderRateLimitPolicy)
	keyRateLimit       = http.CanonicalHeaderKey(wire.HeaderRateLimit)
)

// prepare adds the connection's limiter Caller to its identity, before the
// connection is shared.
func (s *Server) prepare(ci connIdentity) connIdentity {
	if s.rateLimits != nil && ci.problem == "" && ci.id != "" {
		ci.caller = s.rateLimits.Caller(ci.id)
	}
	return ci
}

// callerOf is the prepared Caller of the request's connection, if it was
// prepared for identity id; the zero Caller (the verbs prepare it) if not.
// tc is the request's connection, nil for a request of another listener
// (Handler's).
func callerOf(r *http.Request, tc *trackedConn, id string) limiter.Caller {
	var c limiter.Caller
	if tc != nil {
		c = tc.ident.caller
	} else if ci, ok := r.Context().Value(identityKey{}).(connIdentity); ok {
		c = ci.caller
	}
	if c.Identity() != id {
		return limiter.Caller{}
	}
	return c
}

// connOf is the request's tracked connection, nil for a request that
// came another way (Handler's).
func connOf(r *http.Request) *trackedConn {
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	return tc
}

// rateLimitValue is a connection's last RateLimit header value and what
// it was made of. A caller's answers in a row mostly carry the same value
// (a flood's: no tokens, the same delay, for a second at a time), so an
// answer reuses it instead of formatting and allocating it again; only
// the connection's serving goroutine touches it, one request at a time.
type rateLimitValue struct {
	policy        string
	tokens, delay uint64
	v             []string
}

// setRateLimit sets the two headers for c's admission bucket of verb. tc,
// the request's connection (nil for none), keeps the last RateLimit value.
func (s *Server) setRateLimit(w http.ResponseWriter, tc *trackedConn, c limiter.Caller, id string, verb vocab.Verb) {
	if s.rateLimits == nil {
		return
	}
	if c.Identity() != id {
		c = s.rateLimits.Caller(id)
	}
	st := s.rateLimits.RateLimit(c, verb)
	if st.Burst == 0 {
		return // an invalid verb: nothing to describe
	}
	h := w.Header()
	h[keyRateLimitPolicy] = policyHeaders.get(st.Policy, st.Burst, st.RefillInterval)
	tokens, delay := uint64(st.Tokens), wire.DelaySeconds(st.NextIn)
	if tc == nil {
		h[keyRateLimit] = []string{wire.FormatRateLimit(st.Policy, tokens, delay)}
		return
	}
	if last := &tc.rateLimit; last.v == nil || last.policy != st.Policy || last.tokens != tokens || last.delay != delay {
		*last = rateLimitValue{policy: st.Policy, tokens: tokens, delay: delay, v: []string{wire.FormatRateLimit(st.Policy, tokens, delay)}}
	}
	// Shared with the connection's earlier answers: net/http copies the
	// values as it writes the header, and nothing modifies them.
	h[keyRateLimit] = tc.rateLimit.v
}

// policyHeaderKey is one RateLimit-Policy value's inputs.
type policyHeaderKey struct {
	policy   string
	burst    uint32
	interval time.Duration
}

// policyHeaderCache keeps the RateLimit-Policy values, which change only
// with the configuration, so an answer builds only its RateLimit value.
// It holds at most maxPolicyHeaders values (a configuration has a few
// policies; reloads may add more over a daemon's life), then stops
// caching.
type policyHeaderCache struct {
	mu sync.Mutex
	m  atomic.Pointer[map[policyHeaderKey][]string] // copy on write
}

const maxPolicyHeaders = 1024

var policyHeaders policyHeaderCache

func (c *policyHeaderCache) get(policy string, burst uint32, interval time.Duration) []string {
	k := policyHeaderKey{policy, burst, interval}
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	v := []string{wire.FormatRateLimitPolicy(policy, uint64(burst), wire.RateLimitWindowSeconds(uint64(burst), interval))}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxPolicyHeaders {
		return v
	}
	n := make(map[policyHeaderKey][]string, 1+lenOf(old))
	if old != nil {
		for kk, vv := range *old {
			n[kk] = vv
		}
	}
	n[k] = v
	c.m.Store(&n)
	return v
}

func lenOf(m *map[policyHeaderKey][]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// rateLimitsOf is v's RateLimits, or nil.
func rateLimitsOf(v Verbs) RateLimits {
	rl, _ := v.(RateLimits)
	return rl
}
