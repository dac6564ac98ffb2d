package audit

import (
	"time"
	"unicode/utf8"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Validate checks r's phase consistency and the rules of every field the
// store does not cut. It is what Store.Append and Marshal check after
// applying the field bound, minus the two things the store supplies: a zero
// TS is accepted (the store stamps it) and over-long attacker-influenced
// strings are accepted (the store cuts them).
//
// Phase consistency: an intent has request_id and requested (whose reload
// only a mint's may carry), and no outcome, limited or admin fields
// (caller_subuid is for intents and outcomes only); an outcome has the
// same plus an
// outcome; a limited record has no request_id, requested, registration_id,
// outcome or admin fields, and has a valid limited bucket, count >= 1 and
// window_start <= window_end, and may have a policy and the shadow mark; an
// admin record has no verb and none of the fields of the other phases, and
// has an Admin whose action fixes its subject (see Admin). A violation is a
// *PhaseError naming the field; a field breaking its own rule is a
// *FieldError. Both match ErrInvalidRecord.
func (r *Record) Validate() error {
	if r == nil {
		return &FieldError{Field: "record", Problem: "is nil"}
	}
	return r.validate(false)
}

// validate checks r. stored additionally requires what every serialized
// record has: a ts, and bounded fields within MaxFieldBytes.
func (r *Record) validate(stored bool) error {
	if !r.Phase.Valid() {
		return &FieldError{Field: "phase", Problem: "is not intent, outcome, limited or admin"}
	}
	if r.TS.IsZero() {
		if stored {
			return &PhaseError{Phase: r.Phase, Field: "ts", Missing: true, Problem: "is required"}
		}
	} else if err := checkTime("ts", r.TS); err != nil {
		return err
	}
	if r.Phase != PhaseAdmin && !r.Verb.Valid() {
		return &FieldError{Field: "verb", Problem: "is not mint or deregister"}
	}
	if stored {
		if err := checkBounded(PathCallerIdentity, r.CallerIdentity); err != nil {
			return err
		}
	}
	if r.CallerSubuid != 0 && r.Phase != PhaseIntent && r.Phase != PhaseOutcome {
		return &PhaseError{Phase: r.Phase, Field: "caller_subuid", Problem: "must be absent"}
	}
	var err error
	switch r.Phase {
	case PhaseIntent, PhaseOutcome:
		err = r.validatePaired(stored)
	case PhaseLimited:
		err = r.validateLimited(stored)
	case PhaseAdmin:
		err = r.validateAdmin(stored)
	}
	if err != nil {
		return err
	}
	if r.Chain != "" && !isLowerHex(r.Chain, ChainHexLen) {
		return &FieldError{Field: "chain", Problem: "is not 32 lowercase hex digits"}
	}
	return r.validateTruncated()
}

// validatePaired checks the intent and outcome phases.
func (r *Record) validatePaired(stored bool) error {
	if r.RequestID == "" {
		return &PhaseError{Phase: r.Phase, Field: "request_id", Missing: true, Problem: "is required"}
	}
	if err := checkRequestID(r.RequestID); err != nil {
		return err
	}
	if r.Requested == nil {
		return &PhaseError{Phase: r.Phase, Field: "requested", Missing: true, Problem: "is required"}
	}
	if stored {
		if err := checkBounded(PathRequestedServiceName, r.Requested.ServiceName); err != nil {
			return err
		}
		if err := checkBounded(PathRequestedHost, r.Requested.Host); err != nil {
			return err
		}
		if err := checkBounded(PathRequestedReload, r.Requested.Reload); err != nil {
			return err
		}
	}
	if r.Requested.Reload != "" && r.Verb != vocab.Mint {
		// Only a mint has a spec: a deregister record carrying a command
		// to run is not the writer's.
		return &PhaseError{Phase: r.Phase, Field: PathRequestedReload, Problem: "must be absent on a " + r.Verb.String() + " record"}
	}
	if r.RegistrationID != "" {
		if err := checkRegistrationID(r.RegistrationID); err != nil {
			return err
		}
	}
	switch r.Phase {
	case PhaseIntent:
		if r.Outcome != nil {
			return &PhaseError{Phase: r.Phase, Field: "outcome", Problem: "must be absent"}
		}
	case PhaseOutcome:
		if err := r.validateOutcome(stored); err != nil {
			return err
		}
	case PhaseLimited, PhaseAdmin:
		// Not reached: validate routes these phases elsewhere.
	}
	if r.Admin != nil {
		return &PhaseError{Phase: r.Phase, Field: "action", Problem: "must be absent"}
	}
	return r.noLimitedFields()
}

// validateOutcome checks an outcome record's outcome.
func (r *Record) validateOutcome(stored bool) error {
	o := r.Outcome
	if o == nil {
		return &PhaseError{Phase: r.Phase, Field: "outcome", Missing: true, Problem: "is required"}
	}
	if !o.Class.Valid() {
		return &FieldError{Field: "outcome.class", Problem: "is not a known outcome class"}
	}
	if o.Class == vocab.ClassRefused {
		if o.Reason == 0 {
			return &PhaseError{Phase: r.Phase, Field: "outcome.reason", Missing: true, Problem: "is required on a refused outcome"}
		}
		if !o.Reason.Valid() {
			return &FieldError{Field: "outcome.reason", Problem: "is not a known refusal reason"}
		}
		if stored && o.Detail != "" {
			if err := checkBounded(PathOutcomeDetail, o.Detail); err != nil {
				return err
			}
		}
		return nil
	}
	if o.Reason != 0 {
		return &PhaseError{Phase: r.Phase, Field: "outcome.reason", Problem: "must be absent unless the class is refused"}
	}
	if o.Detail != "" {
		return &PhaseError{Phase: r.Phase, Field: "outcome.detail", Problem: "must be absent unless the class is refused"}
	}
	return nil
}

// noLimitedFields checks that an intent, outcome or admin record carries no
// limited-only field. LimitedBucket's zero value is a valid bucket, so only
// a non-zero value is detectable here; the reader also checks key presence.
func (r *Record) noLimitedFields() error {
	switch {
	case r.LimitedBucket != 0:
		return &PhaseError{Phase: r.Phase, Field: "limited_bucket", Problem: "must be absent"}
	case r.Policy != "":
		return &PhaseError{Phase: r.Phase, Field: "policy", Problem: "must be absent"}
	case r.Shadow:
		return &PhaseError{Phase: r.Phase, Field: "shadow", Problem: "must be absent"}
	case r.Count != 0:
		return &PhaseError{Phase: r.Phase, Field: "count", Problem: "must be absent"}
	case !r.WindowStart.IsZero():
		return &PhaseError{Phase: r.Phase, Field: "window_start", Problem: "must be absent"}
	case !r.WindowEnd.IsZero():
		return &PhaseError{Phase: r.Phase, Field: "window_end", Problem: "must be absent"}
	}
	return nil
}

// validateLimited checks the limited (counted) phase. stored: a policy of
// DefaultPolicy is written by omitting the key, so a record read with it
// spelt out is not the writer's.
func (r *Record) validateLimited(stored bool) error {
	switch {
	case r.Admin != nil:
		return &PhaseError{Phase: r.Phase, Field: "action", Problem: "must be absent"}
	case r.RequestID != "":
		return &PhaseError{Phase: r.Phase, Field: "request_id", Problem: "must be absent"}
	case r.Requested != nil:
		return &PhaseError{Phase: r.Phase, Field: "requested", Problem: "must be absent"}
	case r.RegistrationID != "":
		return &PhaseError{Phase: r.Phase, Field: "registration_id", Problem: "must be absent"}
	case r.Outcome != nil:
		return &PhaseError{Phase: r.Phase, Field: "outcome", Problem: "must be absent"}
	case !r.LimitedBucket.Valid():
		return &FieldError{Field: "limited_bucket", Problem: "is not predecision_refusal or admission"}
	case r.Count < 1:
		return &PhaseError{Phase: r.Phase, Field: "count", Problem: "must be at least 1"}
	case r.WindowStart.IsZero():
		return &PhaseError{Phase: r.Phase, Field: "window_start", Missing: true, Problem: "is required"}
	case r.WindowEnd.IsZero():
		return &PhaseError{Phase: r.Phase, Field: "window_end", Missing: true, Problem: "is required"}
	}
	if err := checkTime("window_start", r.WindowStart); err != nil {
		return err
	}
	if err := checkTime("window_end", r.WindowEnd); err != nil {
		return err
	}
	if canonicalTime(r.WindowEnd).Before(canonicalTime(r.WindowStart)) {
		return &PhaseError{Phase: r.Phase, Field: "window_end", Problem: "is before window_start"}
	}
	switch {
	case r.Policy == "":
	case r.Policy == DefaultPolicy:
		if stored {
			return &FieldError{Field: "policy", Problem: `is "default", which is written by omitting the key`}
		}
	default:
		return CheckPolicy(r.Policy)
	}
	return nil
}

// validateTruncated checks the Truncated entries: known paths only, each
// describing a field the record carries at a cut length, with a well-formed
// digest and an original length above the bound.
func (r *Record) validateTruncated() error {
	known := 0
	for _, path := range truncPaths {
		t, ok := r.Truncated[path]
		if !ok {
			continue
		}
		known++
		val, present := r.boundedField(path)
		if !present {
			return &PhaseError{Phase: r.Phase, Field: "truncated." + path, Problem: "describes a field the record does not carry"}
		}
		if !isLowerHex(t.FullSHA256, 64) {
			return &FieldError{Field: "truncated." + path + ".full_sha256", Problem: "is not 64 lowercase hex digits"}
		}
		if t.FullBytes <= MaxFieldBytes {
			return &FieldError{Field: "truncated." + path + ".full_bytes", Problem: "is not above the 512-byte bound"}
		}
		// A cut drops at most one straddling character (at most 3 bytes
		// below the bound); the decoded value is never shorter than the raw
		// prefix.
		if len(val) < MaxFieldBytes-(utf8.UTFMax-1) {
			return &FieldError{Field: "truncated." + path, Problem: "describes a value shorter than any cut prefix"}
		}
	}
	if len(r.Truncated) != known {
		return &FieldError{Field: "truncated", Problem: "has a key that is not a bounded field path"}
	}
	return nil
}

// boundedField returns the value at one of the bounded paths (truncPaths), and
// whether the record carries it.
func (r *Record) boundedField(path string) (string, bool) {
	switch path {
	case PathCallerIdentity:
		return r.CallerIdentity, true
	case PathRequestedServiceName:
		if r.Requested != nil {
			return r.Requested.ServiceName, true
		}
	case PathRequestedHost:
		if r.Requested != nil {
			return r.Requested.Host, true
		}
	case PathRequestedReload:
		if r.Requested != nil && r.Requested.Reload != "" {
			return r.Requested.Reload, true
		}
	case PathOutcomeDetail:
		if r.Outcome != nil && r.Outcome.Detail != "" {
			return r.Outcome.Detail, true
		}
	case PathSubjectIdentity:
		if r.Admin != nil && r.Admin.Action.uses(subjIdentity) {
			return r.Admin.Identity, true
		}
	}
	return "", false
}

// checkBounded reports a bounded field longer than MaxFieldBytes. The
// length counts each invalid byte and each U+FFFD as one byte: the writer
// escapes an invalid byte as \ufffd, so a decoded U+FFFD may stand for one
// raw byte, and this lower bound never rejects what the writer wrote.
func checkBounded(path, s string) error {
	if len(s) <= MaxFieldBytes {
		return nil
	}
	n := 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError {
			n++
		} else {
			n += w
		}
		i += w
	}
	if n > MaxFieldBytes {
		return &FieldError{Field: path, Problem: "exceeds the 512-byte bound"}
	}
	return nil
}

// checkRequestID enforces 1..MaxRequestIDBytes bytes of printable ASCII.
func checkRequestID(s string) error {
	if len(s) == 0 || len(s) > MaxRequestIDBytes {
		return &FieldError{Field: "request_id", Problem: "is not 1 to 64 bytes long"}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return &FieldError{Field: "request_id", Problem: "has a byte outside printable ASCII"}
		}
	}
	return nil
}

// checkRegistrationID enforces 1..MaxRegistrationIDBytes bytes of [a-z0-9-].
func checkRegistrationID(s string) error {
	if len(s) == 0 || len(s) > MaxRegistrationIDBytes {
		return &FieldError{Field: "registration_id", Problem: "is not 1 to 131 bytes long"}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return &FieldError{Field: "registration_id", Problem: "has a byte outside [a-z0-9-]"}
		}
	}
	return nil
}

// checkTime enforces a four-digit year, so the canonical spelling is
// exactly 24 bytes.
func checkTime(field string, t time.Time) error {
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return &FieldError{Field: field, Problem: "has a year outside 0001..9999"}
	}
	return nil
}

// isLowerHex reports whether s is exactly n lowercase hex digits.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
