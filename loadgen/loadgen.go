// Package loadgen drives a running registrar the way operators need to
// exercise it: a bring-up wave (the legitimate burst the admission bucket is
// sized for) and a flood of one bucket (what the limiter exists to bound).
//
// A wave mints hosts × modules_per_host registrations of one
// many-per-host component under one root span, "bringup.wave", whose
// context every mint carries as traceparent, so the registrar's spans are
// its children in one trace. A throttled mint is retried after its
// retry_after plus a little jitter, as a well-behaved control plane does, so
// a wave larger than the burst completes, late by about
// (mints − burst) × refill_interval_ms / 1000 seconds.
//
// A paced wave (WaveOptions.Pace) reads the RateLimit and RateLimit-Policy
// fields of every answer and sends a mint only when they say the bucket
// holds a token for it, waiting one refill otherwise, so it meets no 429
// and finishes in about the same time (pace.go).
//
// A flood sends N requests aimed at one bucket and does not retry:
// predecision_refusal floods send a service name that is not a DNS label
// (each caller still gets ServiceLabelInvalid), admission floods remint one
// registration (throttled past the burst).
//
// Cancelling a run's ctx interrupts it the way an operator's Ctrl-C should:
// no new call starts and no throttled mint is retried, but the calls in
// flight finish and are counted, so the report agrees with what the daemon
// recorded. Report.Interrupted says so, with what completed, what was
// abandoned while waiting to retry, and what never started.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Client is the part of *wire.Client the driver uses.
type Client interface {
	Mint(ctx context.Context, req wire.MintRequest) (*wire.Response, error)
}

// Progress is a live view of a run.
type Progress struct {
	Target    uint64 // mints to complete (wave) or requests to send (flood)
	Done      uint64 // completed mints (wave: admitted, refused or failed) or answered requests (flood)
	Admitted  uint64
	Throttled uint64 // RegistrarBusy answers (each retry counts)
	Refused   uint64 // permanent refusals
	Failed    uint64 // transport errors
	// Abandoned counts the mints of an interrupted wave that were waiting
	// to retry after RegistrarBusy (each was throttled, none admitted).
	Abandoned uint64
	Elapsed   time.Duration
}

// NotStarted is the part of the target that was never sent (an
// interrupted run).
func (p Progress) NotStarted() uint64 {
	if n := p.Done + p.Abandoned; n < p.Target {
		return p.Target - n
	}
	return 0
}

// Report is a finished run.
type Report struct {
	Progress
	// Requests is every call made, retries included.
	Requests uint64
	// ByID counts refusals by identifier.
	ByID map[wire.ErrorID]uint64
	// MaxRetryAfter is the largest retry_after seen (seconds).
	MaxRetryAfter uint64
	// P50, P99 are per-call latencies.
	P50, P99 time.Duration
	// TraceID is the run's trace: the wave's, or the flood's when
	// FloodOptions.Tracer was set; empty otherwise.
	TraceID string
	// RootSpan names the span TraceID is rooted at ("bringup.wave" or
	// "load.flood").
	RootSpan string
	// FirstError is the first transport error, if any.
	FirstError error
	// Interrupted is set when the run's ctx was cancelled before it
	// finished: the counts are what completed until then.
	Interrupted bool
	// Pacing is what pacing cost a wave run with WaveOptions.Pace; nil
	// otherwise.
	Pacing *Pacing
}

// Throughput is answered calls per second.
func (r *Report) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// WaveOptions configure a bring-up wave.
type WaveOptions struct {
	Hosts          int
	ModulesPerHost int
	// Concurrency is the number of mints in flight (default 16).
	Concurrency int
	// Component is a many-per-host component (default "review"); the
	// service name is the component's name.
	Component string
	// WrapTTL is each mint's wrap_ttl in seconds (default 300).
	WrapTTL uint64
	// Tracer opens the bringup.wave root span; nil means no span.
	Tracer trace.Tracer
	// OnProgress, if set, is called about every ProgressEvery.
	OnProgress    func(Progress)
	ProgressEvery time.Duration
	// Sleep waits for d or ctx; nil means a real timer. Tests inject a fake.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns the extra wait added to a retry_after; nil means
	// uniform in [0, MaxRetryJitter): callers with several outstanding
	// requests jitter their own retries, the daemon's retry_after is
	// deterministic.
	Jitter func() time.Duration
	// Pace spaces the mints by the RateLimit fields of the answers so that
	// none is throttled (pace.go says how), waiting with Sleep; the wave
	// then reports Pacing.
	Pace bool
}

// MaxRetryJitter bounds the driver's default jitter: a throttled mint is
// retried after its retry_after plus a uniform [0, MaxRetryJitter). It is
// smaller than the 0…retry_after the operations page advises a control
// plane, because the driver measures the sizing formula's extra seconds,
// which a longer jitter would inflate; at the default 500 ms refill it
// still spreads a wave's retries over the interval a token takes.
const MaxRetryJitter = 250 * time.Millisecond

// FloodOptions configure a flood of one bucket.
type FloodOptions struct {
	Bucket      vocab.Bucket
	Requests    int
	Concurrency int
	Component   string
	Host        string // the one host every request names (default "flood-h1")
	// Instance is used for an admission flood of a many-per-host
	// component (default 1).
	Instance      uint32
	OnProgress    func(Progress)
	ProgressEvery time.Duration
	// Tracer, if set, opens one root span "load.flood" whose context every
	// request carries as traceparent, so the registrar's spans of the flood
	// (and the exemplars of its limited counters) lead to one trace.
	Tracer trace.Tracer
}

// run holds a run's counters.
type run struct {
	start     time.Time
	target    uint64
	done      atomic.Uint64
	admitted  atomic.Uint64
	throttled atomic.Uint64
	refused   atomic.Uint64
	failed    atomic.Uint64
	abandoned atomic.Uint64
	requests  atomic.Uint64
	maxRetry  atomic.Uint64

	mu       sync.Mutex
	byID     map[wire.ErrorID]uint64
	lat      []time.Duration
	firstErr error
}

func newRun(target uint64) *run {
	return &run{start: time.Now(), target: target, byID: map[wire.ErrorID]uint64{}}
}

func (r *run) progress() Progress {
	return Progress{
		Target: r.target, Done: r.done.Load(), Admitted: r.admitted.Load(), Throttled: r.throttled.Load(),
		Refused: r.refused.Load(), Failed: r.failed.Load(), Abandoned: r.abandoned.Load(), Elapsed: time.Since(r.start),
	}
}

// call makes one request and classifies its answer. It returns the
// response (nil on a transport error). The call is not cut short when ctx
// is cancelled (an interrupted run lets calls in flight finish, so what it
// counts is what the daemon did); ctx's values (the trace) are kept.
func (r *run) call(ctx context.Context, c Client, req wire.MintRequest) *wire.Response {
	t0 := time.Now()
	resp, err := c.Mint(context.WithoutCancel(ctx), req)
	d := time.Since(t0)
	r.requests.Add(1)
	r.mu.Lock()
	r.lat = append(r.lat, d)
	if err != nil && r.firstErr == nil {
		r.firstErr = err
	}
	if err == nil && !resp.OK() {
		r.byID[resp.ErrorID]++
	}
	r.mu.Unlock()
	switch {
	case err != nil:
		r.failed.Add(1)
		return nil
	case resp.OK():
		r.admitted.Add(1)
	case resp.Retryable():
		r.throttled.Add(1)
		for {
			cur := r.maxRetry.Load()
			if resp.RetryAfter <= cur || r.maxRetry.CompareAndSwap(cur, resp.RetryAfter) {
				break
			}
		}
	default:
		r.refused.Add(1)
	}
	return resp
}

func (r *run) report() Report {
	rep := Report{Progress: r.progress(), Requests: r.requests.Load(), MaxRetryAfter: r.maxRetry.Load()}
	r.mu.Lock()
	defer r.mu.Unlock()
	rep.ByID = r.byID
	rep.FirstError = r.firstErr
	if n := len(r.lat); n > 0 {
		slices.Sort(r.lat)
		rep.P50 = r.lat[(n-1)*50/100]
		rep.P99 = r.lat[(n-1)*99/100]
	}
	return rep
}

// watch calls f with the run's progress every d until stop is closed, and
// once more then with the final counts, so a live display ends at the true
// final count.
// watched starts watch on r; the function it returns stops it and gives
// the run's report, marked interrupted when ctx has ended and tied to
// span's trace under the root span's name.
func watched(r *run, f func(Progress), d time.Duration) func(ctx context.Context, span trace.Span, root string) Report {
	stop := make(chan struct{})
	var watching sync.WaitGroup
	watching.Go(func() { watch(r, f, d, stop) })
	return func(ctx context.Context, span trace.Span, root string) Report {
		close(stop)
		watching.Wait()
		rep := r.report()
		rep.Interrupted = ctx.Err() != nil
		if sc := span.SpanContext(); sc.IsValid() {
			rep.TraceID, rep.RootSpan = sc.TraceID().String(), root
		}
		return rep
	}
}

func watch(r *run, f func(Progress), d time.Duration, stop <-chan struct{}) {
	if f == nil {
		return
	}
	if d <= 0 {
		d = 250 * time.Millisecond
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			f(r.progress())
			return
		case <-t.C:
			f(r.progress())
		}
	}
}

// ErrBadOptions is wrapped by every option error.
var ErrBadOptions = errors.New("loadgen: bad options")

// Wave mints a bring-up wave and returns its report. It returns early only
// when ctx is done; transport errors are counted, and such a mint is not
// retried.
func Wave(ctx context.Context, c Client, o WaveOptions) (Report, error) {
	if o.Hosts < 1 || o.ModulesPerHost < 1 || o.ModulesPerHost > 999 {
		return Report{}, fmt.Errorf("%w: hosts must be ≥ 1 and modules per host 1..999 (instances of a many-per-host component)", ErrBadOptions)
	}
	if o.Concurrency < 1 {
		o.Concurrency = 16
	}
	if o.Component == "" {
		o.Component = "review"
	}
	if o.WrapTTL == 0 {
		o.WrapTTL = 300
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Jitter == nil {
		o.Jitter = func() time.Duration { return rand.N(MaxRetryJitter) }
	}
	tracer := o.Tracer
	if tracer == nil {
		tracer = noop.NewTracerProvider().Tracer("")
	}
	ctx, span := tracer.Start(ctx, "bringup.wave", trace.WithAttributes(
		attribute.Int("bringup.hosts", o.Hosts),
		attribute.Int("bringup.modules_per_host", o.ModulesPerHost),
		attribute.Int("bringup.mints", o.Hosts*o.ModulesPerHost),
	))
	defer span.End()

	r := newRun(uint64(o.Hosts) * uint64(o.ModulesPerHost))
	finish := watched(r, o.OnProgress, o.ProgressEvery)

	type job struct {
		host     string
		instance uint32
	}
	var pace *pacer
	if o.Pace {
		pace = newPacer(o.Sleep)
	}
	jobs := make(chan job)
	var workers sync.WaitGroup
	for range o.Concurrency {
		workers.Go(func() {
			for j := range jobs {
				if ctx.Err() != nil {
					continue // interrupted: never started
				}
				req := wire.MintRequest{
					ProtocolVersion: wire.ProtocolVersion,
					ServiceName:     o.Component,
					Host:            j.host,
					Instance:        j.instance,
					Component:       o.Component,
					Spec:            wire.Spec{Component: o.Component, ServiceName: o.Component, Reload: "systemctl reload " + o.Component},
					WrapTTL:         o.WrapTTL,
				}
				for attempt := 0; ; attempt++ {
					var tk ticket
					if pace != nil {
						var err error
						if tk, err = pace.acquire(ctx); err != nil {
							// Interrupted while paced: a retry is abandoned,
							// a first attempt never started.
							if attempt > 0 {
								r.abandoned.Add(1)
							}
							break
						}
					}
					resp := r.call(ctx, c, req)
					if pace != nil {
						pace.done(tk, resp)
					}
					if resp == nil || !resp.Retryable() {
						r.done.Add(1)
						break
					}
					if ctx.Err() != nil || o.Sleep(ctx, time.Duration(resp.RetryAfter)*time.Second+o.Jitter()) != nil {
						r.abandoned.Add(1) // interrupted while waiting to retry
						break
					}
				}
			}
		})
	}
feed:
	for h := range o.Hosts {
		for m := range o.ModulesPerHost {
			select {
			case jobs <- job{host: fmt.Sprintf("wave-h%04d", h+1), instance: uint32(m + 1)}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	workers.Wait()
	rep := finish(ctx, span, "bringup.wave")
	span.SetAttributes(attribute.Int64("bringup.throttled", int64(rep.Throttled)))
	if pace != nil {
		rep.Pacing = pace.report()
		span.SetAttributes(attribute.Float64("bringup.pacing_wait_seconds", rep.Pacing.Wait.Seconds()))
	}
	return rep, ctx.Err()
}

// Flood sends o.Requests requests aimed at one bucket, without retrying.
func Flood(ctx context.Context, c Client, o FloodOptions) (Report, error) {
	if o.Requests < 1 {
		return Report{}, fmt.Errorf("%w: requests must be ≥ 1", ErrBadOptions)
	}
	if !o.Bucket.Valid() {
		return Report{}, fmt.Errorf("%w: unknown bucket", ErrBadOptions)
	}
	if o.Concurrency < 1 {
		o.Concurrency = 16
	}
	if o.Component == "" {
		o.Component = "review"
	}
	if o.Host == "" {
		o.Host = "flood-h1"
	}
	if o.Instance == 0 {
		o.Instance = 1
	}
	req := wire.MintRequest{
		ProtocolVersion: wire.ProtocolVersion,
		ServiceName:     o.Component,
		Host:            o.Host,
		Instance:        o.Instance,
		Component:       o.Component,
		Spec:            wire.Spec{Component: o.Component, ServiceName: o.Component, Reload: "systemctl reload " + o.Component},
		WrapTTL:         300,
	}
	if o.Bucket == vocab.PredecisionRefusal {
		// Not a DNS label: refused before derivation, at no backend cost.
		req.ServiceName = "Flood!"
		req.Spec.ServiceName = req.ServiceName
	}
	tracer := o.Tracer
	if tracer == nil {
		tracer = noop.NewTracerProvider().Tracer("")
	}
	ctx, span := tracer.Start(ctx, "load.flood", trace.WithAttributes(
		attribute.String("load.bucket", o.Bucket.String()),
		attribute.Int("load.requests", o.Requests),
	))
	defer span.End()
	r := newRun(uint64(o.Requests))
	finish := watched(r, o.OnProgress, o.ProgressEvery)
	var next atomic.Int64
	var workers sync.WaitGroup
	for range o.Concurrency {
		workers.Go(func() {
			for next.Add(1) <= int64(o.Requests) && ctx.Err() == nil {
				r.call(ctx, c, req)
				r.done.Add(1)
			}
		})
	}
	workers.Wait()
	return finish(ctx, span, "load.flood"), ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
