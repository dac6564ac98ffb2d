package wire

import (
	"strconv"
)

// FieldBound is the documented maximum length, in bytes, of one
// caller-controlled string member that is stored or recorded. A plain
// value, safe for concurrent use.
type FieldBound struct {
	// Member is the member's path as a detail names it: "host",
	// "spec.reload".
	Member string
	// MaxBytes is the longest accepted value, in bytes (after JSON
	// unescaping).
	MaxBytes int
}

// fieldBounds is the one table of the maxima (FieldBounds returns a
// copy). A longer value is answered RequestMalformed naming the member, before any verb runs: never charged,
// never stored. The label-like members are bounded well above the
// registrar's own DNS-label rule (63), so a label that is merely wrong
// still gets the verbs' real refusal; the bound is what keeps a caller from
// making the records and the registry grow.
var fieldBounds = [...]FieldBound{
	{"service_name", 255},
	{"host", 255},
	{"component", 255},
	{"spec.component", 255},
	{"spec.service_name", 255},
	{"spec.reload", 1024},
	{"idempotency_key", 128},
}

// FieldBounds returns the maxima, in the order of the request's members.
func FieldBounds() []FieldBound {
	out := make([]FieldBound, len(fieldBounds))
	copy(out, fieldBounds[:])
	return out
}

// MaxIdentityBytes bounds a caller identity derived from a client
// certificate ("registrar-client:uri:" or "registrar-client:dns:" and the
// canonical SAN): the audit records and the
// limiter's map hold it. A longer one leaves the connection without an
// identity (no_identity).
const MaxIdentityBytes = 512

// fieldMax returns member's maximum, or -1 when the member is not bounded
// here (it is not a stored string).
func fieldMax(member string) int {
	for _, b := range fieldBounds {
		if b.Member == member {
			return b.MaxBytes
		}
	}
	return -1
}

// bounded is the decoder's one check of a decoded string member: a value
// over its maximum is a member problem naming the member and both lengths
// (never the value), and decodes as "".
func (d *decodeState) bounded(member, s string) string {
	if problem := checkField(member, s); problem != "" {
		d.memberErr("%s", problem)
		return ""
	}
	return s
}

// checkField returns the problem with s as the value of member, or "".
func checkField(member, s string) string {
	if limit := fieldMax(member); limit >= 0 && len(s) > limit {
		return member + ": longer than " + strconv.Itoa(limit) + " bytes (got " + strconv.Itoa(len(s)) + ")"
	}
	return ""
}
