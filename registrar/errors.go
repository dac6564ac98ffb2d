package registrar

import (
	"errors"
	"fmt"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The verbs answer every failure with exactly one of three error types:
//
//   - *RefusedError: a permanent refusal with its vocab.Reason (determined;
//     retrying the same request cannot succeed);
//   - *ThrottledError: the admission throttle, the only retryable answer;
//   - *UnavailableError: the registrar could not do or record the work.
//
// Each carries the invocation's request id. Use errors.As to tell them
// apart; never a boolean or a string.

// RefusedError is a permanent refusal.
type RefusedError struct {
	RequestID string
	// RegistrationID is set when the refusal came after derivation.
	RegistrationID string
	Reason         vocab.Reason
	// Limited reports that the limiter suppressed this invocation's audit
	// records (a pre-derivation refusal past its bucket). The caller's
	// answer is the same either way.
	Limited bool
	// Scope is, for ReasonOutOfScope, what the caller's policy does not
	// cover.
	Scope vocab.Scope
	// Ceiling and Limit are, for ReasonInstanceCeiling, the ceiling the
	// mint would have exceeded and its configured value.
	Ceiling vocab.Ceiling
	Limit   uint32
}

func (e *RefusedError) Error() string {
	what := e.Reason.String()
	switch e.Reason {
	case vocab.ReasonOutOfScope:
		what += " (" + e.Scope.String() + ")"
	case vocab.ReasonInstanceCeiling:
		what += fmt.Sprintf(" (%s %d)", e.Ceiling, e.Limit)
	}
	if e.RegistrationID != "" {
		return fmt.Sprintf("registrar: refused %s (registration %s)", what, e.RegistrationID)
	}
	return "registrar: refused " + what
}

// ThrottledError is the admission throttle: the invocation was not
// attempted, wrote no record and did no backend work. It is the only
// retryable answer; RetryAfterSeconds (≥ 1, whole seconds, a duration and
// never a timestamp) is when the caller's admission bucket holds a token.
type ThrottledError struct {
	RequestID         string
	RetryAfterSeconds uint64
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("registrar: busy, retry after %d s", e.RetryAfterSeconds)
}

// UnavailableReason says why the registrar could not serve an invocation.
type UnavailableReason uint8

const (
	// AuditUnwritable: a record could not be written and nothing was
	// changed (the intent write failed, so nothing was created; or an
	// outcome write failed after work that changed nothing).
	AuditUnwritable UnavailableReason = iota + 1
	// PostMintUnrecordable: the work changed the registry (an identity was
	// created or re-issued, or removed) but its outcome record could not be
	// written. The change stands; the audit trail lacks its outcome.
	PostMintUnrecordable
	// BackendUnavailable: the backend failed; its refusal was recorded.
	BackendUnavailable
)

// String returns the wire spelling, e.g. "AuditUnwritable".
var unavailableReasonNames = vocab.NewEnum[UnavailableReason]("UnavailableReason", "UnavailableReason", []string{
	AuditUnwritable:      "AuditUnwritable",
	PostMintUnrecordable: "PostMintUnrecordable",
	BackendUnavailable:   "BackendUnavailable",
})

func (r UnavailableReason) String() string {
	return unavailableReasonNames.String(r)
}

// UnavailableError reports that the registrar could not do or record the
// work. It is permanent until an operator acts.
type UnavailableError struct {
	RequestID      string
	RegistrationID string
	Reason         UnavailableReason
	// Err is the underlying store or backend error.
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("registrar: unavailable (%s): %v", e.Reason, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// RequestIDOf returns the request id carried by any of the verbs' errors.
func RequestIDOf(err error) string {
	var (
		r *RefusedError
		t *ThrottledError
		u *UnavailableError
	)
	switch {
	case errors.As(err, &r):
		return r.RequestID
	case errors.As(err, &t):
		return t.RequestID
	case errors.As(err, &u):
		return u.RequestID
	}
	return ""
}
