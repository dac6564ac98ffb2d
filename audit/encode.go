package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// TimeLayout is the only timestamp spelling the store writes and the reader
// accepts: RFC 3339, UTC, exactly millisecond precision.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// maxEscapedField is a bounded field's worst-case serialized size, quotes
// excluded: every one of its MaxFieldBytes bytes escaped as a six-byte
// \u00XX (a control byte) or \ufffd (an invalid byte).
const maxEscapedField = 6 * MaxFieldBytes

// maxTruncationEntry is the worst-case size of one truncated entry's value.
const maxTruncationEntry = len(`{"full_sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","full_bytes":18446744073709551615}`)

// MaxRecordBytes is the largest serialized line the store can write, '\n'
// included: a mint's outcome record with every field at its bound and
// every bounded byte escaped at worst case, all five of its fields
// truncated, and a sealed store's chain value (ChainSuffixBytes) after
// them. A rotated admin record, whose counts could name any number
// of identities, is held to the same bound by moving its smallest counts
// into others (fit). A mint's, because requested.reload is on mint records only
// and outweighs the six bytes "deregister" has over "mint". It is a
// constant so the reader can bound its line buffer; the tests build that
// worst case, and the worst case of every other phase (an admin record has
// two bounded fields, a limited record one), and assert it.
const MaxRecordBytes = len(`{"record_version":1,"phase":"outcome","ts":"2006-01-02T15:04:05.000Z"`) +
	len(`,"request_id":""`) + 2*MaxRequestIDBytes + // printable ASCII: '"' and '\' escape to 2 bytes
	len(`,"verb":"mint"`) +
	len(`,"caller_identity":""`) + maxEscapedField +
	len(`,"caller_subuid":4294967295`) +
	len(`,"requested":{"service_name":"","host":"","instance":4294967295,"reload":""}`) + 3*maxEscapedField +
	len(`,"registration_id":""`) + MaxRegistrationIDBytes +
	len(`,"outcome":{"class":"refused","reason":"spec_identity_disagreement","detail":""}`) + maxEscapedField +
	len(`,"truncated":{"caller_identity":,"requested.service_name":,"requested.host":,"requested.reload":,"outcome.detail":}`) + 5*maxTruncationEntry +
	ChainSuffixBytes +
	len("}\n")

// ChainSuffixBytes is what a sealed store adds to each line: the chain
// key and its value, `,"chain":"` and ChainHexLen hex digits and `"`,
// written just before the line's closing brace.
const ChainSuffixBytes = len(`,"chain":""`) + ChainHexLen

// ChainHexLen is the length of a chain value in hex digits (16 bytes).
const ChainHexLen = 2 * chainBytes

// maxUnchainedBytes bounds the line Marshal produces: MaxRecordBytes less
// the chain value a sealed store adds to it. A rotated record is fitted
// to it, so that sealed it still fits MaxRecordBytes.
const maxUnchainedBytes = MaxRecordBytes - ChainSuffixBytes

// Marshal returns r's serialized line, '\n' included, exactly as the store
// writes it: the field bound applied (on a copy; r is never mutated),
// timestamps canonicalised to UTC milliseconds, phase consistency and every
// field rule checked, keys in the format's order, optional keys omitted.
//
// Marshal does not stamp a zero TS (that is the store's job) and rejects it.
// r.Truncated must be empty: the bound fills it. Errors are *PhaseError or
// *FieldError (matching ErrInvalidRecord). Marshal is safe for concurrent
// use.
func Marshal(r *Record) ([]byte, error) {
	if r == nil {
		return nil, &FieldError{Field: "record", Problem: "is nil"}
	}
	if len(r.Truncated) != 0 {
		return nil, &FieldError{Field: "truncated", Problem: "must be empty: the store's field bound fills it"}
	}
	if r.Chain != "" {
		return nil, &FieldError{Field: "chain", Problem: "must be empty: a sealed store writes it"}
	}
	c := bounded(r)
	if err := c.validate(true); err != nil {
		return nil, err
	}
	line := appendRecord(make([]byte, 0, 512), &c)
	if c.Phase == PhaseAdmin && c.Admin.Action == ActionRotated {
		line = fit(&c, line) // a rotated record's bound: its smallest counts into others
	}
	if len(line) > maxUnchainedBytes {
		// Unreachable if MaxRecordBytes is honest; the tests assert it is.
		return nil, fmt.Errorf("audit: internal error: serialized line of %d bytes exceeds MaxRecordBytes %d less a chain value", len(line), MaxRecordBytes)
	}
	return line, nil
}

// bounded returns a copy of r with the field bound applied, timestamps
// canonicalised, the default policy written as no policy and an admin
// subject's lists in vocab order. Requested, Outcome and Admin are copied
// too, so nothing reachable from r is modified.
func bounded(r *Record) Record {
	c := *r
	c.Truncated = nil
	c.TS = canonicalTime(c.TS)
	c.WindowStart = canonicalTime(c.WindowStart)
	c.WindowEnd = canonicalTime(c.WindowEnd)
	c.CallerIdentity = c.cut(PathCallerIdentity, c.CallerIdentity)
	if r.Requested != nil {
		req := *r.Requested
		req.ServiceName = c.cut(PathRequestedServiceName, req.ServiceName)
		req.Host = c.cut(PathRequestedHost, req.Host)
		req.Reload = c.cut(PathRequestedReload, req.Reload)
		c.Requested = &req
	}
	if r.Outcome != nil {
		o := *r.Outcome
		o.Detail = c.cut(PathOutcomeDetail, o.Detail)
		c.Outcome = &o
	}
	if c.Policy == DefaultPolicy {
		c.Policy = "" // written by omitting the key
	}
	if r.Admin != nil {
		c.Admin = c.boundedAdmin(r.Admin)
	}
	return c
}

// cut applies the bound to one field: a value over MaxFieldBytes is cut on a
// UTF-8 character boundary at or below the bound (an invalid byte counts as
// a one-byte character, so a straddling multibyte character is dropped, not
// split), and a Truncation of the complete original is recorded.
func (c *Record) cut(path, s string) string {
	if len(s) <= MaxFieldBytes {
		return s
	}
	n := 0
	for n < len(s) {
		_, w := utf8.DecodeRuneInString(s[n:])
		if n+w > MaxFieldBytes {
			break
		}
		n += w
	}
	sum := sha256.Sum256([]byte(s))
	if c.Truncated == nil {
		c.Truncated = make(map[string]Truncation, 1)
	}
	c.Truncated[path] = Truncation{FullSHA256: hex.EncodeToString(sum[:]), FullBytes: uint64(len(s))}
	return s[:n]
}

// canonicalTime is t in UTC, truncated to the millisecond (the zero time
// stays zero).
func canonicalTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// appendRecord appends r's line to dst. r must be bounded and valid.
func appendRecord(dst []byte, r *Record) []byte {
	dst = append(dst, `{"record_version":1,"phase":"`...)
	dst = append(dst, r.Phase.String()...)
	dst = append(dst, `","ts":`...)
	dst = appendTime(dst, r.TS)
	if r.RequestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = appendString(dst, r.RequestID)
	}
	if r.Phase != PhaseAdmin {
		dst = append(dst, `,"verb":"`...)
		dst = append(dst, r.Verb.String()...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"caller_identity":`...)
	dst = appendString(dst, r.CallerIdentity)
	if r.CallerSubuid != 0 {
		dst = append(dst, `,"caller_subuid":`...)
		dst = strconv.AppendUint(dst, uint64(r.CallerSubuid), 10)
	}
	if q := r.Requested; q != nil {
		dst = append(dst, `,"requested":{"service_name":`...)
		dst = appendString(dst, q.ServiceName)
		dst = append(dst, `,"host":`...)
		dst = appendString(dst, q.Host)
		if q.Instance != 0 {
			dst = append(dst, `,"instance":`...)
			dst = strconv.AppendUint(dst, uint64(q.Instance), 10)
		}
		if q.Reload != "" {
			dst = append(dst, `,"reload":`...)
			dst = appendString(dst, q.Reload)
		}
		dst = append(dst, '}')
	}
	if r.RegistrationID != "" {
		dst = append(dst, `,"registration_id":`...)
		dst = appendString(dst, r.RegistrationID)
	}
	if o := r.Outcome; o != nil {
		dst = append(dst, `,"outcome":{"class":"`...)
		dst = append(dst, o.Class.String()...)
		dst = append(dst, '"')
		if o.Reason != 0 {
			dst = append(dst, `,"reason":"`...)
			dst = append(dst, o.Reason.String()...)
			dst = append(dst, '"')
		}
		if o.Detail != "" {
			dst = append(dst, `,"detail":`...)
			dst = appendString(dst, o.Detail)
		}
		dst = append(dst, '}')
	}
	switch r.Phase {
	case PhaseLimited:
		dst = append(dst, `,"limited_bucket":"`...)
		dst = append(dst, r.LimitedBucket.String()...)
		dst = append(dst, '"')
		if r.Policy != "" {
			dst = append(dst, `,"policy":`...)
			dst = appendString(dst, r.Policy)
		}
		if r.Shadow {
			dst = append(dst, `,"shadow":true`...)
		}
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendUint(dst, r.Count, 10)
		dst = append(dst, `,"window_start":`...)
		dst = appendTime(dst, r.WindowStart)
		dst = append(dst, `,"window_end":`...)
		dst = appendTime(dst, r.WindowEnd)
	case PhaseAdmin:
		dst = appendAdmin(dst, r.Admin)
	case PhaseIntent, PhaseOutcome:
	}
	if len(r.Truncated) != 0 {
		dst = append(dst, `,"truncated":{`...)
		first := true
		for _, path := range truncPaths {
			t, ok := r.Truncated[path]
			if !ok {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, '"')
			dst = append(dst, path...)
			dst = append(dst, `":{"full_sha256":"`...)
			dst = append(dst, t.FullSHA256...)
			dst = append(dst, `","full_bytes":`...)
			dst = strconv.AppendUint(dst, t.FullBytes, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	if r.Chain != "" {
		dst = append(dst, `,"chain":"`...)
		dst = append(dst, r.Chain...)
		dst = append(dst, '"')
	}
	return append(dst, "}\n"...)
}

// appendTime appends t (already canonical) as a quoted TimeLayout string.
func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, TimeLayout)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string that can never break the line:
// quote and backslash escaped, every control byte (and DEL) escaped, each
// invalid UTF-8 byte written as \ufffd, and U+2028, U+2029 and U+FFFD
// escaped (the last so that a decoded line re-encodes to the same bytes).
// Every other character is written as its UTF-8 bytes.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		switch r {
		case utf8.RuneError:
			dst = append(dst, `\ufffd`...)
		case '\u2028':
			dst = append(dst, `\u2028`...)
		case '\u2029':
			dst = append(dst, `\u2029`...)
		default:
			dst = append(dst, s[i:i+w]...)
		}
		i += w
	}
	return append(dst, '"')
}
