package vocab

// Reason is the verb layer's refusal reason, carried by a refused answer on
// the wire and by a refused outcome record. There is one per refusal and no
// fallback. The zero value is not a reason, so a refusal that forgot its
// reason fails validation.
type Reason uint8

// The sixteen refusal reasons: nine pre-derivation (the seven checks of the
// request and the two of authorization, no_policy and out_of_scope), seven
// post-derivation (not_owner and instance_ceiling among them, decided with
// the registry).
const (
	ReasonInvalidServiceName Reason = iota + 1
	ReasonInvalidHost
	ReasonReservedServiceName
	ReasonSpecIdentityDisagreement
	ReasonComponentNotConfigured
	ReasonServiceInstanceMismatch
	ReasonInvalidWrapTTL
	ReasonDerivedKeyInvalid
	ReasonRegistrationIDCollision
	ReasonStoredSpecConflict
	ReasonHostMismatch
	ReasonBackendUnavailable
	// ReasonNoPolicy: the caller's identity matches no caller policy and
	// is not an operator's. Pre-derivation.
	ReasonNoPolicy
	// ReasonOutOfScope: the caller's policy does not cover the service,
	// component, host or verb asked for. Pre-derivation.
	ReasonOutOfScope
	// ReasonNotOwner: the registration was first minted by an identity
	// the caller's policy may not act for. Post-derivation.
	ReasonNotOwner
	// ReasonInstanceCeiling: a new registration would exceed its
	// component's max_instances_per_host or its policy's
	// max_registrations. Post-derivation.
	ReasonInstanceCeiling
)

var reasons = NewEnum[Reason]("Reason", "refusal reason", []string{
	ReasonInvalidServiceName:       "invalid_service_name",
	ReasonInvalidHost:              "invalid_host",
	ReasonReservedServiceName:      "reserved_service_name",
	ReasonSpecIdentityDisagreement: "spec_identity_disagreement",
	ReasonComponentNotConfigured:   "component_not_configured",
	ReasonServiceInstanceMismatch:  "service_instance_mismatch",
	ReasonInvalidWrapTTL:           "invalid_wrap_ttl",
	ReasonDerivedKeyInvalid:        "derived_key_invalid",
	ReasonRegistrationIDCollision:  "registration_id_collision",
	ReasonStoredSpecConflict:       "stored_spec_conflict",
	ReasonHostMismatch:             "host_mismatch",
	ReasonBackendUnavailable:       "backend_unavailable",
	ReasonNoPolicy:                 "no_policy",
	ReasonOutOfScope:               "out_of_scope",
	ReasonNotOwner:                 "not_owner",
	ReasonInstanceCeiling:          "instance_ceiling",
})

// Valid reports whether r is one of the sixteen reasons.
func (r Reason) Valid() bool { return reasons.Valid(r) }

// String returns the snake_case spelling, e.g. "invalid_host" (Reason(N)
// for an invalid value).
func (r Reason) String() string { return reasons.String(r) }

// MarshalText implements encoding.TextMarshaler; an invalid reason is an
// error.
func (r Reason) MarshalText() ([]byte, error) { return reasons.MarshalText(r) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// sixteen spellings.
func (r *Reason) UnmarshalText(b []byte) error { return reasons.UnmarshalText(r, b) }

// ParseReason parses a refusal reason spelling (exact, no case folding).
func ParseReason(s string) (Reason, error) { return reasons.Parse(s) }
