package telemetry_test

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/telemetry"
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
