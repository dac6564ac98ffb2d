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
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the backend's spans, and of
// the metrics telemetry.NewOpenBaoObserver records for it.
const ScopeName = "github.com/registrar-otel/registrar-otel/backend/openbao"

// Operation is one kind of request to the server: the operation label of
// the metrics and the suffix of the span name.
type Operation uint8

// The operations, in the order a mint and a deregister make them.
const (
	OpBindingRead Operation = iota
	OpBindingClaim
	OpRoleWrite
	OpRoleIDRead
	OpSecretIDWrap
	OpBindingActivate
	OpRoleDelete
	OpBindingDelete
	// OpSecretIDDestroy destroys the previous secret id of a remint, by
	// its accessor.
	OpSecretIDDestroy
	// OpTokenLookup and OpTokenRenew are the token's own requests
	// (auth/token/lookup-self, auth/token/renew-self), on the tick.
	OpTokenLookup
	OpTokenRenew
	// OpBindingList lists the bindings' ids (a LIST of their metadata),
	// for registrar.Lister; each is then read (OpBindingRead).
	OpBindingList
	// OpSecretIDList lists a role's secret ids (their accessors), the
	// answer response-wrapped; OpSecretIDListUnwrap unwraps it with its
	// wrapping token. A mint destroys every secret id but its own.
	OpSecretIDList
	OpSecretIDListUnwrap

	numOps = 14
)

var opNames = [numOps]string{
	OpBindingRead:        "binding_read",
	OpBindingClaim:       "binding_claim",
	OpRoleWrite:          "role_write",
	OpRoleIDRead:         "role_id_read",
	OpSecretIDWrap:       "secret_id_wrap",
	OpBindingActivate:    "binding_activate",
	OpRoleDelete:         "role_delete",
	OpBindingDelete:      "binding_delete",
	OpSecretIDDestroy:    "secret_id_destroy",
	OpTokenLookup:        "token_lookup",
	OpTokenRenew:         "token_renew",
	OpBindingList:        "binding_list",
	OpSecretIDList:       "secret_id_list",
	OpSecretIDListUnwrap: "secret_id_list_unwrap",
}

var opMethods = [numOps]string{
	OpBindingRead:        "GET",
	OpBindingClaim:       "PUT",
	OpRoleWrite:          "PUT",
	OpRoleIDRead:         "GET",
	OpSecretIDWrap:       "PUT",
	OpBindingActivate:    "PUT",
	OpRoleDelete:         "DELETE",
	OpBindingDelete:      "DELETE",
	OpSecretIDDestroy:    "PUT",
	OpTokenLookup:        "GET",
	OpTokenRenew:         "PUT",
	OpBindingList:        "LIST",
	OpSecretIDList:       "LIST",
	OpSecretIDListUnwrap: "PUT",
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

// NumOperations is the number of operations: Operation values are 0 to
// NumOperations-1.
const NumOperations = numOps

// NumKinds is the number of failure kinds: Kind values are 1 to NumKinds.
const NumKinds = numKinds

// Observer receives the backend's request measurements. The backend
// declares and registers no metric instrument itself:
// telemetry.NewOpenBaoObserver is the OpenTelemetry implementation the
// daemon passes (see the "where metrics live" convention in package
// telemetry's doc). An Observer must be safe for concurrent use.
type Observer interface {
	// Request is called once per request to the server, failed or not,
	// with its duration.
	Request(ctx context.Context, op Operation, elapsed time.Duration)
	// Failed is called once per failed request, with its kind (which
	// fails the invocation with BackendUnavailable).
	Failed(ctx context.Context, op Operation, kind Kind)
}

type nopObserver struct{}

func (nopObserver) Request(context.Context, Operation, time.Duration) {}
func (nopObserver) Failed(context.Context, Operation, Kind)           {}

// instruments holds the backend's tracer, with the span names and
// attributes precomputed, and the observer its measurements go to. Spans
// stay here: each is the request's own, opened and closed around it.
type instruments struct {
	tracer   trace.Tracer
	obs      Observer
	spanName [numOps]string
	spanAttr [numOps][]attribute.KeyValue
}

func newInstruments(tp trace.TracerProvider, obs Observer, address *url.URL) *instruments {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if obs == nil {
		obs = nopObserver{}
	}
	in := &instruments{tracer: tp.Tracer(ScopeName), obs: obs}
	host, portText, _ := net.SplitHostPort(address.Host)
	if host == "" {
		host, portText = address.Hostname(), map[string]string{"https": "443", "http": "80"}[address.Scheme]
	}
	port, _ := strconv.Atoi(portText)
	for o := range numOps {
		op := Operation(o)
		in.spanName[o] = "openbao." + op.String()
		in.spanAttr[o] = []attribute.KeyValue{
			AttrOperation.String(op.String()),
			attribute.String("http.request.method", opMethods[o]),
			attribute.String("server.address", host),
			attribute.Int("server.port", port),
		}
	}
	return in
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
	in.obs.Request(ctx, op, time.Since(start))
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
	in.obs.Failed(ctx, re.Op, re.Kind)
	if span.IsRecording() {
		span.SetAttributes(AttrErrorKind.String(re.Kind.String()))
		if re.Status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", re.Status))
		}
		span.SetStatus(codes.Error, re.Error())
	}
}

// saturated is a *RequestError of kind KindSaturated for a call that got
// no slot; it is counted like a failed request, without a span of its own
// (no request was made).
func (in *instruments) saturated(ctx context.Context, op Operation, err error) error {
	re := &RequestError{Op: op, Kind: KindSaturated, Err: err}
	in.obs.Failed(ctx, op, KindSaturated)
	return re
}

// badResponse is a *RequestError for an answer that lacks what the
// operation needs; it is counted and marked on the span by request.
func (in *instruments) badResponse(ctx context.Context, op Operation, err error) error {
	re := &RequestError{Op: op, Kind: KindResponse, Err: err}
	in.fail(ctx, trace.SpanFromContext(ctx), re)
	return re
}
