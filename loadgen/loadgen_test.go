package loadgen_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// fakeRegistrar answers mints from a real limiter: admitted within the
// admission bucket, RegistrarBusy with the limiter's retry-after past it,
// ServiceLabelInvalid for a service name that is not a label. It records
// the trace context each call carried.
type fakeRegistrar struct {
	lim *limiter.Limiter

	mu       sync.Mutex
	traceIDs map[trace.TraceID]int
	hosts    map[string]bool
}

func newFake(t *testing.T, burst uint32, interval time.Duration) *fakeRegistrar {
	start := time.Now()
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 3, RefillInterval: time.Second},
		Admission:          limiter.BucketConfig{Burst: burst, RefillInterval: interval},
		Now:                func() limiter.Instant { return limiter.Instant(time.Since(start)) },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeRegistrar{lim: lim, traceIDs: map[trace.TraceID]int{}, hosts: map[string]bool{}}
}

func (f *fakeRegistrar) Mint(ctx context.Context, req wire.MintRequest) (*wire.Response, error) {
	f.mu.Lock()
	f.traceIDs[trace.SpanContextFromContext(ctx).TraceID()]++
	f.mu.Unlock()
	if req.ServiceName != req.Component {
		return &wire.Response{StatusCode: http.StatusUnprocessableEntity, Class: wire.Permanent, ErrorID: wire.ServiceLabelInvalid}, nil
	}
	d := f.lim.Charge(ctx, "c", vocab.Mint, vocab.Admission)
	if !d.Allowed {
		return &wire.Response{StatusCode: http.StatusTooManyRequests, Class: wire.Retryable, ErrorID: wire.RegistrarBusy, RetryAfter: d.RetryAfterSeconds}, nil
	}
	f.mu.Lock()
	f.hosts[req.Host] = true
	f.mu.Unlock()
	return &wire.Response{StatusCode: http.StatusOK, Outcome: "first_mint"}, nil
}

func TestWaveWithinTheBurstIsNeverThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, 512, 500*time.Millisecond)
		rep, err := loadgen.Wave(context.Background(), f, loadgen.WaveOptions{Hosts: 64, ModulesPerHost: 8, Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Admitted != 512 || rep.Throttled != 0 || rep.Done != 512 || rep.Requests != 512 {
			t.Fatalf("report %+v, want 512 admitted and nothing throttled", rep.Progress)
		}
	})
}

func TestLargerWaveCompletesInTheSizedExtraTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 100 × 8 = 800 mints, burst 512, one token per 500 ms:
		// (800 − 512) × 500 / 1000 = 144 s extra.
		f := newFake(t, 512, 500*time.Millisecond)
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		var ticks int
		rep, err := loadgen.Wave(context.Background(), f, loadgen.WaveOptions{
			Hosts: 100, ModulesPerHost: 8, Concurrency: 16,
			Tracer:     tp.Tracer("test"),
			OnProgress: func(loadgen.Progress) { ticks++ },
		})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Admitted != 800 || rep.Done != 800 || rep.Throttled == 0 || rep.MaxRetryAfter != 1 {
			t.Fatalf("report %+v (max retry-after %d), want all 800 admitted after some throttles with retry_after 1", rep.Progress, rep.MaxRetryAfter)
		}
		if rep.Elapsed < 144*time.Second || rep.Elapsed > 147*time.Second {
			t.Fatalf("wave took %v, want the sized 144 s extra (+ jitter)", rep.Elapsed)
		}
		if len(f.hosts) != 100 {
			t.Fatalf("mints named %d hosts, want 100", len(f.hosts))
		}
		// One trace: the root span's, carried by every call.
		spans := rec.Ended()
		if len(spans) != 1 || spans[0].Name() != "bringup.wave" {
			t.Fatalf("spans %v, want the one bringup.wave root", spans)
		}
		root := spans[0].SpanContext().TraceID()
		if len(f.traceIDs) != 1 || f.traceIDs[root] != int(rep.Requests) || rep.TraceID != root.String() {
			t.Fatalf("calls carried traces %v, want all %d in the root's %s", f.traceIDs, rep.Requests, root)
		}
		if ticks == 0 {
			t.Fatal("no progress reported during a 144 s wave")
		}
	})
}

func TestFloodEachBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, 5, time.Hour)
		rep, err := loadgen.Flood(context.Background(), f, loadgen.FloodOptions{Bucket: vocab.Admission, Requests: 40, Concurrency: 4})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Admitted != 5 || rep.Throttled != 35 || rep.Requests != 40 || rep.ByID[wire.RegistrarBusy] != 35 {
			t.Fatalf("admission flood %+v, want 5 admitted and 35 throttled (no retries)", rep)
		}
		rep, err = loadgen.Flood(context.Background(), f, loadgen.FloodOptions{Bucket: vocab.PredecisionRefusal, Requests: 30, Concurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Refused != 30 || rep.Throttled != 0 || rep.ByID[wire.ServiceLabelInvalid] != 30 {
			t.Fatalf("refusal flood %+v, want 30 real refusals and no throttle", rep)
		}
	})
}

func TestBadOptions(t *testing.T) {
	if _, err := loadgen.Wave(context.Background(), nil, loadgen.WaveOptions{Hosts: 1, ModulesPerHost: 1000}); err == nil {
		t.Error("1000 modules per host accepted")
	}
	if _, err := loadgen.Flood(context.Background(), nil, loadgen.FloodOptions{Bucket: vocab.Admission}); err == nil {
		t.Error("a flood of 0 requests accepted")
	}
}

// A traced flood is one trace: every request carries the load.flood root
// span's context, and the report names it.
func TestFloodWithATracerIsOneTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newFake(t, 5, time.Hour)
	rep, err := loadgen.Flood(context.Background(), f, loadgen.FloodOptions{
		Bucket: vocab.Admission, Requests: 20, Concurrency: 4, Tracer: tp.Tracer("test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != "load.flood" {
		t.Fatalf("ended spans %v, want the one load.flood root", ended)
	}
	root := ended[0].SpanContext().TraceID()
	if rep.TraceID != root.String() || rep.RootSpan != "load.flood" {
		t.Errorf("report trace %q (%q), want %s (load.flood)", rep.TraceID, rep.RootSpan, root)
	}
	if len(f.traceIDs) != 1 || f.traceIDs[root] != 20 {
		t.Errorf("requests carried traces %v, want all 20 in %s", f.traceIDs, root)
	}
	// Untraced, a flood carries no trace context and reports none.
	g := newFake(t, 5, time.Hour)
	rep, err = loadgen.Flood(context.Background(), g, loadgen.FloodOptions{Bucket: vocab.Admission, Requests: 3})
	if err != nil || rep.TraceID != "" || g.traceIDs[trace.TraceID{}] != 3 {
		t.Errorf("untraced flood: err %v, trace %q, contexts %v", err, rep.TraceID, g.traceIDs)
	}
}

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

// recordingClient admits every mint and keeps the host and instance each
// one named.
type recordingClient struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (c *recordingClient) Mint(_ context.Context, req wire.MintRequest) (*wire.Response, error) {
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s/%d", req.Host, req.Instance)] = true
	c.mu.Unlock()
	return &wire.Response{StatusCode: http.StatusOK, Outcome: "first_mint"}, nil
}

// A wave of H hosts × M modules mints instances 1..M on hosts wave-h0001
// to wave-hH, each once, as the docs and the sizing examples name them.
func TestWaveNamesHostsAndInstancesFromOne(t *testing.T) {
	c := &recordingClient{seen: map[string]bool{}}
	if _, err := loadgen.Wave(context.Background(), c, loadgen.WaveOptions{Hosts: 2, ModulesPerHost: 3, Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, h := range []string{"wave-h0001", "wave-h0002"} {
		for i := 1; i <= 3; i++ {
			want[fmt.Sprintf("%s/%d", h, i)] = true
		}
	}
	if !reflect.DeepEqual(c.seen, want) {
		t.Fatalf("mints named %v, want %v", c.seen, want)
	}
}
