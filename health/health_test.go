package health_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/counting"
)

func TestHolderServesTheLastRefreshOnly(t *testing.T) {
	c := counting.New()
	h, err := health.NewHolder(health.LimiterSource(c))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(h.Current().JSON), `{"limiter":{"limited_predecision_refusal":0,"limited_admission":0}}`; got != want {
		t.Fatalf("initial snapshot %s, want %s", got, want)
	}
	for range 3 {
		c.Limited(context.Background(), limiter.Event{Bucket: limiter.PredecisionRefusal})
	}
	c.Limited(context.Background(), limiter.Event{Bucket: limiter.Admission})
	// No refresh: the served container is unchanged.
	if got := h.Current().Container.Limiter; got != (health.LimiterMember{}) {
		t.Fatalf("snapshot moved without a refresh: %+v", got)
	}
	if err := h.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got, want := string(h.Current().JSON), `{"limiter":{"limited_predecision_refusal":3,"limited_admission":1}}`; got != want {
		t.Fatalf("after refresh %s, want %s", got, want)
	}
}

func TestEachBucketMovesOnlyItsField(t *testing.T) {
	for _, b := range []limiter.Bucket{limiter.PredecisionRefusal, limiter.Admission} {
		c := counting.New()
		h, _ := health.NewHolder(health.LimiterSource(c))
		for range 5 {
			c.Limited(context.Background(), limiter.Event{Bucket: b})
		}
		h.Refresh()
		got := h.Current().Container.Limiter
		want := health.LimiterMember{LimitedPredecisionRefusal: 5}
		if b == limiter.Admission {
			want = health.LimiterMember{LimitedAdmission: 5}
		}
		if got != want {
			t.Fatalf("flooding %v: %+v, want %+v", b, got, want)
		}
	}
}

func TestMemberRoundTripsBesideAnUnknownSibling(t *testing.T) {
	// A reader built for this version keeps the limiter member intact when
	// a later version adds a sibling member.
	in := `{"audit_capacity":{"free_bytes":123},"limiter":{"limited_predecision_refusal":7,"limited_admission":2}}`
	var c health.Container
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if c.Limiter != (health.LimiterMember{LimitedPredecisionRefusal: 7, LimitedAdmission: 2}) {
		t.Fatalf("limiter member %+v after a round trip beside a sibling", c.Limiter)
	}
}
