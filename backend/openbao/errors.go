package openbao

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/openbao/openbao/api/v2"
	"github.com/registrar-otel/registrar-otel/vocab"
)

var (
	// ErrInvalidOp is returned for an operation the verbs never send (an
	// empty registration id or host, a registration id or service name
	// that is not a DNS-label-like string, a non-positive wrap TTL).
	ErrInvalidOp = errors.New("openbao: invalid operation")

	// ErrCorrupt matches a stored binding that does not decode. A corrupt
	// binding is never treated as absent: the operation fails and changes
	// nothing.
	ErrCorrupt = errors.New("openbao: corrupt binding")

	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("openbao: backend is closed")
)

// Kind classifies a failed request, as the errors metric's kind label.
type Kind uint8

const (
	// KindTimeout: the request did not complete within
	// openbao.request_timeout_ms.
	KindTimeout Kind = iota + 1
	// KindServer: the server answered 5xx (sealed, standby without a
	// leader, overloaded, storage failing).
	KindServer
	// KindClient: the server answered 4xx (permission denied, a missing
	// mount): the configuration or the token's policy is wrong.
	KindClient
	// KindTransport: no answer (connection refused or reset, TLS or DNS
	// failure).
	KindTransport
	// KindResponse: an answer this backend cannot use (missing fields, a
	// binding that does not decode).
	KindResponse
	// KindSaturated: no request was made: openbao.max_in_flight calls were
	// already talking to the server and no slot came free within the slot
	// wait. The server is slow or hanging.
	KindSaturated

	numKinds = 6
)

// kindNames are the label values: "timeout", "server_error",
// "client_error", "transport", "bad_response" and "saturated".
var kindNames = vocab.NewEnum[Kind]("Kind", "Kind", []string{
	KindTimeout:   "timeout",
	KindServer:    "server_error",
	KindClient:    "client_error",
	KindTransport: "transport",
	KindResponse:  "bad_response",
	KindSaturated: "saturated",
})

// String returns the label value, e.g. "server_error".
func (k Kind) String() string { return kindNames.String(k) }

// RequestError is one failed request to the server. It never carries the
// token or a secret.
type RequestError struct {
	// Op is the operation, e.g. "role_write".
	Op Operation
	// Kind classifies the failure.
	Kind Kind
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// Err is the client's error.
	Err error
}

func (e *RequestError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("openbao: %s: %s (HTTP %d): %s", e.Op, e.Kind, e.Status, causeText(e.Err))
	}
	return fmt.Sprintf("openbao: %s: %s: %s", e.Op, e.Kind, causeText(e.Err))
}

func (e *RequestError) Unwrap() error { return e.Err }

// definitelyNotApplied reports whether the server certainly did not apply
// the request: it answered 4xx. A timeout, a 5xx or a lost connection may
// have been applied.
func (e *RequestError) definitelyNotApplied() bool {
	return e.Kind == KindClient || e.Kind == KindSaturated
}

// classify turns a client error into its kind and status.
func classify(ctx context.Context, err error) (Kind, int) {
	if errors.Is(err, ErrCorrupt) {
		return KindResponse, 0
	}
	if re, ok := errors.AsType[*api.ResponseError](err); ok {
		if re.StatusCode >= 500 {
			return KindServer, re.StatusCode
		}
		return KindClient, re.StatusCode
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return KindTimeout, 0
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return KindTimeout, 0
	}
	return KindTransport, 0
}

// causeText is the server's own error list when there is one (without the
// client's multi-line framing), else the error.
func causeText(err error) string {
	if re, ok := errors.AsType[*api.ResponseError](err); ok && len(re.Errors) > 0 {
		return oneLine(strings.Join(re.Errors, "; "))
	}
	if err == nil {
		return "no error"
	}
	return oneLine(err.Error())
}

// oneLine folds the server's multi-line error lists ("1 error occurred:\n\t*
// permission denied") onto one line for logs and audit details.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// isUnknownAccessor reports whether err is AppRole's answer to destroying a
// secret id accessor it does not know (already destroyed, or expired): "failed
// to find accessor entry" (500) when the accessor is gone, and "invalid
// secret id accessor" (403) when the accessor was found and its secret id
// was destroyed meanwhile (a concurrent destroy: Vault's
// pathRoleSecretIDAccessorDestroyUpdateDelete).
func isUnknownAccessor(err error) bool {
	re, ok := errors.AsType[*api.ResponseError](err)
	if !ok {
		return false
	}
	for _, m := range re.Errors {
		if strings.Contains(m, "failed to find accessor entry") || strings.Contains(m, "no secret ID found") || strings.Contains(m, "invalid secret id accessor") {
			return true
		}
	}
	return false
}

// isCASMismatch reports whether err is KV v2's answer to a compare-and-set
// on a version that is not the current one.
func isCASMismatch(err error) bool {
	re, ok := errors.AsType[*api.ResponseError](err)
	if !ok || re.StatusCode != 400 {
		return false
	}
	for _, m := range re.Errors {
		if strings.Contains(m, "check-and-set") {
			return true
		}
	}
	return false
}
