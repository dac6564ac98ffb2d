package telemetry

import (
	"context"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// OTel instrument names of the openbao backend.
const (
	// registrar_backend_request_duration_seconds{backend,operation} (histogram)
	BackendRequestDuration = "registrar.backend.request.duration"
	// registrar_backend_request_errors_total{backend,operation,kind}
	BackendRequestErrors = "registrar.backend.request.errors"
)

const (
	attrBackend   = "backend"
	attrOperation = "operation"
	attrKind      = "kind"
)

// backendRequestBuckets are in seconds: a request on loopback takes under
// a millisecond, across a network a few, and the timeout is seconds.
var backendRequestBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// openBaoObserver is the openbao.Observer NewOpenBaoObserver returns.
type openBaoObserver struct {
	duration metric.Float64Histogram
	errors   metric.Int64Counter
	byOp     [openbao.NumOperations][]metric.RecordOption
	byOpKind [openbao.NumOperations][openbao.NumKinds][]metric.AddOption
}

var _ openbao.Observer = (*openBaoObserver)(nil)

// NewOpenBaoObserver returns the openbao.Observer recording the backend's
// metrics on mp (nil means a no-op provider), in the instrumentation scope
// openbao.ScopeName (the backend's spans' scope):
//
//   - registrar.backend.request.duration{backend,operation} (histogram, s):
//     every request to the server, failed or not;
//   - registrar.backend.request.errors{backend,operation,kind} (counter,
//     {request}): failed requests, by openbao.Kind.
//
// backend is always "openbao". The error series exist from the first
// scrape, at zero, so that rate() sees the first failure. The observer is
// safe for concurrent use.
func NewOpenBaoObserver(mp metric.MeterProvider) (openbao.Observer, error) {
	r := newRegistration(scopedMeter(mp, openbao.ScopeName), "NewOpenBaoObserver")
	o := &openBaoObserver{
		duration: r.histogram(BackendRequestDuration, "s",
			"Time of each request the openbao backend makes to its server, by operation (binding_read, binding_claim, role_write, role_id_read, secret_id_wrap, secret_id_list, secret_id_list_unwrap, secret_id_destroy, binding_activate, role_delete, binding_delete, binding_list, token_lookup, token_renew), failed or not.",
			backendRequestBuckets),
		errors: r.syncCounter(BackendRequestErrors, "{request}",
			"Failed requests of the openbao backend, by operation and kind (timeout, server_error, client_error, transport, bad_response, saturated); each fails its invocation with BackendUnavailable."),
	}
	if err := r.err(); err != nil {
		return nil, err
	}
	backend := attribute.String(attrBackend, "openbao")
	ctx := context.Background()
	for op := range openbao.Operation(openbao.NumOperations) {
		opAttr := attribute.String(attrOperation, op.String())
		o.byOp[op] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(backend, opAttr))}
		for k := range openbao.NumKinds {
			o.byOpKind[op][k] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(backend,
				opAttr, attribute.String(attrKind, openbao.Kind(k+1).String())))}
			o.errors.Add(ctx, 0, o.byOpKind[op][k]...)
		}
	}
	return o, nil
}

// Request implements openbao.Observer.
func (o *openBaoObserver) Request(ctx context.Context, op openbao.Operation, elapsed time.Duration) {
	if uint(op) < uint(openbao.NumOperations) {
		o.duration.Record(ctx, elapsed.Seconds(), o.byOp[op]...)
	}
}

// Failed implements openbao.Observer.
func (o *openBaoObserver) Failed(ctx context.Context, op openbao.Operation, kind openbao.Kind) {
	if uint(op) < uint(openbao.NumOperations) && kind >= 1 && int(kind) <= openbao.NumKinds {
		o.errors.Add(ctx, 1, o.byOpKind[op][kind-1]...)
	}
}

// OpenBaoTokenExpiry is the OTel name of the openbao token's expiry gauge:
// registrar_openbao_token_expiry_timestamp_seconds (gauge, Unix seconds).
const OpenBaoTokenExpiry = "registrar.openbao.token.expiry_timestamp"

// RegisterOpenBaoToken registers, in the scope openbao.ScopeName, the gauge
// of the openbao backend's token expiry, read from stats at each collection:
// registrar.openbao.token.expiry_timestamp (s), the Unix time at which the
// token lapses unless renewed; 0 for a token that never expires; no point
// until the backend's first successful lookup.
func RegisterOpenBaoToken(mp metric.MeterProvider, stats func() openbao.TokenStats) error {
	r := newRegistration(scopedMeter(mp, openbao.ScopeName), "RegisterOpenBaoToken")
	g := r.floatGauge(OpenBaoTokenExpiry, "s",
		"Unix time at which the openbao backend's token lapses unless renewed (0: it never expires), from its last lookup-self; the backend renews a renewable token with half its TTL left.")
	return r.observe(func(_ context.Context, o metric.Observer) error {
		s := stats()
		if !s.Known {
			return nil
		}
		v := 0.0
		if !s.Expiry.IsZero() {
			v = float64(s.Expiry.UnixMilli()) / 1000
		}
		o.ObserveFloat64(g, v)
		return nil
	})
}
