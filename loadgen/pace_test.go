package loadgen_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/loadgen"
	"github.com/registrar-otel/registrar-otel/wire"
)

// bucket is the registrar's admission bucket as the limiter keeps it (one
// token per interval, partial intervals banked, a full bucket banking
// nothing), on a clock the test gives it, and the RateLimit fields the
// registrar states for it (docs/en/wire.md#ratelimit).
type bucket struct {
	burst     uint64
	interval  time.Duration
	tokens    uint64
	accruedAt time.Duration

	admitted, throttled int
}

func newBucket(burst uint64, interval time.Duration) *bucket {
	return &bucket{burst: burst, interval: interval, tokens: burst}
}

// take charges one call at now: whether it was admitted, the tokens left
// and the time until the next token (0 when full).
func (b *bucket) take(now time.Duration) (ok bool, remaining uint64, next time.Duration) {
	if now > b.accruedAt {
		if gained := uint64((now - b.accruedAt) / b.interval); b.tokens >= b.burst || gained >= b.burst-b.tokens {
			b.tokens, b.accruedAt = b.burst, now
		} else {
			b.tokens += gained
			b.accruedAt += time.Duration(gained) * b.interval
		}
	}
	if ok = b.tokens > 0; ok {
		b.tokens--
		b.admitted++
	} else {
		b.throttled++
	}
	if b.tokens < b.burst {
		next = b.accruedAt + b.interval - now
	}
	return ok, b.tokens, next
}

// answer is the registrar's answer to a charge: 200, or 429 with
// Retry-After, each with the fields when fields is set (RateLimit-Policy
// only when policy is also set).
func (b *bucket) answer(now time.Duration, fields, policy bool) (status int, h http.Header, body string) {
	ok, remaining, next := b.take(now)
	h = http.Header{}
	if fields {
		if policy {
			h.Set(wire.HeaderRateLimitPolicy, wire.FormatRateLimitPolicy("default", b.burst, wire.RateLimitWindowSeconds(b.burst, b.interval)))
		}
		h.Set(wire.HeaderRateLimit, wire.FormatRateLimit("default", remaining, wire.DelaySeconds(next)))
	}
	if ok {
		return http.StatusOK, h, `{"protocol_version":1,"request_id":"r","registration_id":"x","outcome":"first_mint",` +
			`"material":{"role_id":"r","wrapped_secret_id":"w","expires_at":"2026-12-01T12:05:00.123Z"},"registrar_health":{}}`
	}
	retry := wire.DelaySeconds(next)
	h.Set("Retry-After", strconv.FormatUint(retry, 10))
	return http.StatusTooManyRequests, h, `{"protocol_version":1,"request_id":"r","class":"retryable","error":{"id":"RegistrarBusy","retry_after":` +
		strconv.FormatUint(retry, 10) + `},"registrar_health":{}}`
}

// bucketRegistrar serves mints over a unix socket from a bucket on a fake
// clock that only the wave's sleeps move, through the real client, which
// parses the fields. It records the most calls it had in flight.
type bucketRegistrar struct {
	fields, policy bool

	mu       sync.Mutex
	b        *bucket
	now      time.Duration
	inFlight int
	maxIn    int
}

func serveBucket(t *testing.T, b *bucket, fields, policy bool) (*bucketRegistrar, *wire.Client) {
	t.Helper()
	f := &bucketRegistrar{b: b, fields: fields, policy: policy}
	sock := filepath.Join(t.TempDir(), "r.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := wire.NewUnixClient(sock)
	t.Cleanup(c.CloseIdleConnections)
	return f, c
}

func (f *bucketRegistrar) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	f.inFlight++
	f.maxIn = max(f.maxIn, f.inFlight)
	status, h, body := f.b.answer(f.now, f.fields, f.policy)
	f.inFlight--
	f.mu.Unlock()
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// sleep is the wave's sleeper: it moves the fake clock by d at once.
func (f *bucketRegistrar) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.now += d
	f.mu.Unlock()
	return nil
}

func noJitter() time.Duration { return 0 }

// A wave paced by the RateLimit fields meets no 429, through the real
// client and a bucket on a fake clock, for buckets whose w is exact and
// whose w is rounded up, with and without RateLimit-Policy; the same wave
// unpaced meets some.
func TestPacedWaveMeetsNoThrottle(t *testing.T) {
	for _, tc := range []struct {
		burst       uint64
		interval    time.Duration
		hosts, mods int
		concurrency int
		policy      bool
	}{
		{8, 500 * time.Millisecond, 4, 8, 16, true},
		{8, 500 * time.Millisecond, 4, 8, 16, false},
		{7, 300 * time.Millisecond, 5, 7, 16, true},
		{1, time.Second, 2, 3, 4, true},
		{3, 1700 * time.Millisecond, 3, 5, 8, false},
		{64, 10 * time.Millisecond, 10, 20, 32, true},
	} {
		name := fmt.Sprintf("burst %d every %v, policy %v", tc.burst, tc.interval, tc.policy)
		target := uint64(tc.hosts * tc.mods)
		t.Run(name, func(t *testing.T) {
			f, c := serveBucket(t, newBucket(tc.burst, tc.interval), true, tc.policy)
			rep, err := loadgen.Wave(context.Background(), c, loadgen.WaveOptions{
				Hosts: tc.hosts, ModulesPerHost: tc.mods, Concurrency: tc.concurrency,
				Pace: true, Sleep: f.sleep, Jitter: noJitter,
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Throttled != 0 || f.b.throttled != 0 || rep.Admitted != target || rep.Requests != target {
				t.Fatalf("paced: %d throttled (the bucket refused %d), %d of %d admitted in %d requests; want none throttled",
					rep.Throttled, f.b.throttled, rep.Admitted, target, rep.Requests)
			}
			if p := rep.Pacing; p == nil || p.Waits == 0 || p.Wait <= 0 || p.Uninformed != 0 {
				t.Fatalf("pacing %+v, want waits and every answer informed", rep.Pacing)
			}

			g, c := serveBucket(t, newBucket(tc.burst, tc.interval), true, tc.policy)
			rep, err = loadgen.Wave(context.Background(), c, loadgen.WaveOptions{
				Hosts: tc.hosts, ModulesPerHost: tc.mods, Concurrency: tc.concurrency,
				Sleep: g.sleep, Jitter: noJitter,
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Throttled == 0 || rep.Admitted != target || rep.Pacing != nil {
				t.Fatalf("unpaced: %d throttled, %d of %d admitted, pacing %+v; want some throttled, all admitted, no pacing", rep.Throttled, rep.Admitted, target, rep.Pacing)
			}
		})
	}
}

// With w exact (burst × interval a whole number of seconds) the paced wave
// waits one interval per mint past the burst: it takes exactly the sizing
// formula's extra time, (mints − burst) × interval, no more.
func TestPacedWaveTakesTheSizedExtraTime(t *testing.T) {
	f, c := serveBucket(t, newBucket(8, 500*time.Millisecond), true, true)
	rep, err := loadgen.Wave(context.Background(), c, loadgen.WaveOptions{
		Hosts: 4, ModulesPerHost: 8, Concurrency: 16, Pace: true, Sleep: f.sleep, Jitter: noJitter,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := (32 - 8) * 500 * time.Millisecond
	if p := rep.Pacing; p.Waits != 24 || p.Wait != want || f.now != want || rep.Throttled != 0 {
		t.Fatalf("pacing %+v, clock %v, %d throttled; want 24 waits of 500ms, 12s in all", rep.Pacing, f.now, rep.Throttled)
	}
}

// Without the fields a paced wave cannot know the budget: it sends one
// mint at a time, counts the answers as uninformed, and retries a 429
// after its retry_after as an unpaced wave does.
func TestPacedWaveWithoutTheFieldsGoesOneAtATime(t *testing.T) {
	f, c := serveBucket(t, newBucket(2, time.Second), false, false)
	rep, err := loadgen.Wave(context.Background(), c, loadgen.WaveOptions{
		Hosts: 2, ModulesPerHost: 3, Concurrency: 8, Pace: true, Sleep: f.sleep, Jitter: noJitter,
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.maxIn != 1 || rep.Admitted != 6 || rep.Throttled == 0 || rep.Pacing.Uninformed != rep.Requests || rep.Pacing.Waits != 0 {
		t.Fatalf("%d in flight at most, report %+v, pacing %+v; want one at a time, all admitted after retries, every answer uninformed",
			f.maxIn, rep.Progress, rep.Pacing)
	}
}

// A malformed RateLimit field counts as no field: the call after it waits
// for its answer.
func TestPacedWaveTakesAMalformedFieldAsNone(t *testing.T) {
	var mu sync.Mutex
	inFlight, maxIn := 0, 0
	sock := filepath.Join(t.TempDir(), "r.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		inFlight++
		maxIn = max(maxIn, inFlight)
		mu.Unlock()
		w.Header()[wire.HeaderRateLimit] = []string{`"default";r=100;t=0,`} // a trailing comma
		w.Write([]byte(`{"protocol_version":1,"request_id":"r","registration_id":"x","outcome":"first_mint","registrar_health":{}}`))
		mu.Lock()
		inFlight--
		mu.Unlock()
	})}
	go srv.Serve(l)
	defer srv.Close()
	c := wire.NewUnixClient(sock)
	defer c.CloseIdleConnections()
	rep, err := loadgen.Wave(context.Background(), c, loadgen.WaveOptions{Hosts: 3, ModulesPerHost: 4, Concurrency: 8, Pace: true})
	if err != nil || rep.Admitted != 12 || rep.Pacing.Uninformed != 12 || maxIn != 1 {
		t.Fatalf("err %v, report %+v, pacing %+v, %d in flight at most; want 12 admitted one at a time, all uninformed", err, rep.Progress, rep.Pacing, maxIn)
	}
}

// scheduledClient answers mints from a bucket on the synctest clock, in
// an order the test's scheduler draws: it charges a random waiting call
// and releases a random charged answer, so that the server's charge order
// and the order the answers reach the driver are both shuffled.
type scheduledClient struct {
	start  time.Time
	b      *bucket
	policy bool // send RateLimit-Policy; else the driver has only t

	mu      sync.Mutex
	waiting []chan *wire.Response // calls not yet charged
	charged []pendingAnswer       // answers not yet released
	wake    chan struct{}
}

type pendingAnswer struct {
	to   chan *wire.Response
	resp *wire.Response
}

func (s *scheduledClient) Mint(context.Context, wire.MintRequest) (*wire.Response, error) {
	ch := make(chan *wire.Response)
	s.mu.Lock()
	s.waiting = append(s.waiting, ch)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return <-ch, nil
}

// step does one scheduling action, if any is possible.
func (s *scheduledClient) step(rng *rand.Rand) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.waiting) > 0 && (len(s.charged) == 0 || rng.IntN(2) == 0):
		i := rng.IntN(len(s.waiting))
		ch := s.waiting[i]
		s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
		ok, remaining, next := s.b.take(time.Since(s.start))
		resp := &wire.Response{StatusCode: 200, Outcome: "first_mint",
			RateLimit: &wire.RateLimit{Limits: []wire.ServiceLimit{{Name: "p", Remaining: remaining, EffectiveWindow: wire.DelaySeconds(next), HasEffectiveWindow: true}}},
		}
		if s.policy {
			resp.RateLimitPolicy = &wire.RateLimitPolicy{Policies: []wire.QuotaPolicy{{Name: "p", Quota: s.b.burst, Window: wire.RateLimitWindowSeconds(s.b.burst, s.b.interval)}}}
		}
		if !ok {
			resp.StatusCode, resp.Outcome, resp.Class, resp.ErrorID, resp.RetryAfter = 429, "", wire.Retryable, wire.RegistrarBusy, wire.DelaySeconds(next)
		}
		s.charged = append(s.charged, pendingAnswer{ch, resp})
	case len(s.charged) > 0:
		i := rng.IntN(len(s.charged))
		a := s.charged[i]
		s.charged = append(s.charged[:i], s.charged[i+1:]...)
		a.to <- a.resp // the worker is parked on it: this does not block for long
	default:
		return false
	}
	return true
}

// However the server orders its charges and however the answers come
// back, a paced wave never sends a call the bucket has no token for: the
// pacer's count holds for every interleaving the scheduler draws, with the
// policy's w/q to wait by or only t.
func TestPacingHoldsForAnyOrderOfChargesAndAnswers(t *testing.T) {
	waited := 0 // waves that met an empty bucket and waited for it
	for seed := range uint64(200) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 35))
			burst := uint64(1 + rng.IntN(12))
			interval := time.Duration(1+rng.IntN(20)) * 100 * time.Millisecond
			s := &scheduledClient{start: time.Now(), b: newBucket(burst, interval), policy: seed%2 == 0, wake: make(chan struct{}, 1)}
			hosts, mods, conc := 1+rng.IntN(4), 1+rng.IntN(8), 1+rng.IntN(16)
			done := make(chan loadgen.Report)
			go func() {
				rep, _ := loadgen.Wave(context.Background(), s, loadgen.WaveOptions{
					Hosts: hosts, ModulesPerHost: mods, Concurrency: conc, Pace: true, Jitter: noJitter,
				})
				done <- rep
			}()
			for {
				synctest.Wait()
				if rng.IntN(3) == 0 {
					// Let the server take its time: tokens arrive between
					// charges, and answers age on their way back.
					time.Sleep(time.Duration(rng.Int64N(int64(interval))))
				}
				if s.step(rng) {
					continue
				}
				select {
				case rep := <-done:
					if s.b.throttled != 0 || rep.Throttled != 0 || rep.Admitted != uint64(hosts*mods) {
						t.Fatalf("seed %d, burst %d every %v (policy %v), %d×%d at %d: bucket refused %d, report %+v",
							seed, burst, interval, s.policy, hosts, mods, conc, s.b.throttled, rep.Progress)
					}
					if rep.Pacing.Waits > 0 {
						waited++
					}
					return
				case <-s.wake: // the pacer's wait ended and a call came
				}
			}
		})
	}
	if waited < 100 {
		t.Errorf("only %d of 200 waves waited for the bucket: the draw no longer tests the refill wait", waited)
	}
}

// Interrupted while the pacer waits for the bucket, the wave stops: what
// was admitted is reported, the rest never started, nothing abandoned.
func TestInterruptedPacedWave(t *testing.T) {
	f, c := serveBucket(t, newBucket(4, time.Hour), true, true)
	ctx, cancel := context.WithCancel(context.Background())
	var slept []time.Duration
	rep, err := loadgen.Wave(ctx, c, loadgen.WaveOptions{
		Hosts: 2, ModulesPerHost: 5, Concurrency: 3, Pace: true, Jitter: noJitter,
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept = append(slept, d)
			cancel()
			return ctx.Err()
		},
	})
	if !errors.Is(err, context.Canceled) || !rep.Interrupted {
		t.Fatalf("err %v, interrupted %v", err, rep.Interrupted)
	}
	if rep.Admitted != 4 || rep.Throttled != 0 || rep.Abandoned != 0 || rep.NotStarted() != 6 || f.b.throttled != 0 {
		t.Fatalf("report %+v (not started %d), want 4 admitted and 6 never started", rep.Progress, rep.NotStarted())
	}
	// The wait asked was one refill of the policy: w/q = ⌈4 h⌉ / 4 = 1 h.
	if len(slept) != 1 || slept[0] != time.Hour || rep.Pacing.Waits != 0 || rep.Pacing.Wait != 0 {
		t.Fatalf("slept %v, pacing %+v; want one wait of 1h asked, none completed", slept, rep.Pacing)
	}
}
