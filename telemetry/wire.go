package telemetry

import (
	"context"
	"errors"

	"github.com/registrar-otel/registrar-otel/server"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// OTel instrument names of the wire's connection accounting.
const (
	// registrar_wire_connections{listener}
	WireConnections = "registrar.wire.connections"
	// registrar_wire_rejected_total{listener,reason}
	WireRejected = "registrar.wire.rejected"
)

// Attribute keys of the wire series.
const (
	attrListener = "listener"
	attrReason   = "reason"
)

// RegisterWire registers the wire's instruments on mp (nil means a no-op
// provider), observed by one callback that calls stats once per
// collection:
//
//   - registrar.wire.connections{listener} (gauge, {connection}): the
//     established connections of each listener kind ("unix", "tls");
//   - registrar.wire.rejected{listener,reason} (counter, {rejection}):
//     connections and requests turned away, by the closed set of
//     server.Reason ("tls_handshake", "handshake_timeout", "handshake_cap",
//     "no_identity", "malformed", "conn_cap", "identity_conn_cap",
//     "idle_evicted", "header_timeout", "body_timeout", "partial_evicted").
//
// Every (listener, reason) series exists from the start at zero, so an
// alert on the first increase fires. stats must be safe to call from the
// collecting goroutine (server.Server.Stats is).
func RegisterWire(mp metric.MeterProvider, stats func() server.Stats) error {
	if stats == nil {
		return errors.New("telemetry: RegisterWire: nil stats func")
	}
	r := newRegistration(meterOf(mp), "RegisterWire")
	conns := r.gauge(WireConnections, "{connection}",
		"Established connections of each wire listener (unix, tls); "+
			"TLS connections still in their handshake are not counted (they have their own, smaller budget).")
	rejected := r.counter(WireRejected, "{rejection}",
		"Connections and requests the wire turned away before any verb, by listener and reason: "+
			"failed or timed-out TLS handshakes, the pre-handshake budget, requests without an identity or malformed, "+
			"newcomers refused at a cap, idle connections and those part-way through a request closed for a newcomer, header and body timeouts.")
	var byListener [server.NumListenerKinds][]metric.ObserveOption
	var byReason [server.NumListenerKinds][server.NumReasons][]metric.ObserveOption
	for k := range server.NumListenerKinds {
		l := attribute.String(attrListener, k.String())
		byListener[k] = attrs(l)
		for r := range server.NumReasons {
			byReason[k][r] = attrs(l, attribute.String(attrReason, r.String()))
		}
	}
	return r.observe(func(_ context.Context, o metric.Observer) error {
		s := stats()
		for k := range server.NumListenerKinds {
			o.ObserveInt64(conns, s.Connections[k], byListener[k]...)
			for r := range server.NumReasons {
				o.ObserveInt64(rejected, toInt64(s.Rejected[k][r]), byReason[k][r]...)
			}
		}
		return nil
	})
}
