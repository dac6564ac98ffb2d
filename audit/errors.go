package audit

import (
	"errors"
	"fmt"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Sentinel errors. Each typed error below matches one of these with
// errors.Is.
var (
	// ErrInvalidRecord matches every validation failure of a record handed
	// to Marshal or Store.Append (*PhaseError, *FieldError): a bug in the
	// caller, not an I/O condition.
	ErrInvalidRecord = errors.New("audit: invalid record")
	// ErrRecordTooLarge matches *TooLargeError: a serialized line larger
	// than the store's maximum file size, refused before the file is
	// touched.
	ErrRecordTooLarge = errors.New("audit: record larger than the maximum file size")
	// ErrClosed is returned by Store.Append after Store.Close.
	ErrClosed = errors.New("audit: store closed")
	// ErrBroken is returned (wrapped, with the original cause) by every
	// Store.Append after a failed write could not be rolled back: the store
	// refuses to write after a line it could not remove. Reopening the store
	// (a restart) terminates the torn line and resumes.
	ErrBroken = errors.New("audit: store unusable after a failed rollback")
	// ErrMalformed matches every *DecodeError returned by Unmarshal.
	ErrMalformed = errors.New("audit: malformed record")
	// ErrUnsafeStore matches *UnsafeStoreError: the store's directory or a
	// file in it is a symlink, of the wrong type, or too permissive.
	ErrUnsafeStore = errors.New("audit: unsafe record store")
)

// PhaseError reports a record whose fields do not match its phase: a field
// the phase requires is missing, or one it forbids is present, or a limited
// record's count or window is inconsistent.
type PhaseError struct {
	// Phase is the record's phase.
	Phase Phase
	// Field is the dotted key path, e.g. "request_id" or "outcome.reason".
	Field string
	// Missing is true when the phase requires Field and it is absent.
	Missing bool
	// Problem says what is wrong, e.g. "is required" or "must be absent".
	Problem string
}

func (e *PhaseError) Error() string {
	return fmt.Sprintf("audit: %s record: %s %s", e.Phase, e.Field, e.Problem)
}

// Is makes a *PhaseError match ErrInvalidRecord.
func (e *PhaseError) Is(target error) bool { return target == ErrInvalidRecord }

// FieldError reports a field whose value breaks its own rule (an unknown
// enum value, an out-of-bound length, a forbidden character), whatever the
// phase.
type FieldError struct {
	// Field is the dotted key path, e.g. "requested.instance".
	Field string
	// Problem says what is wrong; it never quotes the value.
	Problem string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("audit: field %s %s", e.Field, e.Problem)
}

// Is makes a *FieldError match ErrInvalidRecord.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidRecord }

// TooLargeError reports a serialized line larger than the store's maximum
// file size. It matches ErrRecordTooLarge.
type TooLargeError struct {
	// LineBytes is the serialized line's size, '\n' included.
	LineBytes uint64
	// MaxFileBytes is the store's configured maximum file size.
	MaxFileBytes uint64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("audit: record line of %d bytes exceeds audit_max_file_bytes %d", e.LineBytes, e.MaxFileBytes)
}

// Is makes a *TooLargeError match ErrRecordTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrRecordTooLarge }

// WriteError reports an append that failed in the file system. The store
// removed whatever part of the line it had written before returning it, so
// the file holds only whole lines.
type WriteError struct {
	// Op names the failed step: "write", "sync", "sync directory", "rotate",
	// "reopen", "check" (the open record directory is no longer private) or
	// "refused" (Store.Refuse holds every append).
	Op string
	// Err is the underlying error.
	Err error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("audit: append failed at %s (nothing written): %v", e.Op, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// UnsafeStoreError reports a store path that Open or Scan refuses to use.
// It matches ErrUnsafeStore.
type UnsafeStoreError struct {
	// Path is the refused directory or file.
	Path string
	// Problem says why, e.g. "is a symlink" or "has mode 0775 (group/world-writable)".
	Problem string
}

func (e *UnsafeStoreError) Error() string {
	return fmt.Sprintf("audit: refusing %s: %s", e.Path, e.Problem)
}

// Is makes an *UnsafeStoreError match ErrUnsafeStore.
func (e *UnsafeStoreError) Is(target error) bool { return target == ErrUnsafeStore }

// Rule names the reader rule a malformed line broke. Its string is the
// stable spelling shown by the scan report.
type Rule string

// The reader's malformed-line rules. Rules are evaluated per phase: a
// limited line that omits request_id, requested and registration_id is
// complete, and carries no request_id that could be a duplicate.
const (
	// RuleOversizedLine: a line longer than MaxRecordBytes; it is skipped
	// without being held in memory whole.
	RuleOversizedLine Rule = "oversized_line"
	// RuleTornFinalLine: a file's last line lacks its '\n' (a torn write).
	RuleTornFinalLine Rule = "torn_final_line"
	// RuleInvalidUTF8: the line is not valid UTF-8 (the writer escapes
	// every invalid byte).
	RuleInvalidUTF8 Rule = "invalid_utf8"
	// RuleInvalidJSON: not one JSON object (syntax error, trailing data,
	// not an object).
	RuleInvalidJSON Rule = "invalid_json"
	// RuleUnknownKey: a key the format does not define, at any level.
	RuleUnknownKey Rule = "unknown_key"
	// RuleDuplicateKey: the same key twice in one object.
	RuleDuplicateKey Rule = "duplicate_key"
	// RuleKeyOrder: keys not in the format's order.
	RuleKeyOrder Rule = "key_order"
	// RuleNullValue: a null value (optional keys are omitted, never null).
	RuleNullValue Rule = "null_value"
	// RuleWrongType: a value of the wrong JSON type.
	RuleWrongType Rule = "wrong_type"
	// RuleWrongVersion: record_version other than 1.
	RuleWrongVersion Rule = "wrong_version"
	// RuleNonCanonicalTimestamp: ts, window_start or window_end not spelled
	// exactly 2006-01-02T15:04:05.000Z.
	RuleNonCanonicalTimestamp Rule = "non_canonical_timestamp"
	// RuleMissingField: a key this record's phase requires is absent.
	RuleMissingField Rule = "missing_field"
	// RulePhaseInconsistency: a key this record's phase forbids is present,
	// or a limited record's count or window is inconsistent.
	RulePhaseInconsistency Rule = "phase_inconsistency"
	// RuleInvalidValue: a value breaks its field's rule (unknown enum
	// spelling, bound, character set, empty optional string, truncation
	// entry).
	RuleInvalidValue Rule = "invalid_value"
	// RuleNonCanonicalEncoding: a well-formed record whose bytes differ from
	// what the writer produces for it (whitespace, escaping, number form).
	RuleNonCanonicalEncoding Rule = "non_canonical_encoding"
	// RuleDuplicateRequestID: a second intent, or a second outcome, with a
	// request_id already seen in that phase. Scan only.
	RuleDuplicateRequestID Rule = "duplicate_request_id"
)

// DecodeError reports a line Unmarshal rejects. It matches ErrMalformed and
// unwraps to the underlying *PhaseError, *FieldError or syntax error, if any.
type DecodeError struct {
	// Rule is the reader rule the line broke.
	Rule Rule
	// Field is the dotted key path concerned, when there is one.
	Field string
	// Err is the underlying error, when there is one.
	Err error
}

func (e *DecodeError) Error() string {
	msg := "audit: malformed record (" + string(e.Rule) + ")"
	if e.Field != "" {
		msg += ": " + e.Field
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *DecodeError) Unwrap() error { return e.Err }

// detail is the error without its prefix and rule, for the scan report.
func (e *DecodeError) detail() string {
	switch {
	case e.Field != "" && e.Err != nil:
		return e.Field + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	}
	return e.Field
}

// Is makes a *DecodeError match ErrMalformed.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// quoteBounded quotes an attacker-influenced string for an error message:
// ASCII-only, at most 40 bytes of the original, so messages stay one short
// line whatever the input.
var quoteBounded = vocab.QuoteBounded
