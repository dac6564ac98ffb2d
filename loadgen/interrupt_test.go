package loadgen_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// An interrupted wave stops retrying and starting mints; the report says
// what completed, what was abandoned while throttled, and what never
// started, and the last progress call shows the report's own counts.
func TestInterruptedWaveReportsWhatCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, 5, time.Hour) // 5 tokens, no refill within the test
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var last loadgen.Progress
		done := make(chan struct{})
		var rep loadgen.Report
		var err error
		go func() {
			defer close(done)
			rep, err = loadgen.Wave(ctx, f, loadgen.WaveOptions{
				Hosts: 2, ModulesPerHost: 4, Concurrency: 2,
				OnProgress: func(p loadgen.Progress) { mu.Lock(); last = p; mu.Unlock() },
			})
		}()
		synctest.Wait() // both workers throttled, asleep until retry_after
		cancel()
		<-done
		if !errors.Is(err, context.Canceled) || !rep.Interrupted {
			t.Fatalf("err %v, interrupted %v; want context.Canceled and Interrupted", err, rep.Interrupted)
		}
		if rep.Admitted != 5 || rep.Throttled != 2 || rep.Abandoned != 2 || rep.Done != 5 || rep.NotStarted() != 1 || rep.Requests != 7 {
			t.Fatalf("report %+v (not started %d, requests %d), want 5 admitted, 2 throttled and abandoned, 1 not started", rep.Progress, rep.NotStarted(), rep.Requests)
		}
		mu.Lock()
		defer mu.Unlock()
		if last.Done != rep.Done || last.Admitted != rep.Admitted || last.Abandoned != rep.Abandoned || last.Throttled != rep.Throttled {
			t.Fatalf("last progress %+v, want the report's final counts %+v", last, rep.Progress)
		}
	})
}

// blockingClient admits every mint once release is closed, and says when
// a call has started.
type blockingClient struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingClient) Mint(ctx context.Context, _ wire.MintRequest) (*wire.Response, error) {
	b.once.Do(func() { close(b.started) })
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &wire.Response{StatusCode: http.StatusOK, Outcome: "first_mint"}, nil
}

// A call in flight when the run is interrupted finishes and is counted:
// the daemon did that work, so the report must say so.
func TestInterruptLetsCallsInFlightFinish(t *testing.T) {
	for _, flood := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			c := &blockingClient{started: make(chan struct{}), release: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan loadgen.Report)
			go func() {
				var rep loadgen.Report
				if flood {
					rep, _ = loadgen.Flood(ctx, c, loadgen.FloodOptions{Bucket: vocab.Admission, Requests: 10, Concurrency: 1})
				} else {
					rep, _ = loadgen.Wave(ctx, c, loadgen.WaveOptions{Hosts: 1, ModulesPerHost: 10, Concurrency: 1})
				}
				done <- rep
			}()
			<-c.started
			cancel()
			synctest.Wait()
			close(c.release)
			rep := <-done
			if rep.Admitted != 1 || rep.Failed != 0 || rep.Done != 1 || !rep.Interrupted || rep.NotStarted() != 9 {
				t.Fatalf("flood=%v: report %+v, want the one call in flight admitted and 9 not started", flood, rep.Progress)
			}
		})
	}
}
