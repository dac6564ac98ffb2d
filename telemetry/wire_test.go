package telemetry_test

import (
	"context"
	"testing"

	"github.com/registrar-otel/registrar-otel/telemetry"
	"github.com/registrar-otel/registrar-otel/wire"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestWireInstrumentsReportEveryListenerAndReason(t *testing.T) {
	reader, mp := newReader(t)
	var st wire.Stats
	st.Connections[wire.ListenerUnix] = 3
	st.Connections[wire.ListenerTLS] = 1
	st.Rejected[wire.ListenerTLS][wire.ReasonTLSHandshake] = 7
	st.Rejected[wire.ListenerUnix][wire.ReasonIdleEvicted] = 2
	if err := telemetry.RegisterWire(mp, func() wire.Stats { return st }); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	conns := map[string]int64{}
	rejected := map[[2]string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case telemetry.WireConnections:
				for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					l, _ := dp.Attributes.Value("listener")
					conns[l.AsString()] = dp.Value
				}
			case telemetry.WireRejected:
				sum := m.Data.(metricdata.Sum[int64])
				if !sum.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, dp := range sum.DataPoints {
					l, _ := dp.Attributes.Value("listener")
					r, _ := dp.Attributes.Value("reason")
					rejected[[2]string{l.AsString(), r.AsString()}] = dp.Value
				}
			}
		}
	}
	if conns["unix"] != 3 || conns["tls"] != 1 {
		t.Errorf("connections got %v, want unix 3 and tls 1", conns)
	}
	if got, want := len(rejected), int(wire.NumListenerKinds)*int(wire.NumReasons); got != want {
		t.Errorf("%d rejected series, want %d (every listener and reason from the start)", got, want)
	}
	if rejected[[2]string{"tls", "tls_handshake"}] != 7 || rejected[[2]string{"unix", "idle_evicted"}] != 2 || rejected[[2]string{"unix", "conn_cap"}] != 0 {
		t.Errorf("rejected got %v", rejected)
	}
}
