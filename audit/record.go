package audit

import (
	"fmt"
	"github.com/registrar-otel/registrar-otel/internal/enumname"
	"time"

	"github.com/registrar-otel/registrar-otel/limiter"
)

// RecordVersion is the value of every line's record_version key. The
// counted (limited) record was added as a third phase at this same version;
// the reader counts any other version as malformed.
const RecordVersion = 1

// MaxFieldBytes is the bound, in bytes, on each of the four
// attacker-influenced string fields (caller_identity, requested.service_name,
// requested.host, outcome.detail). A longer value is cut on a UTF-8 character
// boundary at or below this bound and described by a Truncation entry.
const MaxFieldBytes = 512

// MaxRequestIDBytes bounds request_id: 1 to 64 bytes of printable ASCII
// (0x21 through 0x7e), which covers the registrar's base64url-plus-sequence
// identifiers with room to spare.
const MaxRequestIDBytes = 64

// MaxRegistrationIDBytes bounds registration_id: 1 to 131 bytes of
// [a-z0-9-], the derivation's own limit.
const MaxRegistrationIDBytes = 131

// MaxInstance is the largest requested.instance the store records: any
// uint32. The record says what the caller asked for; refusing an instance
// outside a component's 1..999 is the verb layer's job
// (service_instance_mismatch), and that refusal must be recordable. 0 means
// "absent".
const MaxInstance = 1<<32 - 1

// Phase is a record's phase: intent, outcome or limited. It is a closed
// enum: the zero value is not a phase (a zero Record is invalid), and every
// switch over it names all three.
type Phase uint8

// The three phases.
const (
	// PhaseIntent is written before any work, by every admitted invocation.
	PhaseIntent Phase = iota + 1
	// PhaseOutcome is written after the work, carrying the outcome.
	PhaseOutcome
	// PhaseLimited is the counted record: one per closed coalescing window
	// per (caller identity, verb, limited bucket). It is self-contained and
	// never paired.
	PhaseLimited
)

// Valid reports whether p is one of the three phases.
func (p Phase) Valid() bool { return p >= PhaseIntent && p <= PhaseLimited }

// String returns the on-disk spelling: "intent", "outcome" or "limited".
var phaseNames = [...]string{
	PhaseIntent:  "intent",
	PhaseOutcome: "outcome",
	PhaseLimited: "limited",
}

func (p Phase) String() string { return enumname.Of(phaseNames[:], "Phase", p) }

// MarshalText implements encoding.TextMarshaler; an invalid phase is an error.
func (p Phase) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("audit: invalid phase %d", uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// three spellings.
func (p *Phase) UnmarshalText(b []byte) error {
	v, err := ParsePhase(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// ParsePhase parses "intent", "outcome" or "limited" (exact spelling).
func ParsePhase(s string) (Phase, error) {
	switch s {
	case "intent":
		return PhaseIntent, nil
	case "outcome":
		return PhaseOutcome, nil
	case "limited":
		return PhaseLimited, nil
	}
	return 0, fmt.Errorf("audit: unknown phase %s", quoteBounded(s))
}

// OutcomeClass is the class of an outcome record. The zero value is not a
// class.
type OutcomeClass uint8

// The five outcome classes: four successes and refused.
const (
	ClassFirstMint OutcomeClass = iota + 1
	ClassIdempotentRemint
	ClassIdentityRemoved
	ClassIdempotentAlreadyAbsent
	ClassRefused
)

// Valid reports whether c is one of the five classes.
func (c OutcomeClass) Valid() bool { return c >= ClassFirstMint && c <= ClassRefused }

// String returns the on-disk spelling, e.g. "first_mint" or "refused".
var outcomeClassNames = [...]string{
	ClassFirstMint:               "first_mint",
	ClassIdempotentRemint:        "idempotent_remint",
	ClassIdentityRemoved:         "identity_removed",
	ClassIdempotentAlreadyAbsent: "idempotent_already_absent",
	ClassRefused:                 "refused",
}

func (c OutcomeClass) String() string { return enumname.Of(outcomeClassNames[:], "OutcomeClass", c) }

// MarshalText implements encoding.TextMarshaler; an invalid class is an error.
func (c OutcomeClass) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("audit: invalid outcome class %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// five spellings.
func (c *OutcomeClass) UnmarshalText(b []byte) error {
	v, err := ParseOutcomeClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// ParseOutcomeClass parses an outcome class spelling (exact, no case folding).
func ParseOutcomeClass(s string) (OutcomeClass, error) {
	for c := ClassFirstMint; c <= ClassRefused; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("audit: unknown outcome class %s", quoteBounded(s))
}

// Reason is the verb layer's refusal reason carried by a refused outcome.
// There is one per refusal and no fallback. The zero value is not a reason,
// so a refused outcome that forgot its reason fails validation.
type Reason uint8

// The twelve refusal reasons: seven pre-derivation, five post-derivation.
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
)

// Valid reports whether r is one of the twelve reasons.
func (r Reason) Valid() bool {
	return r >= ReasonInvalidServiceName && r <= ReasonBackendUnavailable
}

// String returns the on-disk snake_case spelling, e.g. "invalid_host".
var reasonNames = [...]string{
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
}

func (r Reason) String() string { return enumname.Of(reasonNames[:], "Reason", r) }

// MarshalText implements encoding.TextMarshaler; an invalid reason is an
// error.
func (r Reason) MarshalText() ([]byte, error) {
	if !r.Valid() {
		return nil, fmt.Errorf("audit: invalid refusal reason %d", uint8(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// twelve spellings.
func (r *Reason) UnmarshalText(b []byte) error {
	v, err := ParseReason(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseReason parses a refusal reason spelling (exact, no case folding).
func ParseReason(s string) (Reason, error) {
	for r := ReasonInvalidServiceName; r <= ReasonBackendUnavailable; r++ {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("audit: unknown refusal reason %s", quoteBounded(s))
}

// Outcome is an outcome record's result.
type Outcome struct {
	// Class is the outcome class; required.
	Class OutcomeClass
	// Reason is the refusal reason: required when Class is ClassRefused,
	// zero otherwise.
	Reason Reason
	// Detail is optional free text, only on refused outcomes; "" means
	// absent. It is attacker-influenced and bounded to MaxFieldBytes.
	Detail string
}

// Requested is what the caller asked for, as recorded on intent and outcome
// records.
type Requested struct {
	// ServiceName is the requested service name exactly as received
	// (possibly empty or invalid: refusals are recorded too). Bounded to
	// MaxFieldBytes.
	ServiceName string
	// Host is the requested host exactly as received. Bounded to
	// MaxFieldBytes.
	Host string
	// Instance is the requested instance exactly as received, 1 to
	// MaxInstance; 0 means the request carried none and the key is omitted.
	Instance uint32
}

// Truncation describes a field the store cut to MaxFieldBytes.
type Truncation struct {
	// FullSHA256 is the lowercase hex SHA-256 of the complete original
	// value.
	FullSHA256 string
	// FullBytes is the complete original value's length in bytes.
	FullBytes uint64
}

// The dotted paths of the four bounded fields, the only keys Truncated may
// carry, in the order they are serialized.
const (
	PathCallerIdentity       = "caller_identity"
	PathRequestedServiceName = "requested.service_name"
	PathRequestedHost        = "requested.host"
	PathOutcomeDetail        = "outcome.detail"
)

// truncPaths lists the bounded fields' paths in serialization order.
var truncPaths = [...]string{PathCallerIdentity, PathRequestedServiceName, PathRequestedHost, PathOutcomeDetail}

// Record is one audit line. One type carries all three phases; which
// optional fields are present is fixed by the phase (see Validate). A
// Record is a plain value: it is not safe to mutate concurrently, but the
// store never mutates a Record passed to it.
type Record struct {
	// Phase is required.
	Phase Phase
	// TS is the record's instant. The store canonicalises it to UTC
	// millisecond precision on write; if zero, the store stamps its clock.
	TS time.Time
	// RequestID pairs an intent with its outcome; required on intent and
	// outcome records, empty on limited records. 1 to MaxRequestIDBytes
	// bytes of printable ASCII.
	RequestID string
	// Verb is required on every phase.
	Verb limiter.Verb
	// CallerIdentity is the caller's identity as the transport derived it,
	// written as given (a required key: even "" is written, not omitted);
	// bounded to MaxFieldBytes by the store.
	CallerIdentity string
	// Requested is required on intent and outcome records, nil on limited.
	Requested *Requested
	// RegistrationID is the derived registration id; "" means not derived
	// (the key is omitted). Never set on limited records.
	RegistrationID string
	// Outcome is required on outcome records and nil otherwise.
	Outcome *Outcome
	// LimitedBucket is the bucket that had no token; meaningful only on
	// limited records. On intent and outcome records it must be left at its
	// zero value.
	LimitedBucket limiter.Bucket
	// Count is how many limited invocations a limited record coalesces,
	// at least 1; zero on other phases.
	Count uint64
	// WindowStart and WindowEnd bound a limited record's coalescing window
	// (WindowStart <= WindowEnd, both canonicalised like TS); zero on other
	// phases.
	WindowStart, WindowEnd time.Time
	// Truncated is filled by the store's field bound, keyed by the cut
	// field's dotted path (PathCallerIdentity, ...). Callers leave it nil;
	// records returned by Unmarshal carry what the line carried.
	Truncated map[string]Truncation
}
