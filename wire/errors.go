package wire

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// ErrorID is one of the eleven error identifiers of the closed set. The class
// and the HTTP status are properties of the identifier, never of the
// particular refusal.
type ErrorID string

// The closed set of error identifiers, in the spec's table order.
const (
	// ServiceLabelInvalid: invalid_service_name, invalid_host,
	// reserved_service_name. 422.
	ServiceLabelInvalid ErrorID = "ServiceLabelInvalid"
	// ServiceInstanceMismatch: component_not_configured,
	// service_instance_mismatch. 422.
	ServiceInstanceMismatch ErrorID = "ServiceInstanceMismatch"
	// ServiceSpecConflict: spec_identity_disagreement, stored_spec_conflict.
	// 409.
	ServiceSpecConflict ErrorID = "ServiceSpecConflict"
	// ServiceRequestInvalid: invalid_wrap_ttl, derived_key_invalid. 422.
	ServiceRequestInvalid ErrorID = "ServiceRequestInvalid"
	// ServiceNameCollision: registration_id_collision. 409.
	ServiceNameCollision ErrorID = "ServiceNameCollision"
	// ServiceHostMismatch: host_mismatch. 409.
	ServiceHostMismatch ErrorID = "ServiceHostMismatch"
	// RegistrarUnavailable carries a reason: AuditUnwritable,
	// PostMintUnrecordable or BackendUnavailable. 503.
	RegistrarUnavailable ErrorID = "RegistrarUnavailable"
	// RegistrarBusy is the admission throttle, the only retryable
	// identifier. It carries retry_after (whole seconds, ≥ 1), repeated in
	// the Retry-After header. 429.
	RegistrarBusy ErrorID = "RegistrarBusy"
	// RequestMalformed: the codec rejected the request before any verb ran
	// (never charged, never recorded), an unknown path and a wrong method
	// included. It carries detail. 400.
	RequestMalformed ErrorID = "RequestMalformed"
	// CallerNotPermitted: the caller's policy does not allow the call. It
	// carries reason (no_policy, out_of_scope or not_owner) and, for
	// out_of_scope, scope (verb, service, component or host). 403.
	CallerNotPermitted ErrorID = "CallerNotPermitted"
	// InstanceCeilingReached: a new registration would exceed an instance
	// ceiling. It carries ceiling (max_instances_per_host or
	// max_registrations) and limit, the ceiling's value. 409.
	InstanceCeilingReached ErrorID = "InstanceCeilingReached"
)

// IDs returns the closed set of identifiers in the spec's table order.
func IDs() []ErrorID {
	return []ErrorID{
		ServiceLabelInvalid, ServiceInstanceMismatch, ServiceSpecConflict, ServiceRequestInvalid,
		ServiceNameCollision, ServiceHostMismatch, RegistrarUnavailable, RegistrarBusy, RequestMalformed,
		CallerNotPermitted, InstanceCeilingReached,
	}
}

// Valid reports whether id is one of the eleven identifiers.
func (id ErrorID) Valid() bool { return id.HTTPStatus() != 0 }

// Class is the class of an identifier: permanent or retryable.
type Class string

// The two classes.
const (
	// Permanent: retrying the same request cannot succeed until something
	// else changes (the request, the configuration, or an operator acts).
	Permanent Class = "permanent"
	// Retryable: retry after the advertised delay. Only RegistrarBusy.
	Retryable Class = "retryable"
)

// Class returns the identifier's class; "" for a value outside the set.
func (id ErrorID) Class() Class {
	switch id {
	case ServiceLabelInvalid, ServiceInstanceMismatch, ServiceSpecConflict, ServiceRequestInvalid,
		ServiceNameCollision, ServiceHostMismatch, RegistrarUnavailable, RequestMalformed,
		CallerNotPermitted, InstanceCeilingReached:
		return Permanent
	case RegistrarBusy:
		return Retryable
	}
	return ""
}

// HTTPStatus returns the identifier's HTTP status; 0 for a value outside
// the set. RequestMalformed is 400 for every codec rejection, an unknown
// path and a wrong method included.
func (id ErrorID) HTTPStatus() int {
	switch id {
	case ServiceLabelInvalid, ServiceInstanceMismatch, ServiceRequestInvalid:
		return http.StatusUnprocessableEntity
	case ServiceSpecConflict, ServiceNameCollision, ServiceHostMismatch, InstanceCeilingReached:
		return http.StatusConflict
	case CallerNotPermitted:
		return http.StatusForbidden
	case RegistrarUnavailable:
		return http.StatusServiceUnavailable
	case RegistrarBusy:
		return http.StatusTooManyRequests
	case RequestMalformed:
		return http.StatusBadRequest
	}
	return 0
}

// IDForReason maps a verb refusal reason to its identifier. It is the one
// exhaustive switch over vocab.Reason: every reason is named and there is
// no default branch, so a new reason is unmapped (ok false) until it is
// added here, and the test that walks every reason fails. A pre-derivation
// refusal maps the same whether or not the limiter suppressed its records.
// vocab.ReasonBackendUnavailable maps to RegistrarUnavailable with the
// reason BackendUnavailable.
func IDForReason(r vocab.Reason) (id ErrorID, ok bool) {
	switch r {
	case vocab.ReasonInvalidServiceName, vocab.ReasonInvalidHost, vocab.ReasonReservedServiceName:
		return ServiceLabelInvalid, true
	case vocab.ReasonComponentNotConfigured, vocab.ReasonServiceInstanceMismatch:
		return ServiceInstanceMismatch, true
	case vocab.ReasonSpecIdentityDisagreement, vocab.ReasonStoredSpecConflict:
		return ServiceSpecConflict, true
	case vocab.ReasonInvalidWrapTTL, vocab.ReasonDerivedKeyInvalid:
		return ServiceRequestInvalid, true
	case vocab.ReasonRegistrationIDCollision:
		return ServiceNameCollision, true
	case vocab.ReasonHostMismatch:
		return ServiceHostMismatch, true
	case vocab.ReasonNoPolicy, vocab.ReasonOutOfScope, vocab.ReasonNotOwner:
		return CallerNotPermitted, true
	case vocab.ReasonInstanceCeiling:
		return InstanceCeilingReached, true
	case vocab.ReasonBackendUnavailable:
		return RegistrarUnavailable, true
	}
	return "", false
}

// unavailableReason returns the wire spelling of an UnavailableReason; ok
// is false for a value outside the three.
func unavailableReason(r registrar.UnavailableReason) (string, bool) {
	switch r {
	case registrar.AuditUnwritable, registrar.PostMintUnrecordable, registrar.BackendUnavailable:
		return r.String(), true
	}
	return "", false
}

// ErrUnmappable marks a verb answer the wire cannot map (an error of an
// unknown type, an unmapped reason or outcome). It is answered 500 and
// logged; it is unreachable while the mapping tests pass.
var ErrUnmappable = errors.New("wire: unmappable verb answer")

// RefusalFor maps a verb error to its HTTP status and refusal body (without
// registrar_health). A throttle also returns its retry-after seconds for
// the header. An error it cannot map returns ErrUnmappable (wrapped with what
// was not mappable).
func RefusalFor(err error) (status int, body RefusalResponse, retryAfter uint64, ierr error) {
	var (
		ref *registrar.RefusedError
		thr *registrar.ThrottledError
		una *registrar.UnavailableError
	)
	// The verbs return their errors unwrapped: a type switch finds them
	// without errors.As, whose targets escape (an allocation each, on
	// every throttled answer). Anything else goes through errors.As.
	switch e := err.(type) {
	case *registrar.ThrottledError:
		thr = e
	case *registrar.RefusedError:
		ref = e
	case *registrar.UnavailableError:
		una = e
	default:
		thr, ref, una = asVerbError(err)
	}
	body.ProtocolVersion = ProtocolVersion
	switch {
	case thr != nil:
		retryAfter = max(thr.RetryAfterSeconds, 1) // the contract says ≥ 1; never advertise 0
		body.RequestID = thr.RequestID
		body.Error = ErrorBody{ID: RegistrarBusy, RetryAfter: retryAfter}
	case ref != nil:
		id, ok := IDForReason(ref.Reason)
		if !ok {
			return 0, body, 0, internalf("refusal reason %d has no identifier", uint8(ref.Reason))
		}
		body.RequestID, body.RegistrationID = ref.RequestID, ref.RegistrationID
		body.Error = ErrorBody{ID: id}
		switch id {
		case RegistrarUnavailable:
			body.Error.Reason = registrar.BackendUnavailable.String()
		case CallerNotPermitted:
			body.Error.Reason = ref.Reason.String()
			if ref.Reason == vocab.ReasonOutOfScope {
				if !ref.Scope.Valid() {
					return 0, body, 0, internalf("out_of_scope refusal without a scope (%d)", uint8(ref.Scope))
				}
				body.Error.Scope = ref.Scope.String()
			}
		case InstanceCeilingReached:
			if !ref.Ceiling.Valid() || ref.Limit == 0 {
				return 0, body, 0, internalf("instance_ceiling refusal without its ceiling (%d, %d)", uint8(ref.Ceiling), ref.Limit)
			}
			body.Error.Ceiling, body.Error.Limit = ref.Ceiling.String(), ref.Limit
		}
	case una != nil:
		reason, ok := unavailableReason(una.Reason)
		if !ok {
			return 0, body, 0, internalf("unavailable reason %d has no spelling", uint8(una.Reason))
		}
		body.RequestID, body.RegistrationID = una.RequestID, una.RegistrationID
		body.Error = ErrorBody{ID: RegistrarUnavailable, Reason: reason}
	default:
		return 0, body, 0, internalf("verb error of type %T", err)
	}
	body.Class = body.Error.ID.Class()
	return body.Error.ID.HTTPStatus(), body, retryAfter, nil
}

func internalf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnmappable}, args...)...)
}

// asVerbError finds a wrapped verb error with errors.As; kept apart from
// RefusalFor so that only this rare path pays for the escaping targets.
func asVerbError(err error) (*registrar.ThrottledError, *registrar.RefusedError, *registrar.UnavailableError) {
	var (
		thr *registrar.ThrottledError
		ref *registrar.RefusedError
		una *registrar.UnavailableError
	)
	switch {
	case errors.As(err, &thr):
	case errors.As(err, &ref):
	case errors.As(err, &una):
	}
	return thr, ref, una
}
