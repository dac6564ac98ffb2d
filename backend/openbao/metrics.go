package openbao

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the backend's spans and
// metrics.
const ScopeName = "github.com/registrar-otel/registrar-otel/backend/openbao"

// Operation is one kind of request to the server: the operation label of
// the metrics and the suffix of the span name.
type Operation uint8

// The operations, in the order a mint and a deregister make them.
const (
	OpBindingRead Operation = iota
	OpBindingClaim
	OpPolicyWrite
	OpRoleWrite
	OpRoleIDRead
	OpSecretIDWrap
	OpBindingActivate
	OpRoleDelete
	OpPolicyDelete
	OpBindingDelete

	numOps = 10
)

var opNames = [numOps]string{
	OpBindingRead:     "binding_read",
	OpBindingClaim:    "binding_claim",
	OpPolicyWrite:     "policy_write",
	OpRoleWrite:       "role_write",
	OpRoleIDRead:      "role_id_read",
	OpSecretIDWrap:    "secret_id_wrap",
	OpBindingActivate: "binding_activate",
	OpRoleDelete:      "role_delete",
	OpPolicyDelete:    "policy_delete",
	OpBindingDelete:   "binding_delete",
}

var opMethods = [numOps]string{
	OpBindingRead:     "GET",
	OpBindingClaim:    "PUT",
	OpPolicyWrite:     "PUT",
	OpRoleWrite:       "PUT",
	OpRoleIDRead:      "GET",
	OpSecretIDWrap:    "PUT",
	OpBindingActivate: "PUT",
	OpRoleDelete:      "DELETE",
	OpPolicyDelete:    "DELETE",
	OpBindingDelete:   "DELETE",
}

// String returns the label value, e.g. "binding_claim".
func (o Operation) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "Operation(" + strconv.Itoa(int(o)) + ")"
}

// Span attribute keys.
const (
	AttrOperation = attribute.Key("openbao.operation")
	AttrErrorKind = attribute.Key("openbao.error_kind")
)

// durationBuckets are in seconds: a request on loopback takes under a
// millisecond, across a network a few, and the timeout is seconds.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// instruments holds the backend's tracer and metric instruments, with the
// attribute sets precomputed.
type instruments struct {
	tracer   trace.Tracer
	duration metric.Float64Histogram
	errors   metric.Int64Counter
	byOp     [numOps]metric.MeasurementOption
	byOpKind [numOps][numKinds]metric.AddOption
	spanName [numOps]string
	spanAttr [numOps][]attribute.KeyValue
}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider, address *url.URL) (*instruments, error) {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(ScopeName)
	in := &instruments{tracer: tp.Tracer(ScopeName)}
	var errs [2]error
	in.duration, errs[0] = m.Float64Histogram("registrar.backend.request.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time of each request the openbao backend makes to its server, by operation (binding_read, binding_claim, policy_write, role_write, role_id_read, secret_id_wrap, binding_activate, role_delete, policy_delete, binding_delete), failed or not."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.errors, errs[1] = m.Int64Counter("registrar.backend.request.errors",
		metric.WithUnit("{request}"),
		metric.WithDescription("Failed requests of the openbao backend, by operation and kind (timeout, server_error, client_error, transport, bad_response); each fails its invocation with BackendUnavailable."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	host, portText, _ := net.SplitHostPort(address.Host)
	if host == "" {
		host, portText = address.Hostname(), map[string]string{"https": "443", "http": "80"}[address.Scheme]
	}
	port, _ := strconv.Atoi(portText)
	backend := attribute.String("backend", "openbao")
	ctx := context.Background()
	for o := range numOps {
		op := Operation(o)
		in.byOp[o] = metric.WithAttributeSet(attribute.NewSet(backend, attribute.String("operation", op.String())))
		for k := range numKinds {
			in.byOpKind[o][k] = metric.WithAttributeSet(attribute.NewSet(backend,
				attribute.String("operation", op.String()), attribute.String("kind", Kind(k+1).String())))
		}
		in.spanName[o] = "openbao." + op.String()
		in.spanAttr[o] = []attribute.KeyValue{
			AttrOperation.String(op.String()),
			attribute.String("http.request.method", opMethods[o]),
			attribute.String("server.address", host),
			attribute.Int("server.port", port),
		}
		// The error series exist from the first scrape, at zero, so that
		// rate() sees the first failure.
		for k := range numKinds {
			in.errors.Add(ctx, 0, in.byOpKind[o][k])
		}
	}
	return in, nil
}

// request runs one request as a client span, a child of the span in ctx,
// bounded by timeout, and measures it. fn's error is classified and
// returned as a *RequestError.
func (in *instruments) request(ctx context.Context, op Operation, timeout time.Duration, fn func(context.Context) error) error {
	ctx, span := in.tracer.Start(ctx, in.spanName[op], trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(in.spanAttr[op]...))
	defer span.End()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := fn(rctx)
	in.duration.Record(ctx, time.Since(start).Seconds(), in.byOp[op])
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*RequestError](err); ok {
		return err // already classified (a bad response)
	}
	kind, status := classify(rctx, err)
	re := &RequestError{Op: op, Kind: kind, Status: status, Err: err}
	in.fail(ctx, span, re)
	return re
}

func (in *instruments) fail(ctx context.Context, span trace.Span, re *RequestError) {
	in.errors.Add(ctx, 1, in.byOpKind[re.Op][re.Kind-1])
	if span.IsRecording() {
		span.SetAttributes(AttrErrorKind.String(re.Kind.String()))
		if re.Status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", re.Status))
		}
		span.SetStatus(codes.Error, re.Error())
	}
}

// badResponse is a *RequestError for an answer that lacks what the
// operation needs; it is counted and marked on the span by request.
func (in *instruments) badResponse(ctx context.Context, op Operation, err error) error {
	re := &RequestError{Op: op, Kind: KindResponse, Err: err}
	in.fail(ctx, trace.SpanFromContext(ctx), re)
	return re
}
