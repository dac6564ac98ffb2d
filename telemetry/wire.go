package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/exacthist"
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
	// registrar_requests_in_flight{listener}
	WireRequestsInFlight = "registrar.requests.in_flight"
	// registrar_request_wait_timeouts_total{listener}
	WireRequestWaitTimeouts = "registrar.request.wait_timeouts"
	// registrar_request_wait_seconds{listener} (histogram)
	WireRequestWait = "registrar.request.wait"
	// registrar_refusals_paced_total{listener}
	WireRefusalsPaced = "registrar.refusals.paced"
)

// requestWaitBuckets are in seconds: most requests are seated at once (a
// wait of 0, in the first bucket); a request that waits behind a flood's
// seated requests waits tens of microseconds to milliseconds; the wait
// timeout (registrar.wait_timeout_ms, 2 s by default) ends the range.
var requestWaitBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

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
//     "idle_evicted", "header_timeout", "body_timeout", "partial_evicted");
//   - registrar.requests.in_flight{listener} (gauge, {request}): the
//     requests holding a seat of the fair gate now (server.Stats.InFlight);
//   - registrar.request.wait_timeouts{listener} (counter, {request}): the
//     requests that waited for their turn past the wait timeout and were
//     answered RegistrarBusy (server.Stats.WaitTimeouts);
//   - registrar.refusals.paced{listener} (counter, {refusal}): the
//     limiter's refusals held for registrar.refusal_pace_ms while another
//     identity was calling (server.Stats.RefusalsPaced).
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
	inFlight := r.gauge(WireRequestsInFlight, "{request}",
		"Requests holding a seat of the fair dispatch now, by listener: from their first bytes to their answer flushed.")
	waitTimeouts := r.counter(WireRequestWaitTimeouts, "{request}",
		"Requests that waited for their turn past registrar.wait_timeout_ms and were answered RegistrarBusy without reaching a verb, by listener.")
	paced := r.counter(WireRefusalsPaced, "{refusal}",
		"Refusals the limiter decided (throttled, or refused past the refusal bucket) held for registrar.refusal_pace_ms before their answer, "+
			"because another identity was calling, by listener.")
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
			o.ObserveInt64(inFlight, s.InFlight[k], byListener[k]...)
			o.ObserveInt64(waitTimeouts, toInt64(s.WaitTimeouts[k]), byListener[k]...)
			o.ObserveInt64(paced, toInt64(s.RefusalsPaced[k]), byListener[k]...)
			for r := range server.NumReasons {
				o.ObserveInt64(rejected, toInt64(s.Rejected[k][r]), byReason[k][r]...)
			}
		}
		return nil
	})
}

// WireObserver is the server.Observer of the fair dispatch's waits:
//
//   - registrar.request.wait{listener} (histogram, s): how long each
//     request the server seated waited for its turn, 0 for one seated at
//     once. Its count is the requests served, exactly: a request answered
//     RegistrarBusy after waiting past its deadline, or whose connection
//     was closed while it waited, is not in it.
//
// The histogram is recorded for every request served, a flood's throttled
// answers included, so it is not an SDK instrument but one of hs's
// (Histograms): an observation is an atomic add, 25 to 50 times cheaper
// than the SDK's Record when two cores record at once. It is cumulative
// whatever a reader's temporality, in the scope ScopeName, and carries no
// exemplars (a wait is observed outside any span) and no minimum or
// maximum.
//
// A WireObserver is safe for concurrent use; Waited does not allocate.
type WireObserver struct {
	wait *exacthist.Histogram
}

var _ server.Observer = (*WireObserver)(nil)

// NewWireObserver returns a WireObserver whose histogram hs produces (nil
// means no reader sees it). hs must not have one already.
func NewWireObserver(hs *Histograms) (*WireObserver, error) {
	sets := make([]attribute.Set, server.NumListenerKinds)
	for k := range server.NumListenerKinds {
		sets[k] = attribute.NewSet(attribute.String(attrListener, k.String()))
	}
	h, err := hs.add(ScopeName, WireRequestWait, "s",
		"Time each request served waited for its turn under fair dispatch, by listener, from its first bytes to its seat; 0 when seated at once.",
		requestWaitBuckets, sets)
	if err != nil {
		return nil, fmt.Errorf("telemetry: NewWireObserver: %w", err)
	}
	return &WireObserver{wait: h}, nil
}

// Waited implements server.Observer.
func (o *WireObserver) Waited(kind server.ListenerKind, wait time.Duration) {
	o.wait.Observe(int(kind), wait)
}
