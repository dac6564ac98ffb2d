package registrar

import (
	"log/slog"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// Spec is the service specification a mint binds to its registration id.
// A remint with a different spec is refused stored_spec_conflict.
type Spec struct {
	Component   string `json:"component"`
	ServiceName string `json:"service_name"`
	Reload      string `json:"reload"`
}

// MintRequest is one mint invocation, as decoded by the transport.
type MintRequest struct {
	// CallerIdentity is the opaque identity the transport derived from the
	// connection (never from the request body).
	CallerIdentity string
	// CallerSubuid is the unix peer uid the kernel reported when the
	// transport identified the caller as the owner of the subordinate uid
	// range holding it (CallerIdentity is then the owner's), else 0: a
	// diagnostic the call's audit records carry (caller_subuid), never a
	// key.
	CallerSubuid uint32
	// Caller is CallerIdentity prepared by the verbs' limiter
	// (Verbs.Caller), once per connection; the zero Caller, or one of
	// another identity, is prepared again from CallerIdentity.
	Caller      limiter.Caller
	ServiceName string
	Host        string
	// Instance is 1..999 for a many-per-host component; 0 means absent.
	Instance  uint32
	Component string
	Spec      Spec
	// WrapTTLSeconds is the lifetime of the wrapped secret, 1 ≤ n ≤
	// registrar.max_wrap_ttl_seconds.
	WrapTTLSeconds uint64
	// IdempotencyKey is accepted for the control plane's bookkeeping; the
	// verbs are idempotent by derivation and do not use it.
	IdempotencyKey string
}

// DeregisterRequest is one deregister invocation.
type DeregisterRequest struct {
	CallerIdentity string
	// CallerSubuid and Caller are as MintRequest's.
	CallerSubuid   uint32
	Caller         limiter.Caller
	ServiceName    string
	Host           string
	Instance       uint32
	Component      string
	IdempotencyKey string
}

// Material is the bootstrap material a mint hands out: a role id stable for
// the registration, and a random single-use wrapped secret id that expires.
type Material struct {
	RoleID          string
	WrappedSecretID string
	ExpiresAt       time.Time
}

// LogValue redacts the secret: Material may be logged, its secret never.
func (m Material) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("role_id", m.RoleID),
		slog.String("wrapped_secret_id", "REDACTED"),
		slog.Time("expires_at", m.ExpiresAt),
	)
}

// MintOutcome is a successful mint's outcome.
type MintOutcome uint8

const (
	// FirstMint created the binding and its identity.
	FirstMint MintOutcome = iota + 1
	// IdempotentRemint found the same host and spec bound and re-issued
	// material.
	IdempotentRemint
)

// String returns the wire spelling: "first_mint" or "idempotent_remint".
var mintOutcomeNames = vocab.NewEnum[MintOutcome]("MintOutcome", "MintOutcome", []string{
	FirstMint:        "first_mint",
	IdempotentRemint: "idempotent_remint",
})

func (o MintOutcome) String() string { return mintOutcomeNames.String(o) }

// AuditClass returns the outcome record's class.
func (o MintOutcome) AuditClass() vocab.OutcomeClass {
	if o == IdempotentRemint {
		return vocab.ClassIdempotentRemint
	}
	return vocab.ClassFirstMint
}

// DeregisterOutcome is a successful deregister's outcome.
type DeregisterOutcome uint8

const (
	// Removed removed the binding and its identity.
	Removed DeregisterOutcome = iota + 1
	// AlreadyAbsent found nothing bound.
	AlreadyAbsent
)

// String returns the wire spelling: "removed" or "already_absent".
var deregisterOutcomeNames = vocab.NewEnum[DeregisterOutcome]("DeregisterOutcome", "DeregisterOutcome", []string{
	Removed:       "removed",
	AlreadyAbsent: "already_absent",
})

func (o DeregisterOutcome) String() string {
	return deregisterOutcomeNames.String(o)
}

// AuditClass returns the outcome record's class.
func (o DeregisterOutcome) AuditClass() vocab.OutcomeClass {
	if o == AlreadyAbsent {
		return vocab.ClassIdempotentAlreadyAbsent
	}
	return vocab.ClassIdentityRemoved
}

// MintResult is a successful mint.
type MintResult struct {
	RequestID      string
	RegistrationID string
	Outcome        MintOutcome
	Material       Material
}

// DeregisterResult is a successful deregister.
type DeregisterResult struct {
	RequestID      string
	RegistrationID string
	Outcome        DeregisterOutcome
}
