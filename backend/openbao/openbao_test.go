package openbao_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// hangingServer is a loopback server that holds every request until
// release is closed (or the client gives up), then answers 503. It counts
// the requests it holds at once.
type hangingServer struct {
	*httptest.Server
	release           chan struct{}
	inFlight, maxSeen atomic.Int64
	total             atomic.Int64
	arrived           chan struct{} // one send per request that arrived
}

func newHangingServer(t *testing.T) *hangingServer {
	t.Helper()
	h := &hangingServer{release: make(chan struct{}), arrived: make(chan struct{}, 4096)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		for {
			m := h.maxSeen.Load()
			if n <= m || h.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		h.total.Add(1)
		h.arrived <- struct{}{}
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"errors":["Vault is sealed"]}`)
	}))
	t.Cleanup(func() {
		h.unblock()
		h.Close()
	})
	return h
}

var unblockMu sync.Mutex

func (h *hangingServer) unblock() {
	unblockMu.Lock()
	defer unblockMu.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// failures counts the observer's Failed calls by operation and kind.
type failures struct {
	mu sync.Mutex
	n  map[[2]string]int
}

func (f *failures) Request(context.Context, openbao.Operation, time.Duration) {}
func (f *failures) Failed(_ context.Context, op openbao.Operation, k openbao.Kind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[[2]string]int{}
	}
	f.n[[2]string{op.String(), k.String()}]++
}

func (f *failures) get(op, kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[[2]string{op, kind}]
}

// With the server hanging, at most MaxInFlight calls reach it; every other
// call fails within the slot wait as KindSaturated, before any request and
// without a partial change, and is counted. Releasing the server lets the
// held calls finish with the server's answer.
func TestBulkheadBoundsTheCallsReachingAHangingServer(t *testing.T) {
	const (
		slots = 4
		calls = 64
	)
	srv := newHangingServer(t)
	obs := &failures{}
	b, err := openbao.New(openbao.Options{
		Address: srv.URL, Token: "hvs.test-token", RequestTimeout: time.Minute,
		MaxInFlight: slots, SlotWait: 20 * time.Millisecond, Observer: obs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			_, _, err := b.Mint(ctx, mintOp(fmt.Sprintf("h%d-review-001", i), fmt.Sprintf("h%d", i), "review"))
			errs <- err
		}()
	}
	// calls-slots answers come back while the server still holds the rest.
	var saturated int
	for saturated < calls-slots {
		select {
		case err := <-errs:
			re, ok := errors.AsType[*openbao.RequestError](err)
			if !ok || re.Kind != openbao.KindSaturated || re.Op != openbao.OpBindingRead {
				t.Fatalf("a call answered while the server hangs with %v, want a saturated binding_read", err)
			}
			if _, partial := errors.AsType[*registrar.PartialError](err); partial {
				t.Fatalf("a saturated call is partial: %v", err)
			}
			saturated++
		case <-ctx.Done():
			t.Fatalf("only %d of %d calls were refused a slot", saturated, calls-slots)
		}
	}
	for range slots {
		<-srv.arrived
	}
	if got := srv.maxSeen.Load(); got > slots {
		t.Errorf("the server held %d requests at once, want at most %d (openbao.max_in_flight)", got, slots)
	}
	if got := obs.get("binding_read", "saturated"); got != calls-slots {
		t.Errorf("errors{binding_read,saturated} = %d, want %d", got, calls-slots)
	}
	srv.unblock()
	for range slots {
		err := <-errs
		if re, ok := errors.AsType[*openbao.RequestError](err); !ok || re.Kind != openbao.KindServer {
			t.Errorf("a held call answered %v, want the server's 503", err)
		}
	}
	if got := srv.total.Load(); got != slots {
		t.Errorf("the server saw %d requests, want %d: a saturated call made a request", got, slots)
	}
	// The slots are free again: the next call reaches the server.
	if _, _, err := b.Mint(ctx, mintOp("h0-review-002", "h0", "review")); err == nil {
		t.Error("a mint against the sealed server succeeded")
	} else if re, ok := errors.AsType[*openbao.RequestError](err); !ok || re.Kind != openbao.KindServer {
		t.Errorf("after the release a mint answered %v, want the server's 503 (slots leaked?)", err)
	}
}

// Through the verbs a saturated call is a BackendUnavailable refusal whose
// outcome is recorded refused, backend_unavailable, without "partial:".
func TestASaturatedMintIsARecordedBackendUnavailableRefusal(t *testing.T) {
	srv := newHangingServer(t)
	b, err := openbao.New(openbao.Options{
		Address: srv.URL, Token: "hvs.test-token", RequestTimeout: time.Minute,
		MaxInFlight: 1, SlotWait: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	h := newVerbs(t, b, 64, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := make(chan error, 1)
	go func() {
		_, err := h.v.Mint(ctx, mintRequest("h1", 1))
		held <- err
	}()
	<-srv.arrived // the one slot is taken and the server holds it

	_, err = h.v.Mint(ctx, mintRequest("h2", 1))
	ue, ok := errors.AsType[*registrar.UnavailableError](err)
	if !ok || ue.Reason != registrar.BackendUnavailable {
		t.Fatalf("a mint with every slot busy answered %v, want RegistrarUnavailable BackendUnavailable", err)
	}
	var outcome *audit.Outcome
	for _, r := range h.log.Records() {
		if r.Phase == audit.PhaseOutcome && r.RequestID == ue.RequestID {
			outcome = r.Outcome
		}
	}
	switch {
	case outcome == nil:
		t.Fatalf("no outcome recorded for request %s", ue.RequestID)
	case outcome.Class != vocab.ClassRefused || outcome.Reason != vocab.ReasonBackendUnavailable:
		t.Errorf("outcome %+v, want refused backend_unavailable", outcome)
	case len(outcome.Detail) >= 8 && outcome.Detail[:8] == "partial:":
		t.Errorf("a saturated mint is recorded partial: %q", outcome.Detail)
	}
	srv.unblock()
	<-held
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, o := range []openbao.Options{
		{Token: "t"},
		{Address: "https://x:8200"},
		{Address: "ftp://x", Token: "t"},
		{Address: "::", Token: "t"},
	} {
		if _, err := openbao.New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}
