package wire

import (
	"encoding/json"
	"time"
)

// ProtocolVersion is the only protocol version: every request must carry
// it and every response does.
const ProtocolVersion = 1

// The endpoints.
const (
	PathMint       = "/v1/mint"
	PathDeregister = "/v1/deregister"
	PathHealth     = "/v1/health"
)

// MaxBodyBytes bounds a request body (64 KiB). A longer body is answered
// RequestMalformed (400).
const MaxBodyBytes = 64 << 10

// MaxDetailBytes bounds a RequestMalformed detail. Details name the member
// and the problem; they never echo a value the caller sent.
//
// (See MalformedError for the two bounded exceptions.)
const MaxDetailBytes = 256

// TimeLayout is the layout of material.expires_at: RFC 3339, UTC, exactly
// millisecond precision.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Spec is a mint's service specification.
type Spec struct {
	Component   string `json:"component"`
	ServiceName string `json:"service_name"`
	Reload      string `json:"reload"`
}

// MintRequest is the body of POST /v1/mint, members in the spec's order.
// Instance 0 means absent (and is omitted when encoded), as in the verbs.
// IdempotencyKey "" is omitted.
type MintRequest struct {
	ProtocolVersion uint32 `json:"protocol_version"`
	ServiceName     string `json:"service_name"`
	Host            string `json:"host"`
	Instance        uint32 `json:"instance,omitempty"`
	Component       string `json:"component"`
	Spec            Spec   `json:"spec"`
	// WrapTTL is the wrapped secret's lifetime in whole seconds.
	WrapTTL        uint64 `json:"wrap_ttl"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// DeregisterRequest is the body of POST /v1/deregister, members in the
// spec's order.
type DeregisterRequest struct {
	ProtocolVersion uint32 `json:"protocol_version"`
	ServiceName     string `json:"service_name"`
	Host            string `json:"host"`
	Instance        uint32 `json:"instance,omitempty"`
	Component       string `json:"component"`
	IdempotencyKey  string `json:"idempotency_key,omitempty"`
}

// Material is a mint's bootstrap material. ExpiresAt is formatted with
// TimeLayout.
type Material struct {
	RoleID          string `json:"role_id"`
	WrappedSecretID string `json:"wrapped_secret_id"`
	ExpiresAt       string `json:"expires_at"`
}

// ExpiresAtTime parses ExpiresAt.
func (m Material) ExpiresAtTime() (time.Time, error) {
	return time.Parse(TimeLayout, m.ExpiresAt)
}

// MintResponse is a successful mint (200). Outcome is "first_mint" or
// "idempotent_remint".
type MintResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RequestID       string          `json:"request_id"`
	RegistrationID  string          `json:"registration_id"`
	Outcome         string          `json:"outcome"`
	Material        Material        `json:"material"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

// DeregisterResponse is a successful deregister (200). Outcome is
// "removed" or "already_absent".
type DeregisterResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RequestID       string          `json:"request_id"`
	RegistrationID  string          `json:"registration_id"`
	Outcome         string          `json:"outcome"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

// ErrorBody is a refusal's error member: the identifier and its payload
// members. Reason is present for RegistrarUnavailable only, RetryAfter for
// RegistrarBusy only, Detail for RequestMalformed only.
type ErrorBody struct {
	ID ErrorID `json:"id"`
	// Reason is RegistrarUnavailable's (AuditUnwritable,
	// PostMintUnrecordable or BackendUnavailable) and CallerNotPermitted's
	// (no_policy, out_of_scope or not_owner).
	Reason string `json:"reason,omitempty"`
	// Scope is CallerNotPermitted's for out_of_scope: verb, service,
	// component or host.
	Scope string `json:"scope,omitempty"`
	// Ceiling and Limit are InstanceCeilingReached's: max_instances_per_host
	// or max_registrations, and its value.
	Ceiling string `json:"ceiling,omitempty"`
	Limit   uint32 `json:"limit,omitempty"`
	// RetryAfter is whole seconds, ≥ 1.
	RetryAfter uint64 `json:"retry_after,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// RefusalResponse is every non-200 answer. RegistrationID is present only
// when the refusal came after derivation.
type RefusalResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RequestID       string          `json:"request_id"`
	RegistrationID  string          `json:"registration_id,omitempty"`
	Class           Class           `json:"class"`
	Error           ErrorBody       `json:"error"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

// HealthResponse is the answer to GET /v1/health.
type HealthResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}
