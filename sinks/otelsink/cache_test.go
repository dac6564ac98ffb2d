package otelsink_test

import (
	"context"
	"testing"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/sinks/otelsink"
	"github.com/registrar-otel/registrar-otel/vocab"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAdmissionEventCacheFollowsRetryAfter: the hoisted admission event is
// reused only for the same verb and retry-after; each event carries its own
// values whatever came before (a countdown, a change of verb, back again).
func TestAdmissionEventCacheFollowsRetryAfter(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s, err := otelsink.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		verb  vocab.Verb
		retry uint64
	}
	seq := []want{{vocab.Mint, 3}, {vocab.Mint, 3}, {vocab.Mint, 2}, {vocab.Deregister, 2}, {vocab.Mint, 3}, {vocab.Mint, 1 << 63}, {vocab.Mint, 1}}
	for _, w := range seq {
		ctx, span := tp.Tracer("test").Start(context.Background(), "registrar.mint")
		s.Limited(ctx, limiter.Event{Verb: w.verb, Bucket: vocab.Admission, RetryAfterSeconds: w.retry})
		span.End()
	}
	ended := rec.Ended()
	if len(ended) != len(seq) {
		t.Fatalf("%d spans, want %d", len(ended), len(seq))
	}
	for i, sp := range ended {
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Events()[0].Attributes {
			got[kv.Key] = kv.Value
		}
		retry := int64(min(seq[i].retry, 1<<63-1))
		if got[otelsink.AttrRetryAfter] != attribute.Int64Value(retry) || got[otelsink.AttrVerb] != attribute.StringValue(seq[i].verb.String()) {
			t.Errorf("event %d: %v, want verb %s retry %d", i, got, seq[i].verb, retry)
		}
	}
}
