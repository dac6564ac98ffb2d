package server

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// scriptedLimits answers RateLimit with the next status of its script.
type scriptedLimits struct{ next limiter.BucketStatus }

func (*scriptedLimits) Caller(string) limiter.Caller { return limiter.Caller{} }
func (l *scriptedLimits) RateLimit(limiter.Caller, vocab.Verb) limiter.BucketStatus {
	return l.next
}

// A connection's answers reuse its last RateLimit value only while what
// the value says is unchanged: a new policy name (a reload), a token
// more or less, or a new delay each give a value of their own, and a
// request without a connection gets a fresh one every time.
func TestTheRateLimitValueIsReusedOnlyWhileItIsTheSame(t *testing.T) {
	lim := &scriptedLimits{}
	s := &Server{rateLimits: lim}
	tc := &trackedConn{}
	answer := func(tc *trackedConn) []string {
		t.Helper()
		w := httptest.NewRecorder()
		s.setRateLimit(w, tc, limiter.Caller{}, "uid:1000", vocab.Mint)
		v := w.Header()[keyRateLimit]
		if len(v) != 1 {
			t.Fatalf("RateLimit %q: want one value", v)
		}
		return v
	}
	// Each status differs from the one before it in one field.
	base := limiter.BucketStatus{Policy: "default", Burst: 8, RefillInterval: time.Second, Tokens: 0, NextIn: 700 * time.Millisecond}
	otherPolicy := base
	otherPolicy.Policy = "agents"
	tokenMore := otherPolicy
	tokenMore.Tokens = 1
	otherDelay := tokenMore
	otherDelay.NextIn = 1500 * time.Millisecond
	steps := []struct {
		name  string
		st    limiter.BucketStatus
		fresh bool // a value of its own, not the last one's
	}{
		{"first", base, true},
		{"the same", base, false},
		{"another policy", otherPolicy, true},
		{"a token more", tokenMore, true},
		{"another delay", otherDelay, true},
		{"the same again", otherDelay, false},
	}
	var last []string
	for _, step := range steps {
		lim.next = step.st
		got := answer(tc)
		want := wire.FormatRateLimit(step.st.Policy, uint64(step.st.Tokens), wire.DelaySeconds(step.st.NextIn))
		if got[0] != want {
			t.Errorf("%s: RateLimit %q, want %q", step.name, got[0], want)
		}
		if reused := last != nil && &got[0] == &last[0]; reused == step.fresh {
			t.Errorf("%s: the last value reused %v, want %v", step.name, reused, !step.fresh)
		}
		last = got
	}
	if a, b := answer(nil), answer(nil); &a[0] == &b[0] {
		t.Errorf("without a connection, two answers share one value")
	}
}
