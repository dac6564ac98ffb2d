package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ProtocolVersion is the only protocol version: every request must carry
// it and every response does.
const ProtocolVersion = 1

// MaxBodyBytes bounds a request body (64 KiB). A longer body is answered
// RequestMalformed (400).
const MaxBodyBytes = 64 << 10

// MaxDetailBytes bounds a RequestMalformed detail. Details name the member
// and the problem; they never echo a value the caller sent.
//
// (See MalformedError for the two bounded exceptions.)
const MaxDetailBytes = 256

// TimeLayout is the layout of material.expires_at: RFC 3339, UTC, exactly
// millisecond precision.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Spec is a mint's service specification.
type Spec struct {
	Component   string `json:"component"`
	ServiceName string `json:"service_name"`
	Reload      string `json:"reload"`
}

// MintRequest is the body of POST /v1/mint, members in the spec's order.
// Instance 0 means absent (and is omitted when encoded), as in the verbs.
// IdempotencyKey "" is omitted.
type MintRequest struct {
	ProtocolVersion uint32 `json:"protocol_version"`
	ServiceName     string `json:"service_name"`
	Host            string `json:"host"`
	Instance        uint32 `json:"instance,omitempty"`
	Component       string `json:"component"`
	Spec            Spec   `json:"spec"`
	// WrapTTL is the wrapped secret's lifetime in whole seconds.
	WrapTTL        uint64 `json:"wrap_ttl"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// DeregisterRequest is the body of POST /v1/deregister, members in the
// spec's order.
type DeregisterRequest struct {
	ProtocolVersion uint32 `json:"protocol_version"`
	ServiceName     string `json:"service_name"`
	Host            string `json:"host"`
	Instance        uint32 `json:"instance,omitempty"`
	Component       string `json:"component"`
	IdempotencyKey  string `json:"idempotency_key,omitempty"`
}

// Material is a mint's bootstrap material. ExpiresAt is formatted with
// TimeLayout.
type Material struct {
	RoleID          string `json:"role_id"`
	WrappedSecretID string `json:"wrapped_secret_id"`
	ExpiresAt       string `json:"expires_at"`
}

// ExpiresAtTime parses ExpiresAt.
func (m Material) ExpiresAtTime() (time.Time, error) {
	return time.Parse(TimeLayout, m.ExpiresAt)
}

// MintResponse is a successful mint (200). Outcome is "first_mint" or
// "idempotent_remint".
type MintResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RequestID       string          `json:"request_id"`
	RegistrationID  string          `json:"registration_id"`
	Outcome         string          `json:"outcome"`
	Material        Material        `json:"material"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

// DeregisterResponse is a successful deregister (200). Outcome is
// "removed" or "already_absent".
type DeregisterResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RequestID       string          `json:"request_id"`
	RegistrationID  string          `json:"registration_id"`
	Outcome         string          `json:"outcome"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

// ErrorBody is a refusal's error member: the identifier and its payload
// members. Reason is present for RegistrarUnavailable only, RetryAfter for
// RegistrarBusy only, Detail for RequestMalformed only.
type ErrorBody struct {
	ID ErrorID `json:"id"`
	// Reason is AuditUnwritable, PostMintUnrecordable or BackendUnavailable.
	Reason string `json:"reason,omitempty"`
	// RetryAfter is whole seconds, ≥ 1.
	RetryAfter uint64 `json:"retry_after,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// RefusalResponse is every non-200 answer. RegistrationID is present only
// when the refusal came after derivation.
type RefusalResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RequestID       string          `json:"request_id"`
	RegistrationID  string          `json:"registration_id,omitempty"`
	Class           Class           `json:"class"`
	Error           ErrorBody       `json:"error"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

// HealthResponse is the answer to GET /v1/health.
type HealthResponse struct {
	ProtocolVersion int             `json:"protocol_version"`
	RegistrarHealth json.RawMessage `json:"registrar_health"`
}

// MalformedError is the codec's rejection of a request. The server answers
// it RequestMalformed with Detail, before any verb runs. Detail names the
// member and the problem, is never empty, at most MaxDetailBytes long, and
// never echoes a value the caller sent (a member name is quoted, cut to 40
// bytes; a syntax error names the byte offset and at most one character).
type MalformedError struct {
	Detail string
}

func (e *MalformedError) Error() string { return "wire: malformed request: " + e.Detail }

func malformedf(format string, args ...any) *MalformedError {
	return &MalformedError{Detail: boundDetail(fmt.Sprintf(format, args...))}
}

// boundDetail cuts s to MaxDetailBytes on a UTF-8 boundary.
func boundDetail(s string) string {
	if s == "" {
		return "malformed request"
	}
	if len(s) <= MaxDetailBytes {
		return s
	}
	cut := MaxDetailBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quoteName quotes a member name for a detail, cut to 40 bytes: a caller
// controls the names it sends.
func quoteName(s string) string {
	const maxName = 40
	if len(s) <= maxName {
		return strconv.Quote(s)
	}
	cut := maxName
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// DecodeMint decodes and checks the body of POST /v1/mint. It is strict
// about what it interprets and lenient about the rest:
//
//   - the body is one JSON object of valid UTF-8, nothing after it;
//   - protocol_version is the integer 1;
//   - service_name, host, component are strings; spec is an object of the
//     strings component, service_name, reload; wrap_ttl is a non-negative
//     integer that fits 64 bits; all required;
//   - instance, if present, is a positive integer that fits 32 bits (null
//     and 0 are rejected: omit it instead, since the verbs read 0 as
//     "absent" and "instance present exactly when many-per-host" must not
//     be fooled); idempotency_key, if present, is a string;
//   - a member name appears at most once per object; names are exact
//     (case-sensitive); unknown members are ignored at every level.
//
// Values are not checked against the registrar's rules (DNS labels,
// configured components, wrap_ttl bounds): those are the verbs' refusals.
// Every error is a *MalformedError.
func DecodeMint(body []byte) (MintRequest, error) {
	// One copy of the body: every decoded string is a slice of it, so
	// decoding allocates nothing else (a member with escapes excepted).
	return decodeMint(string(body))
}

func decodeMint(body string) (MintRequest, error) {
	return decodeRequest(body, true, mintRequired[:])
}

// decodeRequest decodes either verb's body: mint says whether spec and
// wrap_ttl are members (for a deregister they are unknown members,
// checked as JSON and ignored). Required members are numbered in the
// spec's order: the first missing one is reported.
func decodeRequest(body string, mint bool, required []string) (MintRequest, error) {
	var d decodeState
	d.init(body)
	have := d.request(mint)
	if err := d.finish(have, required); err != nil {
		return MintRequest{}, err
	}
	req := d.req
	req.ProtocolVersion = ProtocolVersion
	return req, nil
}

var (
	mintRequired       = [...]string{"service_name", "host", "component", "spec", "wrap_ttl"}
	deregisterRequired = [...]string{"service_name", "host", "component"}
	specRequired       = [...]string{"component", "service_name", "reload"}
)

// DecodeDeregister decodes and checks the body of POST /v1/deregister, with
// DecodeMint's rules: protocol_version, service_name, host, component
// required; instance and idempotency_key optional.
func DecodeDeregister(body []byte) (DeregisterRequest, error) {
	return decodeDeregister(string(body))
}

func decodeDeregister(body string) (DeregisterRequest, error) {
	req, err := decodeRequest(body, false, deregisterRequired[:])
	if err != nil {
		return DeregisterRequest{}, err
	}
	return DeregisterRequest{
		ProtocolVersion: req.ProtocolVersion,
		ServiceName:     req.ServiceName,
		Host:            req.Host,
		Instance:        req.Instance,
		Component:       req.Component,
		IdempotencyKey:  req.IdempotencyKey,
	}, nil
}

// decodeState accumulates the decoder's findings. A syntax problem stops
// decoding at once; a member problem is remembered (the first one) and
// decoding goes on, so that a wrong protocol_version is reported ahead of
// any member problem wherever it appears in the object.
//
// The body is read in one pass that checks the JSON grammar as it goes (no
// json.Valid pre-pass) and decodes the members it interprets as it meets
// them: each byte is looked at once, spec's members included. Only when
// that pass finds the body broken is it read again, by encoding/json, to
// name the byte and the problem exactly as before; that is the rejection
// path, never the hot one.
type decodeState struct {
	req        MintRequest // the members decoded so far (a deregister's are a subset)
	body       string
	fatal      *MalformedError // syntax, not an object: stop
	versionErr *MalformedError
	versionOK  bool
	member     *MalformedError // the first member problem
}

func (d *decodeState) init(body string) {
	d.body = body
	switch {
	case len(body) > MaxBodyBytes:
		d.fatal = malformedf("request body exceeds %d bytes", MaxBodyBytes)
	case !utf8.ValidString(body):
		d.fatal = malformedf("request body is not valid UTF-8")
	}
}

// syntaxError records that the body is not valid JSON, with encoding/json's
// account of where and why.
func (d *decodeState) syntaxError() {
	if d.fatal == nil {
		d.fatal = checkSyntax(d.body)
	}
}

func (d *decodeState) memberErr(format string, args ...any) {
	if d.member == nil {
		d.member = malformedf(format, args...)
	}
}

// finish returns the decoding's verdict: a syntax problem, then the
// protocol version, then the first member problem, then the first missing
// required member (names in the spec's order; have has bit i set when
// required[i] was present; protocol_version is tracked on its own).
func (d *decodeState) finish(have uint, required []string) error {
	switch {
	case d.fatal != nil:
		return d.fatal
	case d.versionErr != nil:
		return d.versionErr
	case !d.versionOK:
		return malformedf("protocol_version: required (want %d)", ProtocolVersion)
	case d.member != nil:
		return d.member
	}
	for i, name := range required {
		if have&(1<<i) == 0 {
			return malformedf("%s: required", name)
		}
	}
	return nil
}

// The member names the decoder interprets, at either level, numbered for
// the bitmask of the names an object has had (knownName).
const (
	nameProtocolVersion = iota
	nameServiceName
	nameHost
	nameInstance
	nameComponent
	nameSpec
	nameWrapTTL
	nameIdempotencyKey
	nameReload
)

var knownNames = [...]string{
	nameProtocolVersion: "protocol_version",
	nameServiceName:     "service_name",
	nameHost:            "host",
	nameInstance:        "instance",
	nameComponent:       "component",
	nameSpec:            "spec",
	nameWrapTTL:         "wrap_ttl",
	nameIdempotencyKey:  "idempotency_key",
	nameReload:          "reload",
}

// The hot walk below keeps its cursor in a local index (i, returned as
// next; -1 when the grammar breaks) rather than in a scanner, so that it
// stays in a register; whatever is not on the usual path is handed to a
// scanner at that index.

// memberName reads the member name at i and the colon after it; id is its
// knownName number.
func memberName(s string, i int) (name string, id, next int) {
	if id, next = knownLiteral(s, i); id >= 0 {
		name = knownNames[id]
	} else {
		p := scanner{s: s, i: i}
		var ok bool
		if name, ok = p.name(); !ok {
			return "", -1, -1
		}
		id, next = knownName(name), p.i
	}
	if next+1 < len(s) && s[next] == ':' && s[next+1] > ' ' {
		return name, id, next + 1 // the compact case
	}
	p := scanner{s: s, i: next}
	p.space()
	if !p.eat(':') {
		return "", -1, -1
	}
	p.space()
	return name, id, p.i
}

// knownLiteral reads a known name spelt without escapes (as every usual
// request spells them) at i and returns its number and the index after
// it, without scanning it byte by byte; for any other text, -1.
func knownLiteral(s string, i int) (id, next int) {
	if i+2 >= len(s) || s[i] != '"' {
		return -1, 0
	}
	// Each name is compared as a constant (the compiler turns that into a
	// few word compares), its closing quote included: a longer name does
	// not match.
	n := 0
	id = -1
	switch rest := s[i+1:]; rest[0] {
	case 'p':
		if len(rest) > 16 && rest[:16] == "protocol_version" && rest[16] == '"' {
			n, id = 16, nameProtocolVersion
		}
	case 's':
		if len(rest) > 12 && rest[:12] == "service_name" && rest[12] == '"' {
			n, id = 12, nameServiceName
		} else if len(rest) > 4 && rest[:5] == `spec"` {
			n, id = 4, nameSpec
		}
	case 'h':
		if len(rest) > 4 && rest[:5] == `host"` {
			n, id = 4, nameHost
		}
	case 'i':
		if len(rest) > 8 && rest[:9] == `instance"` {
			n, id = 8, nameInstance
		} else if len(rest) > 15 && rest[:15] == "idempotency_key" && rest[15] == '"' {
			n, id = 15, nameIdempotencyKey
		}
	case 'c':
		if len(rest) > 9 && rest[:10] == `component"` {
			n, id = 9, nameComponent
		}
	case 'w':
		if len(rest) > 8 && rest[:9] == `wrap_ttl"` {
			n, id = 8, nameWrapTTL
		}
	case 'r':
		if len(rest) > 6 && rest[:7] == `reload"` {
			n, id = 6, nameReload
		}
	}
	return id, i + n + 2
}

// knownName returns name's number, or -1 for any other name. Names are
// exact (case-sensitive).
func knownName(name string) int {
	switch len(name) {
	case 4:
		if name == "host" {
			return nameHost
		}
		if name == "spec" {
			return nameSpec
		}
	case 6:
		if name == "reload" {
			return nameReload
		}
	case 8:
		if name == "instance" {
			return nameInstance
		}
		if name == "wrap_ttl" {
			return nameWrapTTL
		}
	case 9:
		if name == "component" {
			return nameComponent
		}
	case 12:
		if name == "service_name" {
			return nameServiceName
		}
	case 15:
		if name == "idempotency_key" {
			return nameIdempotencyKey
		}
	case 16:
		if name == "protocol_version" {
			return nameProtocolVersion
		}
	}
	return -1
}

// members tracks the names an object has had, so that a repeated one is a
// member problem: the known names (knownName) in a bitmask, any other in a
// dupSet. Either way the comparison is of the decoded (unescaped) names.
type members struct {
	known uint
	other dupSet
}

// repeated records name (numbered id by knownName) and reports whether the
// object already had it.
func (m *members) repeated(name string, id int) bool {
	if id < 0 {
		return m.other.add(name)
	}
	bit := uint(1) << id
	dup := m.known&bit != 0
	m.known |= bit
	return dup
}

// request walks the body: one JSON object, checked as it goes, each member
// decoded as it is met (mint: spec and wrap_ttl are the mint's; without
// mint they are unknown members). The result has bit i set for each
// required member seen (mintRequired's numbering; deregisterRequired's is
// its prefix). Anything after the object other than white space is a
// syntax problem.
//
// A member value is checked in full, every nested level of an unknown
// member included, to encoding/json's depth limit.
func (d *decodeState) request(mint bool) uint {
	if d.fatal != nil {
		return 0
	}
	s := d.body
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		p := scanner{s: s, i: i}
		if _, ok := p.value(0); !ok || !p.end() {
			d.syntaxError()
			return 0
		}
		d.fatal = malformedf("request body: must be a JSON object, got %s", kindOf(s))
		return 0
	}
	var (
		have  uint
		names members
	)
	if i = skipSpace(s, i+1); i < len(s) && s[i] == '}' {
		i++
	} else {
		for {
			name, id, next := memberName(s, skipSpace(s, i))
			if next < 0 {
				d.syntaxError()
				return have
			}
			if names.repeated(name, id) {
				d.memberErr("request body: duplicate member %s", quoteName(name))
			}
			i = next
			var v string
			switch id {
			case nameProtocolVersion:
				if v, i = scanValue(s, i, 1); i >= 0 {
					d.version(v)
				}
			case nameServiceName:
				d.req.ServiceName, i = d.str(s, i, "service_name", 1)
				have |= 1 << 0
			case nameHost:
				d.req.Host, i = d.str(s, i, "host", 1)
				have |= 1 << 1
			case nameInstance:
				if v, i = scanValue(s, i, 1); i >= 0 {
					d.req.Instance = d.instance(v)
				}
			case nameComponent:
				d.req.Component, i = d.str(s, i, "component", 1)
				have |= 1 << 2
			case nameSpec:
				if !mint {
					_, i = scanValue(s, i, 1)
					break
				}
				d.req.Spec, i = d.spec(s, i)
				have |= 1 << 3
			case nameWrapTTL:
				if !mint {
					_, i = scanValue(s, i, 1)
					break
				}
				if v, i = scanValue(s, i, 1); i >= 0 {
					d.req.WrapTTL = d.uint("wrap_ttl", v, 64)
				}
				have |= 1 << 4
			case nameIdempotencyKey:
				d.req.IdempotencyKey, i = d.str(s, i, "idempotency_key", 1)
			default:
				_, i = scanValue(s, i, 1)
			}
			if i < 0 {
				d.syntaxError()
				return have
			}
			if i = skipSpace(s, i); i < len(s) && s[i] == ',' {
				i++
				continue
			}
			if i < len(s) && s[i] == '}' {
				i++
				break
			}
			d.syntaxError()
			return have
		}
	}
	if skipSpace(s, i) != len(s) {
		d.syntaxError()
	}
	return have
}

// spec decodes the spec member, at i; next is -1 when the grammar breaks
// (a syntax problem for the caller to record).
func (d *decodeState) spec(s string, i int) (_ Spec, next int) {
	var sp Spec
	if i >= len(s) || s[i] != '{' {
		v, next := scanValue(s, i, 1)
		if next >= 0 {
			d.memberErr("spec: must be an object, got %s", kindOf(v))
		}
		return sp, next
	}
	// spec's own depth, 2, is well inside maxDepth.
	var (
		have  uint
		names members
	)
	if i = skipSpace(s, i+1); i < len(s) && s[i] == '}' {
		i++
	} else {
		for {
			name, id, next := memberName(s, skipSpace(s, i))
			if next < 0 {
				return sp, -1
			}
			if names.repeated(name, id) {
				d.memberErr("spec: duplicate member %s", quoteName(name))
			}
			switch id {
			case nameComponent:
				sp.Component, i = d.str(s, next, "spec.component", 2)
				have |= 1 << 0
			case nameServiceName:
				sp.ServiceName, i = d.str(s, next, "spec.service_name", 2)
				have |= 1 << 1
			case nameReload:
				sp.Reload, i = d.str(s, next, "spec.reload", 2)
				have |= 1 << 2
			default:
				_, i = scanValue(s, next, 2)
			}
			if i < 0 {
				return sp, -1
			}
			if i = skipSpace(s, i); i < len(s) && s[i] == ',' {
				i++
				continue
			}
			if i < len(s) && s[i] == '}' {
				i++
				break
			}
			return sp, -1
		}
	}
	for j, name := range specRequired {
		if have&(1<<j) == 0 {
			d.memberErr("spec.%s: required", name)
			break
		}
	}
	return sp, i
}

// str decodes the string member at i, depth arrays and objects deep. It
// is the one place every string member of a request passes through (path
// names it: "host", "spec.reload"), so a check that applies to every
// string member belongs here. next is -1 when the grammar breaks.
func (d *decodeState) str(s string, i int, path string, depth int) (_ string, next int) {
	if i >= len(s) || s[i] != '"' {
		v, next := scanValue(s, i, depth)
		if next >= 0 {
			d.memberErr("%s: must be a string, got %s", path, kindOf(v))
		}
		return "", next
	}
	var v string
	if end := plainRun(s, i+1); end < len(s) && s[end] == '"' {
		v, next = s[i+1:end], end+1 // no escapes: the usual case
	} else {
		p := scanner{s: s, i: i}
		raw, escaped, ok := p.str()
		if !ok {
			return "", -1
		}
		if v, ok = unquote(raw, escaped); !ok {
			d.memberErr("%s: invalid string", path)
			return "", p.i
		}
		next = p.i
	}
	if len(v) > minFieldBound {
		v = d.bounded(path, v) // the FieldBounds maxima (bounds.go)
	}
	return v, next
}

// scanValue reads the value at i, checked in full, depth arrays and
// objects deep; next is -1 when the grammar breaks. A plain integer (the
// usual number) is read here, anything else by a scanner.
func scanValue(s string, i, depth int) (v string, next int) {
	if i < len(s) && '1' <= s[i] && s[i] <= '9' {
		j := i + 1
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j >= len(s) || s[j] != '.' && s[j] != 'e' && s[j] != 'E' {
			return s[i:j], j
		}
	}
	p := scanner{s: s, i: i}
	v, ok := p.value(depth)
	if !ok {
		return "", -1
	}
	return v, p.i
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// minFieldBound is the smallest of the FieldBounds maxima: a string no
// longer is within every bound, so only a longer one is looked up.
var minFieldBound = func() int {
	m := MaxBodyBytes
	for _, b := range fieldBounds {
		m = min(m, b.MaxBytes)
	}
	return m
}()

// maxDepth is encoding/json's nesting limit: a body nested deeper is not
// valid JSON to it, so it is not to this decoder either.
const maxDepth = 10000

// scanner reads JSON text, checking the grammar (RFC 8259, as encoding/json
// accepts it) as it goes. Its methods report false at the first byte that
// breaks it; the caller then stops. The text is valid UTF-8 (checked
// before), so only the grammar is left to check.
type scanner struct {
	s string
	i int
}

func (p *scanner) space() {
	for p.i < len(p.s) && p.s[p.i] <= ' ' {
		switch p.s[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *scanner) end() bool {
	p.space()
	return p.i == len(p.s)
}

// name reads a member name at the cursor and decodes it.
func (p *scanner) name() (string, bool) {
	raw, escaped, ok := p.str()
	if !ok {
		return "", false
	}
	return unquote(raw, escaped)
}

// plainRun returns the index of the first byte at or after i that is not
// plainByte, or len(s): eight bytes at a time while eight are left.
func plainRun(s string, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// The high bit of a byte is set in stop when that byte is below
		// 0x20, a quote or a backslash; the lowest such bit is exact (a
		// borrow only runs upward from a true one).
		q, b := x^(ones*'"'), x^(ones*'\\')
		stop := ((x - ones*0x20) &^ x) | ((q - ones) &^ q) | ((b - ones) &^ b)
		if stop &= highs; stop != 0 {
			return i + bits.TrailingZeros64(stop)>>3
		}
	}
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	return i
}

// plainByte is true for the bytes that stand for themselves inside a JSON
// string: not the quote, not the backslash, not a control character.
// (Bytes of multi-byte characters are plain: the text is valid UTF-8.)
var plainByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// str returns the string at the cursor, quotes included, and whether it
// has escapes.
func (p *scanner) str() (raw string, escaped, ok bool) {
	start := p.i
	if !p.eat('"') {
		return "", false, false
	}
	s, i := p.s, p.i
	for {
		for i < len(s) && plainByte[s[i]] {
			i++
		}
		if i >= len(s) {
			return "", false, false
		}
		switch s[i] {
		case '"':
			p.i = i + 1
			return s[start:p.i], escaped, true
		case '\\':
			escaped = true
			if i+1 >= len(s) {
				return "", false, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) {
					return "", false, false
				}
				for _, h := range []byte(s[i+2 : i+6]) {
					if !isHex(h) {
						return "", false, false
					}
				}
				i += 6
			default:
				return "", false, false
			}
		default: // a control character
			return "", false, false
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// value returns the value at the cursor, checked in full. depth is the
// number of arrays and objects the value is inside.
func (p *scanner) value(depth int) (string, bool) {
	if p.i >= len(p.s) {
		return "", false
	}
	start := p.i
	switch c := p.s[p.i]; {
	case c == '"':
		raw, _, ok := p.str()
		return raw, ok
	case c == '{' || c == '[':
		if !p.composite(depth + 1) {
			return "", false
		}
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		if !p.number() {
			return "", false
		}
	default:
		return "", false
	}
	return p.s[start:p.i], true
}

func (p *scanner) literal(lit string) (string, bool) {
	if len(p.s)-p.i < len(lit) || p.s[p.i:p.i+len(lit)] != lit {
		return "", false
	}
	p.i += len(lit)
	return lit, true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *scanner) number() bool {
	p.eat('-')
	switch {
	case p.eat('0'):
	case p.i < len(p.s) && '1' <= p.s[p.i] && p.s[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.eat('.') {
		if p.digits() == 0 {
			return false
		}
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

func (p *scanner) digits() int {
	start := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// composite reads an array or an object, opened at the cursor, at nesting
// depth depth.
func (p *scanner) composite(depth int) bool {
	if depth > maxDepth {
		return false
	}
	open := p.s[p.i]
	p.i++
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	p.space()
	if p.eat(closer) {
		return true
	}
	for {
		p.space()
		if open == '{' {
			if _, _, ok := p.str(); !ok {
				return false
			}
			p.space()
			if !p.eat(':') {
				return false
			}
			p.space()
		}
		if _, ok := p.value(depth); !ok {
			return false
		}
		p.space()
		switch {
		case p.eat(','):
			continue
		case p.eat(closer):
			return true
		}
		return false
	}
}

// unquote decodes a JSON string (quotes included). Without escapes it is
// a slice of raw, no copy; escapes go through encoding/json.
func unquote(raw string, escaped bool) (string, bool) {
	if len(raw) < 2 {
		return "", false
	}
	if !escaped {
		return raw[1 : len(raw)-1], true
	}
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return "", false
	}
	return s, true
}

// dupSet detects repeated member names: a fixed array first (no
// allocation for an ordinary request), a map once an object has many
// members, so a 64 KiB object of tiny members costs linear time, not
// quadratic.
type dupSet struct {
	few  [maxFewNames]string
	n    int
	many map[string]struct{}
}

const maxFewNames = 16

// add records name and reports whether it was already there.
func (s *dupSet) add(name string) bool {
	if s.many != nil {
		if _, dup := s.many[name]; dup {
			return true
		}
		s.many[name] = struct{}{}
		return false
	}
	for _, n := range s.few[:s.n] {
		if n == name {
			return true
		}
	}
	if s.n < maxFewNames {
		s.few[s.n] = name
		s.n++
		return false
	}
	s.many = make(map[string]struct{}, 4*maxFewNames)
	for _, n := range s.few {
		s.many[n] = struct{}{}
	}
	s.many[name] = struct{}{}
	return false
}

// checkSyntax names the byte and the problem of a body that is not one
// valid JSON value, as encoding/json reports them. It runs only on the
// rejection path.
func checkSyntax(body string) *MalformedError {
	if strings.TrimLeft(body, " \t\r\n") == "" {
		return malformedf("request body is empty, want a JSON object")
	}
	var raw json.RawMessage
	err := json.Unmarshal([]byte(body), &raw)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return malformedf("request body is not valid JSON at byte %d: %s", se.Offset, se.Error())
	}
	return malformedf("request body is not valid JSON")
}

// version checks protocol_version.
func (d *decodeState) version(val string) {
	if d.versionOK || d.versionErr != nil {
		return // a duplicate: reported by request
	}
	kind := kindOf(val)
	switch {
	case kind != "a number":
		d.versionErr = malformedf("protocol_version: must be the integer %d, got %s", ProtocolVersion, kind)
	case val != "1":
		d.versionErr = malformedf("protocol_version: must be %d, the only version this server speaks", ProtocolVersion)
	default:
		d.versionOK = true
	}
}

// uint decodes a non-negative integer member that fits bits bits.
func (d *decodeState) uint(path string, val string, bits int) uint64 {
	// The usual value, plain decimal digits that fit whatever bits is,
	// read by hand; everything else (and each problem) the long way.
	if len(val) > 0 && len(val) <= 19 {
		var n uint64
		i := 0
		for ; i < len(val) && '0' <= val[i] && val[i] <= '9'; i++ {
			n = n*10 + uint64(val[i]-'0')
		}
		if i == len(val) && n <= uint64(1)<<bits-1 {
			return n
		}
	}
	kind := kindOf(val)
	switch {
	case kind == "null":
		d.memberErr("%s: must not be null (omit the member instead)", path)
		return 0
	case kind != "a number":
		d.memberErr("%s: must be a non-negative integer, got %s", path, kind)
		return 0
	case val[0] == '-':
		d.memberErr("%s: must be a non-negative integer, got a negative number", path)
		return 0
	case strings.ContainsAny(val, ".eE"):
		d.memberErr("%s: must be an integer, got a fraction or an exponent", path)
		return 0
	}
	n, err := strconv.ParseUint(val, 10, bits)
	if err != nil {
		d.memberErr("%s: out of range (at most %d)", path, uint64(1)<<bits-1)
		return 0
	}
	return n
}

// instance decodes the instance member: a positive integer of 32 bits.
// An explicit 0 is malformed rather than "absent", so a present instance
// always reaches the verbs as present.
func (d *decodeState) instance(val string) uint32 {
	if val == "0" {
		d.memberErr("instance: must be 1 or more when present (omit it for a component without instances)")
		return 0
	}
	return uint32(d.uint("instance", val, 32))
}

// kindOf names the JSON kind of a syntactically valid value.
func kindOf(val string) string {
	// JSON's insignificant whitespace, skipped by hand: strings.TrimLeft
	// builds its byte set on every call, and this runs for every member.
	i := 0
	for i < len(val) && (val[i] == ' ' || val[i] == '\t' || val[i] == '\r' || val[i] == '\n') {
		i++
	}
	if i == len(val) {
		return "nothing"
	}
	switch val[i] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
