package audit

import (
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// RecordVersion is the value of every line's record_version key. The
// counted (limited) record was added as a third phase at this same version,
// its policy and shadow keys and the admin phase later, each as keys a
// line of an earlier kind never carries, so every line written before
// them still reads, byte for byte; the reader counts any other version as
// malformed.
const RecordVersion = 1

// MaxFieldBytes is the bound, in bytes, on each of the
// attacker-influenced string fields (caller_identity, requested.service_name,
// requested.host, requested.reload, outcome.detail, subject.identity). A longer value is cut
// on a UTF-8 character boundary at or below this bound and described by a
// Truncation entry.
const MaxFieldBytes = 512

// MaxPolicyBytes bounds a limited record's policy: 1 to 64 bytes of
// printable ASCII (0x21 through 0x7e), the same rule as request_id. A
// caller policy's name comes from the configuration, which must hold its
// names to this rule (CheckPolicy), or their counted records could not be
// written.
const MaxPolicyBytes = 64

// DefaultPolicy is the caller policy of the [registrar] sizes. A limited
// record of the default policy omits the policy key, so every counted
// record written before caller policies existed reads as the default
// policy's, and a store that never configures one is unchanged.
const DefaultPolicy = "default"

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

// MaxCallerSubuid is the largest caller_subuid: any uint32 (0 means
// absent).
const MaxCallerSubuid = 1<<32 - 1

// Phase is a record's phase: intent, outcome, limited or admin. It is a
// closed enum: the zero value is not a phase (a zero Record is invalid),
// and every switch over it names all four.
type Phase uint8

// The four phases.
const (
	// PhaseIntent is written before any work, by every admitted invocation.
	PhaseIntent Phase = iota + 1
	// PhaseOutcome is written after the work, carrying the outcome.
	PhaseOutcome
	// PhaseLimited is the counted record: one per closed coalescing window
	// per (caller identity, verb, limited bucket, caller policy, shadow).
	// It is self-contained and never paired.
	PhaseLimited
	// PhaseAdmin is an action taken on the daemon's own state, by an
	// operator or by the daemon: who acted (caller_identity), what was done
	// (action, a closed enum) and to what (subject, whose keys the action
	// fixes). It has no verb: an admin action is not an invocation. It is
	// self-contained and never paired. See Admin.
	PhaseAdmin
)

var phases = vocab.NewEnum[Phase]("Phase", "phase", []string{
	PhaseIntent:  "intent",
	PhaseOutcome: "outcome",
	PhaseLimited: "limited",
	PhaseAdmin:   "admin",
})

// NumPhases is the number of phases; a phase's value is 1 to NumPhases, so
// per-phase arrays of NumPhases+1 are indexed by Phase.
const NumPhases = int(PhaseAdmin)

// Valid reports whether p is one of the four phases.
func (p Phase) Valid() bool { return phases.Valid(p) }

// String returns the on-disk spelling: "intent", "outcome", "limited" or
// "admin" (Phase(N) for an invalid value).
func (p Phase) String() string { return phases.String(p) }

// MarshalText implements encoding.TextMarshaler; an invalid phase is an error.
func (p Phase) MarshalText() ([]byte, error) { return phases.MarshalText(p) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// four spellings.
func (p *Phase) UnmarshalText(b []byte) error { return phases.UnmarshalText(p, b) }

// ParsePhase parses "intent", "outcome", "limited" or "admin" (exact
// spelling).
func ParsePhase(s string) (Phase, error) { return phases.Parse(s) }

// Outcome is an outcome record's result.
type Outcome struct {
	// Class is the outcome class; required.
	Class vocab.OutcomeClass
	// Reason is the refusal reason: required when Class is ClassRefused,
	// zero otherwise.
	Reason vocab.Reason
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
	// Reload is a mint's spec.reload exactly as received: the command the
	// caller asks the host to run when its credentials change, so the
	// record shows what a caller asked to have run. "" means the spec
	// carried none (or the verb has no spec: a deregister never carries
	// one) and the key is omitted. Bounded to MaxFieldBytes.
	Reload string
}

// Truncation describes a field the store cut to MaxFieldBytes.
type Truncation struct {
	// FullSHA256 is the lowercase hex SHA-256 of the complete original
	// value.
	FullSHA256 string
	// FullBytes is the complete original value's length in bytes.
	FullBytes uint64
}

// The dotted paths of the bounded fields, the only keys Truncated may
// carry, in the order they are serialized.
const (
	PathCallerIdentity       = "caller_identity"
	PathRequestedServiceName = "requested.service_name"
	PathRequestedHost        = "requested.host"
	PathRequestedReload      = "requested.reload"
	PathOutcomeDetail        = "outcome.detail"
	PathSubjectIdentity      = "subject.identity"
)

// truncPaths lists the bounded fields' paths in serialization order.
var truncPaths = [...]string{PathCallerIdentity, PathRequestedServiceName, PathRequestedHost, PathRequestedReload, PathOutcomeDetail, PathSubjectIdentity}

// Record is one audit line. One type carries all four phases; which
// optional fields are present is fixed by the phase (see Validate), and on
// an admin record by its action. A Record is a plain value: it is not safe
// to mutate concurrently, but the store never mutates a Record passed to
// it.
type Record struct {
	// Phase is required.
	Phase Phase
	// TS is the record's instant. The store canonicalises it to UTC
	// millisecond precision on write; if zero, the store stamps its clock.
	TS time.Time
	// RequestID pairs an intent with its outcome; required on intent and
	// outcome records, empty on limited and admin records. 1 to
	// MaxRequestIDBytes bytes of printable ASCII.
	RequestID string
	// Verb is required on intent, outcome and limited records. An admin
	// record has none: leave it at its zero value.
	Verb vocab.Verb
	// CallerIdentity is the caller's identity as the transport derived it,
	// written as given (a required key: even "" is written, not omitted);
	// bounded to MaxFieldBytes by the store. On an admin record it is who
	// acted: the operator's identity on the admin socket, or the daemon's
	// own for an action it took by itself.
	CallerIdentity string
	// CallerSubuid is, on intent and outcome records, the unix peer uid
	// the kernel reported when the transport identified the caller as the
	// owner of the subordinate uid range holding it (CallerIdentity is
	// then the owner's): a diagnostic, never part of a key. 1 to
	// 4294967295; 0 means absent (the key is omitted). Zero on limited and
	// admin records, which count or act per identity.
	CallerSubuid uint32
	// Requested is required on intent and outcome records, nil on limited.
	Requested *Requested
	// RegistrationID is the derived registration id; "" means not derived
	// (the key is omitted). Never set on limited records.
	RegistrationID string
	// Outcome is required on outcome records and nil otherwise.
	Outcome *Outcome
	// LimitedBucket is the bucket that had no token; meaningful only on
	// limited records. On the other phases it must be left at its zero
	// value.
	LimitedBucket vocab.Bucket
	// Policy is, on a limited record, the caller policy whose sizes the
	// bucket had: "" or DefaultPolicy for the [registrar] sizes (the key is
	// then omitted, and a decoded record carries ""), else 1 to
	// MaxPolicyBytes bytes of printable ASCII. Empty on the other phases.
	Policy string
	// Shadow reports, on a limited record, that it counts shadow charges:
	// calls the policy's shadow (candidate) sizes would have limited, none
	// of which was limited for that reason. A shadow window is never merged
	// with an enforced one. False on the other phases.
	Shadow bool
	// Count is how many limited invocations a limited record coalesces,
	// at least 1; zero on other phases.
	Count uint64
	// WindowStart and WindowEnd bound a limited record's coalescing window
	// (WindowStart <= WindowEnd, both canonicalised like TS); zero on other
	// phases.
	WindowStart, WindowEnd time.Time
	// Admin is required on admin records (its action and subject) and nil
	// otherwise.
	Admin *Admin
	// Truncated is filled by the store's field bound, keyed by the cut
	// field's dotted path (PathCallerIdentity, ...). Callers leave it nil;
	// records returned by Unmarshal carry what the line carried.
	Truncated map[string]Truncation
	// Chain is, on a line of a sealed store, the line's chain value: 32
	// lowercase hex digits, the first 16 bytes of the HMAC-SHA256, under
	// the current epoch's sealing key, of the previous line's chain value
	// and this line's bytes without it (seal.go). The store writes it
	// last, on every line it writes while sealed; a store never sealed
	// writes none, and its lines are byte for byte what they were before
	// sealing existed. Callers leave it empty (Marshal refuses it); records
	// returned by Unmarshal carry what the line carried.
	Chain string
}

// PolicyName is r's caller policy as a name: DefaultPolicy for the
// default (Policy "" or DefaultPolicy), else Policy.
func (r *Record) PolicyName() string {
	if r.Policy == "" {
		return DefaultPolicy
	}
	return r.Policy
}

// CheckPolicy reports whether name can be a limited record's policy: 1 to
// MaxPolicyBytes bytes of printable ASCII. The configuration checks its
// caller policies' names with it, so every policy's counted records can be
// written.
func CheckPolicy(name string) error {
	if len(name) == 0 || len(name) > MaxPolicyBytes {
		return &FieldError{Field: "policy", Problem: "is not 1 to 64 bytes long"}
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x21 || c > 0x7e {
			return &FieldError{Field: "policy", Problem: "has a byte outside printable ASCII"}
		}
	}
	return nil
}
