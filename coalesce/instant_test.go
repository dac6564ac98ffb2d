package coalesce_test

import (
	"context"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/internal/testing/audittest"
	"github.com/registrar-otel/registrar-otel/limiter"
)

// wallRig is a sink on its default clock (time.Now), the daemon's, so that
// an event's At (the limiter's reading of the charge instant) stands in for
// the sink's own clock read.
func wallRig(t *testing.T, window time.Duration) (*coalesce.Sink, *audittest.AuditLog) {
	t.Helper()
	store := &audittest.AuditLog{}
	s, err := coalesce.New(coalesce.Options{Store: store, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	return s, store
}

func at(id string, when time.Time) limiter.Event {
	return limiter.Event{Identity: id, Verb: limiter.Mint, Bucket: limiter.Admission, RetryAfterSeconds: 1, At: when}
}

// TestAnEventsInstantOpensItsWindow: on the wall clock, a window opens at
// the instant the limiter charged at, not at a second clock read.
func TestAnEventsInstantOpensItsWindow(t *testing.T) {
	s, store := wallRig(t, time.Minute)
	base := time.Now()
	s.Limited(context.Background(), at("a", base))
	s.Flush(context.Background(), base.Add(time.Second))
	recs := store.Records()
	if len(recs) != 1 || !recs[0].WindowStart.Equal(base) {
		t.Fatalf("records %+v, want one window opened at the event's instant %v", recs, base)
	}
}

// TestALateReadInstantNeverOpensAWindowBeforeAClosedOneEnds: an event's
// instant is read before the sink's lock, so a tick (or another call) may
// have gone past it by the time it counts; its window then opens at the
// tick's instant, so a key's windows never overlap, and windows open in
// deadline order.
func TestALateReadInstantNeverOpensAWindowBeforeAClosedOneEnds(t *testing.T) {
	const w = time.Minute
	s, store := wallRig(t, w)
	base := time.Now()
	ctx := context.Background()
	s.Limited(ctx, at("a", base))
	s.Tick(ctx, base.Add(w)) // closes a's window at its deadline
	// Charged before that tick, counted after it.
	s.Limited(ctx, at("a", base.Add(w/2)))
	// Opened elsewhere at +61 s, then an instant read earlier arrives.
	s.Limited(ctx, at("b", base.Add(w+time.Second)))
	s.Limited(ctx, at("c", base.Add(w+time.Millisecond)))
	s.Flush(ctx, base.Add(3*w))
	starts := map[string]time.Time{}
	for _, r := range store.Records()[1:] {
		starts[r.CallerIdentity] = r.WindowStart
	}
	if got := starts["a"]; !got.Equal(base.Add(w)) {
		t.Errorf("a's second window opens at %v, want the tick's instant %v (the first window ended there)", got.Sub(base), w)
	}
	if got := starts["c"]; !got.Equal(base.Add(w + time.Second)) {
		t.Errorf("c's window opens at %v, want %v: not before b's, opened first", got.Sub(base), w+time.Second)
	}
}
