package telemetry_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/internal/testing/pipetest"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestWireInstrumentsReportEveryListenerAndReason(t *testing.T) {
	reader, mp := newReader(t)
	var st server.Stats
	st.Connections[server.ListenerUnix] = 3
	st.Connections[server.ListenerTLS] = 1
	st.Rejected[server.ListenerTLS][server.ReasonTLSHandshake] = 7
	st.Rejected[server.ListenerUnix][server.ReasonIdleEvicted] = 2
	if err := telemetry.RegisterWire(mp, func() server.Stats { return st }); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	if _, ok := got[telemetry.WireConnections].Data.(metricdata.Gauge[int64]); !ok {
		t.Errorf("%s is not an int64 gauge", telemetry.WireConnections)
	}
	if sum, ok := got[telemetry.WireRejected].Data.(metricdata.Sum[int64]); !ok || !sum.IsMonotonic {
		t.Errorf("%s is not monotonic", telemetry.WireRejected)
	}
	conns := points(t, got[telemetry.WireConnections])
	rejected := points(t, got[telemetry.WireRejected])
	if conns["listener=unix"] != 3 || conns["listener=tls"] != 1 {
		t.Errorf("connections got %v, want unix 3 and tls 1", conns)
	}
	if got, want := len(rejected), int(server.NumListenerKinds)*int(server.NumReasons); got != want {
		t.Errorf("%d rejected series, want %d (every listener and reason from the start)", got, want)
	}
	if rejected["listener=tls,reason=tls_handshake"] != 7 || rejected["listener=unix,reason=idle_evicted"] != 2 || rejected["listener=unix,reason=conn_cap"] != 0 {
		t.Errorf("rejected got %v", rejected)
	}
}

// The reasons of issue 41 are series of their own from the start:
// body_timeout and partial_evicted, on each listener.
func TestWireRejectionsNameTheBodyTimeoutAndPartialEvictions(t *testing.T) {
	reader, mp := newReader(t)
	var st server.Stats
	st.Rejected[server.ListenerUnix][server.ReasonBodyTimeout] = 5
	st.Rejected[server.ListenerTLS][server.ReasonPartialEvicted] = 3
	if err := telemetry.RegisterWire(mp, func() server.Stats { return st }); err != nil {
		t.Fatal(err)
	}
	rejected := points(t, collectAll(t, reader)[telemetry.WireRejected])
	for series, want := range map[string]int64{
		"listener=unix,reason=body_timeout": 5, "listener=tls,reason=partial_evicted": 3,
		"listener=tls,reason=body_timeout": 0, "listener=unix,reason=partial_evicted": 0,
	} {
		if got, ok := rejected[series]; !ok || got != want {
			t.Errorf("%s got %d (present %v), want %d", series, got, ok, want)
		}
	}
}

// The fair dispatch's gauge and counters have a series per listener from
// the start, at the server's figures.
func TestWireReportsTheRequestsInFlightAndTheWaitTimeouts(t *testing.T) {
	reader, mp := newReader(t)
	var st server.Stats
	st.InFlight[server.ListenerTLS] = 5
	st.WaitTimeouts[server.ListenerUnix] = 2
	st.RefusalsPaced[server.ListenerTLS] = 7
	if err := telemetry.RegisterWire(mp, func() server.Stats { return st }); err != nil {
		t.Fatal(err)
	}
	got := collectAll(t, reader)
	if _, ok := got[telemetry.WireRequestsInFlight].Data.(metricdata.Gauge[int64]); !ok {
		t.Errorf("%s is not an int64 gauge", telemetry.WireRequestsInFlight)
	}
	if sum, ok := got[telemetry.WireRequestWaitTimeouts].Data.(metricdata.Sum[int64]); !ok || !sum.IsMonotonic {
		t.Errorf("%s is not monotonic", telemetry.WireRequestWaitTimeouts)
	}
	inFlight, timeouts := points(t, got[telemetry.WireRequestsInFlight]), points(t, got[telemetry.WireRequestWaitTimeouts])
	if want := map[string]int64{"listener=unix": 0, "listener=tls": 5}; !maps.Equal(inFlight, want) {
		t.Errorf("in flight got %v, want %v", inFlight, want)
	}
	if want := map[string]int64{"listener=unix": 2, "listener=tls": 0}; !maps.Equal(timeouts, want) {
		t.Errorf("wait timeouts got %v, want %v", timeouts, want)
	}
	if sum, ok := got[telemetry.WireRefusalsPaced].Data.(metricdata.Sum[int64]); !ok || !sum.IsMonotonic {
		t.Errorf("%s is not monotonic", telemetry.WireRefusalsPaced)
	}
	if paced, want := points(t, got[telemetry.WireRefusalsPaced]), map[string]int64{"listener=unix": 0, "listener=tls": 7}; !maps.Equal(paced, want) {
		t.Errorf("refusals paced got %v, want %v", paced, want)
	}
}

// healthVerbs is a server.Verbs the health requests below never reach.
type healthVerbs struct{}

func (healthVerbs) Mint(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
	return registrar.MintResult{}, errors.New("unused")
}

func (healthVerbs) Deregister(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	return registrar.DeregisterResult{}, errors.New("unused")
}

// newWireReader returns a wire observer and a ManualReader built with its
// Histograms as a producer, as Telemetry's readers are.
func newWireReader(t *testing.T) (*sdkmetric.ManualReader, *telemetry.WireObserver) {
	t.Helper()
	reader, _, hs := newHistReader(t)
	obs, err := telemetry.NewWireObserver(hs)
	if err != nil {
		t.Fatal(err)
	}
	return reader, obs
}

// TestTheWaitHistogramCountsExactlyTheRequestsServed: a real server with
// one seat, in a synctest bubble over in-memory pipes (they carry no
// identity, so every connection is the same caller, on a listener of the
// unix kind). The first health request holds the seat while its answer is
// unread (a pipe's write returns only once it is read); the others are
// read and wait for their turn, durably blocked, before the fake clock
// moves on; each answer read then seats the next waiter a known step
// later. The wait histogram counts exactly the requests answered, every
// one under listener=unix, and sums exactly the waits the clock made. No
// real time passes and nothing depends on scheduling: the requests wait
// because the test holds the seat until they do.
func TestTheWaitHistogramCountsExactlyTheRequestsServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader, obs := newWireReader(t)
		h, err := health.NewHolder()
		if err != nil {
			t.Fatal(err)
		}
		s, err := server.New(server.Options{Verbs: healthVerbs{}, Health: h, Observer: obs, MaxInFlightPerIdentity: 1, WaitTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		l := pipetest.NewListener(0)
		served := make(chan error, 1)
		go func() { served <- s.Serve(l) }()

		// A power of two of a second, so that the sums below are exact in
		// a float64.
		const conns, step = 4, 125 * time.Millisecond
		clients := make([]net.Conn, conns)
		readers := make([]*bufio.Reader, conns)
		for i := range clients {
			clients[i] = l.Dial()
			readers[i] = bufio.NewReader(clients[i])
			sendHealth(t, clients[i])
			// The first request is seated and blocked writing its answer;
			// each later one has been read and waits for its turn.
			synctest.Wait()
		}
		if got := s.Stats().InFlight[server.ListenerUnix]; got != 1 {
			t.Fatalf("in flight got %d, want 1: the one seat held, the rest waiting", got)
		}
		var want time.Duration
		for i := range clients {
			// Request i is seated, the rest wait: every goroutine is
			// blocked, so the fake clock moves on by step; reading request
			// i's answer gives its seat to request i+1, seated after i+1
			// steps. Request 0 was seated at once.
			want += time.Duration(i) * step
			time.Sleep(step)
			readHealth(t, readers[i])
		}
		synctest.Wait()

		hist, ok := collectAll(t, reader)[telemetry.WireRequestWait].Data.(metricdata.Histogram[float64])
		if !ok {
			t.Fatalf("%s is not a float64 histogram", telemetry.WireRequestWait)
		}
		var count uint64
		var sum float64
		for _, dp := range hist.DataPoints {
			if v, _ := dp.Attributes.Value("listener"); v.AsString() != "unix" {
				t.Errorf("a data point of listener %q", v.AsString())
			}
			count += dp.Count
			sum += dp.Sum
		}
		if count != conns {
			t.Errorf("wait histogram count got %d, want %d, the requests answered", count, conns)
		}
		if sum != want.Seconds() {
			t.Errorf("wait histogram sum got %v s, want %v s: one request seated at once, then waits of 1 to %d steps of %v", sum, want.Seconds(), conns-1, step)
		}

		for _, c := range clients {
			_ = c.Close()
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
}

// TestTheWaitHistogramCountsEveryRequestOverARealSocket: through a real
// server on a unix socket, requests of one identity over many connections
// with one seat, the wait histogram's count is the number of requests
// answered, exactly, every one under listener=unix. How many of them
// waited depends on the scheduler, so it is not asserted here
// (TestTheWaitHistogramCountsExactlyTheRequestsServed makes them wait).
func TestTheWaitHistogramCountsEveryRequestOverARealSocket(t *testing.T) {
	reader, obs := newWireReader(t)
	h, err := health.NewHolder()
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Options{Verbs: healthVerbs{}, Health: h, Observer: obs, MaxInFlightPerIdentity: 1, WaitTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run", "r.sock")
	l, err := server.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	})
	const conns, each = 8, 25
	var wg sync.WaitGroup
	var answered atomic.Int64
	for range conns {
		wg.Go(func() {
			c := wire.NewUnixClient(path)
			defer c.CloseIdleConnections()
			for range each {
				if _, err := c.Health(context.Background()); err != nil {
					t.Errorf("health: %v", err)
					return
				}
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	hist, ok := collectAll(t, reader)[telemetry.WireRequestWait].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is not a float64 histogram", telemetry.WireRequestWait)
	}
	var count uint64
	for _, dp := range hist.DataPoints {
		if v, _ := dp.Attributes.Value("listener"); v.AsString() != "unix" {
			t.Errorf("a data point of listener %q", v.AsString())
		}
		count += dp.Count
	}
	if count != uint64(answered.Load()) || count != conns*each {
		t.Errorf("wait histogram count got %d, want %d, the requests answered", count, answered.Load())
	}
}

// sendHealth writes a health request on c from a goroutine of its own: a
// pipe's write returns only once the server has read it all, and a request
// that waits for its turn has been.
func sendHealth(t *testing.T, c net.Conn) {
	t.Helper()
	go func() {
		if _, err := io.WriteString(c, "GET "+wire.PathHealth+" HTTP/1.1\r\nHost: registrar\r\n\r\n"); err != nil {
			t.Errorf("write health request: %v", err)
		}
	}()
}

// readHealth reads one answer from br and wants it 200.
func readHealth(t *testing.T, br *bufio.Reader) {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read health answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("health got %d, want 200", res.StatusCode)
	}
}
