package audit

import (
	"errors"
	"time"
)

// Top-level keys in serialization order; a key's index is its order.
const (
	keyRecordVersion = iota
	keyPhase
	keyTS
	keyRequestID
	keyVerb
	keyCallerIdentity
	keyCallerSubuid
	keyRequested
	keyRegistrationID
	keyOutcome
	keyLimitedBucket
	keyPolicy
	keyShadow
	keyCount
	keyWindowStart
	keyWindowEnd
	keyAction
	keySubject
	keyTruncated
	keyChain
	numKeys
)

var topKeys = [numKeys]string{
	"record_version", "phase", "ts", "request_id", "verb", "caller_identity", "caller_subuid", "requested",
	"registration_id", "outcome", "limited_bucket", "policy", "shadow", "count", "window_start", "window_end",
	"action", "subject", "truncated", "chain",
}

// The nested objects' keys, likewise in serialization order: each
// decoder's seen-set and case labels are sized and named from these, not
// counted by hand.
const (
	reqServiceName = iota
	reqHost
	reqInstance
	reqReload
	numRequestedKeys
)

const (
	outClass = iota
	outReason
	outDetail
	numOutcomeKeys
)

const (
	truncFullSHA256 = iota
	truncFullBytes
	numTruncationKeys
)

var (
	requestedKeys  = [numRequestedKeys]string{reqServiceName: "service_name", reqHost: "host", reqInstance: "instance", reqReload: "reload"}
	outcomeKeys    = [numOutcomeKeys]string{outClass: "class", outReason: "reason", outDetail: "detail"}
	truncationKeys = [numTruncationKeys]string{truncFullSHA256: "full_sha256", truncFullBytes: "full_bytes"}
)

// Unmarshal decodes one line strictly, as the reader does. The line may end
// in one '\n'. Every rule is checked: size (MaxRecordBytes), UTF-8, one JSON
// object with no trailing data, no unknown or duplicate keys at any level,
// keys in order, no nulls, value types, record_version 1, canonical
// timestamps, per-phase key presence, every field rule, and finally that the
// line is byte for byte what the writer produces for the decoded record.
//
// A rejected line yields a *DecodeError (matching ErrMalformed) naming the
// rule. Unmarshal never panics and is safe for concurrent use.
//
// A line in the store's exact spelling is read in a single pass (see
// fastdecode.go); any other line, every rejected one included, by the
// token decoder, which names the rule.
func Unmarshal(line []byte) (*Record, error) {
	var ld lineDecoder
	if r := ld.canonical(line); r != nil {
		c := *r // the record escapes: give it storage of its own
		if r.Requested != nil {
			q := *r.Requested
			c.Requested = &q
		}
		if r.Outcome != nil {
			o := *r.Outcome
			c.Outcome = &o
		}
		// The single pass never takes an admin line (tokendecode.go
		// decodes its subject), so c.Admin is nil.
		return &c, nil
	}
	return unmarshalTokens(line)
}

// fieldDecodeError maps a validation error to its reader rule.
func fieldDecodeError(err error) error {
	var pe *PhaseError
	if errors.As(err, &pe) {
		if pe.Missing {
			return &DecodeError{Rule: RuleMissingField, Field: pe.Field, Err: err}
		}
		return &DecodeError{Rule: RulePhaseInconsistency, Field: pe.Field, Err: err}
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return &DecodeError{Rule: RuleInvalidValue, Field: fe.Field, Err: err}
	}
	return &DecodeError{Rule: RuleInvalidValue, Err: err}
}

// checkPresence applies the per-phase key presence rules, which the
// decoded Record alone cannot express (a zero LimitedBucket or Verb, a
// count of 0). policy and shadow are optional on a limited record.
func checkPresence(r *Record, present [numKeys]bool) error {
	for _, k := range []int{keyRecordVersion, keyPhase, keyTS, keyVerb, keyCallerIdentity} {
		if k == keyVerb && r.Phase == PhaseAdmin {
			continue // an admin action is not an invocation: forbidden below
		}
		if !present[k] {
			return &DecodeError{Rule: RuleMissingField, Field: topKeys[k], Err: errors.New("is required")}
		}
	}
	var required, forbidden []int
	switch r.Phase {
	case PhaseIntent:
		required = []int{keyRequestID, keyRequested}
		forbidden = []int{keyOutcome, keyLimitedBucket, keyPolicy, keyShadow, keyCount, keyWindowStart, keyWindowEnd, keyAction, keySubject}
	case PhaseOutcome:
		required = []int{keyRequestID, keyRequested, keyOutcome}
		forbidden = []int{keyLimitedBucket, keyPolicy, keyShadow, keyCount, keyWindowStart, keyWindowEnd, keyAction, keySubject}
	case PhaseLimited:
		required = []int{keyLimitedBucket, keyCount, keyWindowStart, keyWindowEnd}
		forbidden = []int{keyRequestID, keyCallerSubuid, keyRequested, keyRegistrationID, keyOutcome, keyAction, keySubject}
	case PhaseAdmin:
		required = []int{keyAction, keySubject}
		forbidden = []int{keyRequestID, keyVerb, keyCallerSubuid, keyRequested, keyRegistrationID, keyOutcome,
			keyLimitedBucket, keyPolicy, keyShadow, keyCount, keyWindowStart, keyWindowEnd}
	}
	for _, k := range forbidden {
		if present[k] {
			return &DecodeError{Rule: RulePhaseInconsistency, Field: topKeys[k], Err: &PhaseError{Phase: r.Phase, Field: topKeys[k], Problem: "must be absent"}}
		}
	}
	for _, k := range required {
		if !present[k] {
			return &DecodeError{Rule: RuleMissingField, Field: topKeys[k], Err: &PhaseError{Phase: r.Phase, Field: topKeys[k], Missing: true, Problem: "is required"}}
		}
	}
	return nil
}

var errNonCanonicalTime = errors.New("is not spelled 2006-01-02T15:04:05.000Z (UTC, milliseconds)")

// parseTime accepts exactly TimeLayout: the parse must reformat to the same
// bytes, which rejects offsets, other precisions and out-of-range values.
func parseTime(s string) (time.Time, error) {
	if len(s) != len(TimeLayout) {
		return time.Time{}, errNonCanonicalTime
	}
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		return time.Time{}, errNonCanonicalTime
	}
	return t, nil
}
