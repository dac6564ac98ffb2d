package daemon

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/config"
	"github.com/registrar-otel/registrar-otel/wire"
)

// rssBytes is the process's resident set size (VmRSS), 0 if unknown.
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestBulkheadLoadAgainstAHangingServer is the bounded load test of the
// bulkhead (openbao.max_in_flight, docs/en/openbao.md#bulkhead): 500
// concurrent admitted mints over the socket against a loopback OpenBao
// that accepts every request and never answers. At most max_in_flight (16)
// reach the server; every other mint is answered BackendUnavailable while
// the server still hangs, /v1/health and throttled callers are answered
// meanwhile, and the figures (latencies, RSS) are printed. Bounded by
// request_timeout_ms: the held mints time out at 30 s if the test fails
// before releasing them (long enough that a loaded machine's slow audit
// appends never let them time out before the measurements). The RSS bound (128 MiB of growth) is checked
// without the race detector, which multiplies memory use.
func TestBulkheadLoadAgainstAHangingServer(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const mints = 500
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	var inFlight, maxSeen, total atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/auth/token/lookup-self" {
			// The daemon's token lookup at start: a token that never
			// expires. Only the mints' requests hang.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"data":{"ttl":0,"creation_ttl":0,"renewable":false}}`)
			return
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
		}
		total.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"errors":["Vault is sealed"]}`)
	}))
	t.Cleanup(func() { unblock(); srv.Close() })

	cfg := testConfig(t)
	cfg.OpenBao.RequestTimeoutMS = 30_000
	cfg.Registrar.RateLimitAdmissionBurst = mints
	cfg.Registrar.UnixMaxConns = 1024
	cfg.Registrar.MaxConnsPerIdentity = 1024
	r := startOnOpenBao(t, cfg, srv.URL, "hvs.load-test-token")
	slots := int64(cfg.OpenBao.MaxInFlight)
	if slots == 0 || slots >= int64(config.Default().Registrar.UnixMaxConns) {
		t.Fatalf("openbao.max_in_flight default %d is not below the listener cap", slots)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rss0 := rssBytes()
	type answer struct {
		resp    *wire.Response
		err     error
		elapsed time.Duration
	}
	answers := make(chan answer, mints)
	client := wire.NewUnixClient(cfg.Registrar.SocketPath)
	for i := range mints {
		go func() {
			req := mint("review")
			req.Host = fmt.Sprintf("load-%03d", i)
			start := time.Now()
			resp, err := client.Mint(ctx, req)
			answers <- answer{resp, err, time.Since(start)}
		}()
	}
	var early []time.Duration
	var rssPeak int64
	for len(early) < mints-int(slots) {
		a := <-answers
		if a.err != nil || a.resp.ErrorID != wire.RegistrarUnavailable || a.resp.Reason != "BackendUnavailable" {
			t.Fatalf("a mint answered %+v, %v while the server hangs; want RegistrarUnavailable BackendUnavailable", a.resp, a.err)
		}
		early = append(early, a.elapsed)
		rssPeak = max(rssPeak, rssBytes())
	}
	// The server still holds the admitted mints that got a slot.
	if got := inFlight.Load(); got > slots {
		t.Errorf("%d requests in flight at the server, want at most %d", got, slots)
	}

	// Health and throttled callers, meanwhile.
	var health, busy []time.Duration
	for range 20 {
		start := time.Now()
		resp, err := r.client.Health(ctx)
		health = append(health, time.Since(start))
		if err != nil || !resp.OK() {
			t.Fatalf("/v1/health while the server hangs: %+v, %v", resp, err)
		}
	}
	for i := range 20 {
		req := mint("review")
		req.Host = fmt.Sprintf("busy-%02d", i)
		start := time.Now()
		resp, err := r.client.Mint(ctx, req)
		busy = append(busy, time.Since(start))
		if err != nil || resp.ErrorID != wire.RegistrarBusy {
			t.Fatalf("a mint past the admission burst: %+v, %v; want RegistrarBusy", resp, err)
		}
	}
	stillHeld := inFlight.Load()
	rssPeak = max(rssPeak, rssBytes())
	unblock()
	var held []time.Duration
	for range slots {
		a := <-answers
		if a.err != nil || a.resp.ErrorID != wire.RegistrarUnavailable {
			t.Errorf("a held mint answered %+v, %v; want RegistrarUnavailable", a.resp, a.err)
		}
		held = append(held, a.elapsed)
	}
	if stillHeld == 0 {
		t.Error("the server held no request while health and throttled callers were measured: nothing was measured under load")
	}
	if got := maxSeen.Load(); got > slots {
		t.Errorf("the server saw %d requests at once, want at most %d", got, slots)
	}
	if got := total.Load(); got != slots {
		t.Errorf("the server saw %d requests in all, want %d (one binding_read per admitted slot)", got, slots)
	}
	t.Logf("bulkhead load: %d concurrent mints, max_in_flight %d, server hanging", mints, slots)
	t.Logf("  refused a slot: %d mints, p50 %v, p99 %v, max %v", len(early), percentile(early, 0.5), percentile(early, 0.99), percentile(early, 1))
	t.Logf("  /v1/health meanwhile: p50 %v, max %v (target < 100ms)", percentile(health, 0.5), percentile(health, 1))
	t.Logf("  throttled (RegistrarBusy) meanwhile: p50 %v, max %v", percentile(busy, 0.5), percentile(busy, 1))
	t.Logf("  held by the server until released: %d mints, max %v", len(held), percentile(held, 1))
	t.Logf("  test process RSS: %.1f MiB before, %.1f MiB peak (+%.1f MiB)", float64(rss0)/(1<<20), float64(rssPeak)/(1<<20), float64(rssPeak-rss0)/(1<<20))
	if rss0 > 0 && !raceEnabled && rssPeak-rss0 > 128<<20 {
		t.Errorf("RSS grew by %d MiB under the load, more than the documented 128 MiB", (rssPeak-rss0)>>20)
	}
}
