package telemetry_test

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
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

// The fair dispatch's gauge and counter have a series per listener from
// the start, at the server's figures.
func TestWireReportsTheRequestsInFlightAndTheWaitTimeouts(t *testing.T) {
	reader, mp := newReader(t)
	var st server.Stats
	st.InFlight[server.ListenerTLS] = 5
	st.WaitTimeouts[server.ListenerUnix] = 2
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
}

// healthVerbs is a server.Verbs the health requests below never reach.
type healthVerbs struct{}

func (healthVerbs) Mint(context.Context, registrar.MintRequest) (registrar.MintResult, error) {
	return registrar.MintResult{}, errors.New("unused")
}

func (healthVerbs) Deregister(context.Context, registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
	return registrar.DeregisterResult{}, errors.New("unused")
}

// TestTheWaitHistogramCountsExactlyTheRequestsServed: through a real
// server on a unix socket, requests of one identity over many connections
// with one seat, so most of them wait, the wait histogram's count is the
// number of requests answered, exactly, every one under listener=unix,
// and some of them waited.
func TestTheWaitHistogramCountsExactlyTheRequestsServed(t *testing.T) {
	reader, mp := newReader(t)
	obs := newObserver(t, mp, telemetry.NewWireObserver)
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
	var waited bool
	for _, dp := range hist.DataPoints {
		if v, _ := dp.Attributes.Value("listener"); v.AsString() != "unix" {
			t.Errorf("a data point of listener %q", v.AsString())
		}
		count += dp.Count
		waited = waited || dp.Sum > 0
	}
	if count != uint64(answered.Load()) || count != conns*each {
		t.Errorf("wait histogram count got %d, want %d, the requests answered", count, answered.Load())
	}
	if !waited {
		t.Error("no request waited: the test wants requests held behind the one seat")
	}
}
