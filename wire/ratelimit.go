package wire

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// The RateLimit-Policy and RateLimit response header fields of
// draft-ietf-httpapi-ratelimit-headers-11 (23 May 2026): a List of Items,
// each a String naming a quota policy with Integer parameters,
//
//	RateLimit-Policy: "default";q=8;w=4
//	RateLimit: "default";r=3;t=1
//
// q is the policy's quota (the bucket's burst B), w its window in seconds
// (B × refill interval, rounded up: RateLimitWindowSeconds), r the quota
// left after this call (the bucket's tokens) and t the effective window in
// seconds (the time until the bucket gains its next token, rounded up; 0
// when it is full: DelaySeconds). docs/en/wire.md#ratelimit says why these
// values make the draft's statements true for a token bucket.

// The field names as the draft spells them. Field names are
// case-insensitive: net/http's Header.Set and Header.Get canonicalize them to
// "Ratelimit-Policy" and "Ratelimit".
const (
	HeaderRateLimitPolicy = "RateLimit-Policy"
	HeaderRateLimit       = "RateLimit"
)

// MaxSFInteger is the largest Integer a structured field carries
// (999,999,999,999,999, RFC 9651 section 3.3.1). The formatters write a
// larger value as MaxSFInteger.
const MaxSFInteger = 999_999_999_999_999

// MaxRateLimitItems bounds the items of one field the parsers accept: RFC
// 9651's minimum for a List (1024); more is ErrRateLimitTooMany. A server
// names one policy per field.
const MaxRateLimitItems = 1024

// QuotaPolicy is one item of a RateLimit-Policy field: a quota policy.
type QuotaPolicy struct {
	// Name is the item's String: a caller policy's name, or "default".
	Name string
	// Quota is q, in quota units: the registrar's bucket burst.
	Quota uint64
	// QuotaUnit is qu, "" when absent, which the draft reads as "requests".
	QuotaUnit string
	// Window is w in seconds, 0 when absent (the draft forbids w=0).
	Window uint64
	// PartitionKey is pk, nil when absent. The registrar sends none.
	PartitionKey []byte
}

// Interval is Window / Quota as a duration, rounded up to the nanosecond
// and saturating at the largest duration: the time the policy allows per
// quota unit, which for the registrar's bucket is never shorter than its
// refill interval. It is 0 when Window or Quota is 0 (no rate stated).
func (p QuotaPolicy) Interval() time.Duration {
	if p.Window == 0 || p.Quota == 0 {
		return 0
	}
	hi, lo := bits.Mul64(p.Window, uint64(time.Second))
	if hi >= p.Quota {
		return math.MaxInt64 // the quotient does not fit 64 bits
	}
	q, rem := bits.Div64(hi, lo, p.Quota)
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// RateLimitPolicy is a RateLimit-Policy field: its items in order.
type RateLimitPolicy struct {
	Policies []QuotaPolicy
}

// Lookup returns the policy named name, the first if several are.
func (f *RateLimitPolicy) Lookup(name string) (QuotaPolicy, bool) {
	for _, p := range f.Policies {
		if p.Name == name {
			return p, true
		}
	}
	return QuotaPolicy{}, false
}

// ServiceLimit is one item of a RateLimit field: the current service limit
// under one quota policy.
type ServiceLimit struct {
	// Name is the item's String, the quota policy's name.
	Name string
	// Remaining is r, the available quota in quota units: the tokens left
	// in the registrar's bucket after this call.
	Remaining uint64
	// EffectiveWindow is t in seconds when HasEffectiveWindow: the time
	// within which the client can use no more than Remaining.
	EffectiveWindow    uint64
	HasEffectiveWindow bool
	// PartitionKey is pk, nil when absent. The registrar sends none.
	PartitionKey []byte
}

// RateLimit is a RateLimit field: its items in order.
type RateLimit struct {
	Limits []ServiceLimit
}

// Lookup returns the service limit named name, the first if several are.
func (f *RateLimit) Lookup(name string) (ServiceLimit, bool) {
	for _, l := range f.Limits {
		if l.Name == name {
			return l, true
		}
	}
	return ServiceLimit{}, false
}

// RateLimitWindowSeconds is the w the registrar states for a bucket of
// burst tokens refilled one per interval: burst × interval in whole
// seconds, rounded up, so that q/w = burst/w never exceeds the refill rate
// 1/interval; at least 1 (the draft forbids w=0) and at most MaxSFInteger.
func RateLimitWindowSeconds(burst uint64, interval time.Duration) uint64 {
	if interval <= 0 || burst == 0 {
		return 1
	}
	hi, lo := bits.Mul64(burst, uint64(interval))
	if hi >= uint64(time.Second) {
		return MaxSFInteger
	}
	secs, rem := bits.Div64(hi, lo, uint64(time.Second))
	if rem != 0 {
		secs++
	}
	return min(secs, MaxSFInteger)
}

// DelaySeconds is d in whole seconds, rounded up (delay-seconds, as
// Retry-After): the t the registrar states for a bucket whose next token is
// d away; 0 for d ≤ 0, a full bucket.
func DelaySeconds(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	secs := uint64(d / time.Second)
	if d%time.Second != 0 {
		secs++
	}
	return secs
}

// AppendRateLimitPolicy appends a RateLimit-Policy field value naming one
// policy, `"policy";q=quota;w=windowSeconds`, to dst; w is left out when
// windowSeconds is 0 (the draft forbids w=0; no w states no window). A
// value over MaxSFInteger is written as MaxSFInteger. A policy name is
// written as an sf-string: " and \ escaped, and each byte that a String
// cannot hold (outside printable ASCII) as "?", so the value always parses.
// It allocates only when dst is too small.
func AppendRateLimitPolicy(dst []byte, policy string, quota, windowSeconds uint64) []byte {
	dst = appendSFString(dst, policy)
	dst = append(dst, ";q="...)
	dst = appendSFInteger(dst, quota)
	if windowSeconds > 0 {
		dst = append(dst, ";w="...)
		dst = appendSFInteger(dst, windowSeconds)
	}
	return dst
}

// AppendRateLimit appends a RateLimit field value naming one policy,
// `"policy";r=remaining;t=effectiveWindowSeconds`, to dst, with
// AppendRateLimitPolicy's rules for the name and the numbers. t is always
// written: 0 states that no wait is owed (a full bucket).
func AppendRateLimit(dst []byte, policy string, remaining, effectiveWindowSeconds uint64) []byte {
	dst = appendSFString(dst, policy)
	dst = append(dst, ";r="...)
	dst = appendSFInteger(dst, remaining)
	dst = append(dst, ";t="...)
	return appendSFInteger(dst, effectiveWindowSeconds)
}

// FormatRateLimitPolicy is AppendRateLimitPolicy as a string.
func FormatRateLimitPolicy(policy string, quota, windowSeconds uint64) string {
	var buf [64]byte
	return string(AppendRateLimitPolicy(buf[:0], policy, quota, windowSeconds))
}

// FormatRateLimit is AppendRateLimit as a string.
func FormatRateLimit(policy string, remaining, effectiveWindowSeconds uint64) string {
	var buf [64]byte
	return string(AppendRateLimit(buf[:0], policy, remaining, effectiveWindowSeconds))
}

func appendSFInteger(dst []byte, n uint64) []byte {
	return strconv.AppendUint(dst, min(n, MaxSFInteger), 10)
}

func appendSFString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c > 0x7e:
			dst = append(dst, '?')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// The kinds of malformed RateLimit and RateLimit-Policy field values, each
// wrapped in a *RateLimitFieldError saying where. A client ignores a
// malformed field whole, as the draft (section 7) and RFC 9651 (section
// 4.2) require.
var (
	// ErrRateLimitSyntax: the value is not an RFC 9651 List of Items with
	// Parameters (a bare item, parameter or separator out of the grammar).
	ErrRateLimitSyntax = errors.New("wire: not a structured-field List (RFC 9651)")
	// ErrRateLimitEmpty: no item. RFC 9651 sends an empty List as no field.
	ErrRateLimitEmpty = errors.New("wire: no item")
	// ErrRateLimitNotString: an item that is not a String, or an Inner List;
	// the draft's items are Strings naming a policy.
	ErrRateLimitNotString = errors.New("wire: an item that is not a String")
	// ErrRateLimitMissing: an item without its required parameter (q in
	// RateLimit-Policy, r in RateLimit).
	ErrRateLimitMissing = errors.New("wire: a required parameter is missing")
	// ErrRateLimitType: a parameter the draft defines, of another type (q,
	// w, r and t are Integers, qu a String, pk a Byte Sequence).
	ErrRateLimitType = errors.New("wire: a parameter of the wrong type")
	// ErrRateLimitRange: a negative q, r or t, or a w that is not positive.
	ErrRateLimitRange = errors.New("wire: a parameter out of range")
	// ErrRateLimitTooMany: more than MaxRateLimitItems items.
	ErrRateLimitTooMany = errors.New("wire: too many items")
)

// RateLimitFieldError is a malformed RateLimit or RateLimit-Policy field
// value: Err (one of the ErrRateLimit… sentinels) and where.
type RateLimitFieldError struct {
	// Field is HeaderRateLimit or HeaderRateLimitPolicy.
	Field string
	// Item is the item at fault, from 1; 0 when the fault is not one
	// item's (an empty field).
	Item int
	// Param is the parameter at fault, "" when none.
	Param string
	// Offset is the byte of the value where a syntax error was found.
	Offset int
	Err    error
}

func (e *RateLimitFieldError) Error() string {
	where := e.Field + " field"
	switch {
	case errors.Is(e.Err, ErrRateLimitSyntax):
		where += " at byte " + strconv.Itoa(e.Offset)
	case e.Param != "":
		where += fmt.Sprintf(", item %d, parameter %s", e.Item, e.Param)
	case e.Item > 0:
		where += fmt.Sprintf(", item %d", e.Item)
	}
	return "wire: " + where + ": " + strings.TrimPrefix(e.Err.Error(), "wire: ")
}

func (e *RateLimitFieldError) Unwrap() error { return e.Err }

// ParseRateLimitPolicy parses a RateLimit-Policy field value: every field
// line of the response joined with ", " (RFC 9110 section 5.3). It accepts
// what the draft lets a server send: a List of String items, each with a
// non-negative Integer q, and optionally a positive Integer w, a String
// qu, a Byte Sequence pk, and any other parameter (ignored, as the draft
// says); a repeated parameter's last value counts (RFC 9651). Anything
// else is a *RateLimitFieldError.
func ParseRateLimitPolicy(field string) (RateLimitPolicy, error) {
	var f RateLimitPolicy
	err := parseRateLimitList(HeaderRateLimitPolicy, field, func(name string, ps []sfParam) (string, error) {
		var q, w, qu, pk *sfBare
		for i := range ps {
			switch ps[i].key {
			case "q":
				q = &ps[i].val
			case "w":
				w = &ps[i].val
			case "qu":
				qu = &ps[i].val
			case "pk":
				pk = &ps[i].val
			}
		}
		p := QuotaPolicy{Name: name}
		var err error
		if q == nil {
			return "q", ErrRateLimitMissing
		}
		if p.Quota, err = sfUint(q, 0); err != nil {
			return "q", err
		}
		if w != nil {
			if p.Window, err = sfUint(w, 1); err != nil {
				return "w", err
			}
		}
		if qu != nil {
			if qu.kind != sfString {
				return "qu", fmt.Errorf("%w: want a String", ErrRateLimitType)
			}
			p.QuotaUnit = qu.str
		}
		if pk != nil {
			if p.PartitionKey, err = sfByteSequence(pk); err != nil {
				return "pk", err
			}
		}
		f.Policies = append(f.Policies, p)
		return "", nil
	})
	if err != nil {
		return RateLimitPolicy{}, err
	}
	return f, nil
}

// ParseRateLimit parses a RateLimit field value (all its field lines joined
// with ", "). It accepts a List of String items, each with a non-negative
// Integer r, and optionally a non-negative Integer t, a Byte Sequence pk
// and any other parameter (ignored); a repeated parameter's last value
// counts. Anything else is a *RateLimitFieldError.
func ParseRateLimit(field string) (RateLimit, error) {
	var f RateLimit
	err := parseRateLimitList(HeaderRateLimit, field, func(name string, ps []sfParam) (string, error) {
		var r, t, pk *sfBare
		for i := range ps {
			switch ps[i].key {
			case "r":
				r = &ps[i].val
			case "t":
				t = &ps[i].val
			case "pk":
				pk = &ps[i].val
			}
		}
		l := ServiceLimit{Name: name}
		var err error
		if r == nil {
			return "r", ErrRateLimitMissing
		}
		if l.Remaining, err = sfUint(r, 0); err != nil {
			return "r", err
		}
		if t != nil {
			if l.EffectiveWindow, err = sfUint(t, 0); err != nil {
				return "t", err
			}
			l.HasEffectiveWindow = true
		}
		if pk != nil {
			if l.PartitionKey, err = sfByteSequence(pk); err != nil {
				return "pk", err
			}
		}
		f.Limits = append(f.Limits, l)
		return "", nil
	})
	if err != nil {
		return RateLimit{}, err
	}
	return f, nil
}

// sfUint reads an Integer parameter of at least least.
func sfUint(v *sfBare, least int64) (uint64, error) {
	if v.kind != sfInteger {
		return 0, fmt.Errorf("%w: want an Integer", ErrRateLimitType)
	}
	if v.num < least {
		return 0, fmt.Errorf("%w: %d, want an Integer ≥ %d", ErrRateLimitRange, v.num, least)
	}
	return uint64(v.num), nil
}

// sfByteSequence reads a Byte Sequence parameter (its text was checked when
// it was scanned).
func sfByteSequence(v *sfBare) ([]byte, error) {
	if v.kind != sfBytes {
		return nil, fmt.Errorf("%w: want a Byte Sequence", ErrRateLimitType)
	}
	b, _ := decodeSFBytes(v.str)
	return b, nil
}

// parseRateLimitList reads s, the value of field, as a List of String
// items, calling item with each one's String and parameters; item returns
// the parameter at fault and why, or "" and nil. The parameters passed are
// valid only during the call. The whole value is checked against RFC 9651
// first, so a value that breaks the grammar is ErrRateLimitSyntax wherever
// the break is, and only a List that parses meets the field's rules.
func parseRateLimitList(field, s string, item func(name string, ps []sfParam) (string, error)) error {
	ps := make([]sfParam, 0, 8) // the registrar's items have 2 parameters
	if err := scanList(field, s, &ps, nil); err != nil {
		return err
	}
	return scanList(field, s, &ps, func(n int, v sfBare, ps []sfParam) error {
		if v.kind != sfString {
			return &RateLimitFieldError{Field: field, Item: n, Err: ErrRateLimitNotString}
		}
		if param, err := item(v.str, ps); err != nil {
			return &RateLimitFieldError{Field: field, Item: n, Param: param, Err: err}
		}
		return nil
	})
}

func syntaxError(field string, off int) error {
	return &RateLimitFieldError{Field: field, Offset: off, Err: ErrRateLimitSyntax}
}

// scanList walks the List s, calling member (when not nil) with each
// member's number, its bare item (the zero sfBare for an Inner List) and
// parameters, in *ps (reused).
func scanList(field, s string, ps *[]sfParam, member func(n int, v sfBare, ps []sfParam) error) error {
	sc := sfScanner{s: s}
	sc.skipSP()
	if sc.empty() {
		return &RateLimitFieldError{Field: field, Err: ErrRateLimitEmpty}
	}
	for n := 1; ; n++ {
		if n > MaxRateLimitItems {
			return &RateLimitFieldError{Field: field, Item: n, Err: ErrRateLimitTooMany}
		}
		var v sfBare
		var ok bool
		if sc.peek() == '(' {
			*ps, ok = sc.innerList((*ps)[:0])
		} else if v, ok = sc.bare(); ok {
			*ps, ok = sc.params((*ps)[:0])
		}
		if !ok {
			return syntaxError(field, sc.off)
		}
		if member != nil {
			if err := member(n, v, *ps); err != nil {
				return err
			}
		}
		sc.skipOWS()
		if sc.empty() {
			return nil
		}
		if sc.peek() != ',' {
			return syntaxError(field, sc.off)
		}
		sc.off++
		sc.skipOWS()
		if sc.empty() {
			return syntaxError(field, sc.off) // a trailing comma
		}
	}
}
