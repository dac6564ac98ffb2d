package wire

import (
	"encoding/json"
	"errors"
	"fmt"
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
	var (
		req MintRequest
		d   decodeState
	)
	d.init(body)
	// Required members are numbered in the spec's order: the first missing
	// one is reported.
	have := d.object("", body, func(name, val string) int {
		switch name {
		case "protocol_version":
			d.version(val)
		case "service_name":
			req.ServiceName = d.str(name, val)
			return 0
		case "host":
			req.Host = d.str(name, val)
			return 1
		case "instance":
			req.Instance = d.instance(val)
		case "component":
			req.Component = d.str(name, val)
			return 2
		case "spec":
			req.Spec = d.spec(val)
			return 3
		case "wrap_ttl":
			req.WrapTTL = d.uint(name, val, 64)
			return 4
		case "idempotency_key":
			req.IdempotencyKey = d.str(name, val)
		}
		return -1
	})
	if err := d.finish(have, mintRequired[:]); err != nil {
		return MintRequest{}, err
	}
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
	var (
		req DeregisterRequest
		d   decodeState
	)
	d.init(body)
	have := d.object("", body, func(name, val string) int {
		switch name {
		case "protocol_version":
			d.version(val)
		case "service_name":
			req.ServiceName = d.str(name, val)
			return 0
		case "host":
			req.Host = d.str(name, val)
			return 1
		case "instance":
			req.Instance = d.instance(val)
		case "component":
			req.Component = d.str(name, val)
			return 2
		case "idempotency_key":
			req.IdempotencyKey = d.str(name, val)
		}
		return -1
	})
	if err := d.finish(have, deregisterRequired[:]); err != nil {
		return DeregisterRequest{}, err
	}
	req.ProtocolVersion = ProtocolVersion
	return req, nil
}

// decodeState accumulates the decoder's findings. A syntax problem stops
// decoding at once; a member problem is remembered (the first one) and
// decoding goes on, so that a wrong protocol_version is reported ahead of
// any member problem wherever it appears in the object.
//
// The body is read in one pass that checks the JSON grammar as it goes (no
// json.Valid pre-pass). Only when that pass finds the body broken is it
// read again, by encoding/json, to name the byte and the problem exactly as
// before; that is the rejection path, never the hot one.
type decodeState struct {
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

// object walks the JSON object in raw (the body when path is "", else the
// member at path), checking the grammar as it goes, and calls member with
// each member's name and raw value in order. member returns the index of a
// required member, or -1; the result has bit i set for each required index
// seen. Duplicate names are a member problem. For the body, anything after
// the object other than white space is a syntax problem.
//
// A member value is checked in full (every nested level of an unknown
// member included, to encoding/json's depth limit) before member sees it,
// so a value member receives is always valid JSON.
func (d *decodeState) object(path string, raw string, member func(name, val string) int) uint {
	if d.fatal != nil {
		return 0
	}
	where := "request body"
	if path != "" {
		where = path
	}
	p := scanner{s: raw}
	p.space()
	if !p.eat('{') {
		// Only the body can get here: spec's kind is checked before.
		if _, ok := p.value(0); !ok || !p.end() {
			d.syntaxError()
			return 0
		}
		d.fatal = malformedf("request body: must be a JSON object, got %s", kindOf(raw))
		return 0
	}
	var (
		have  uint
		names dupSet
	)
	p.space()
	if p.eat('}') {
		if path == "" && !p.end() {
			d.syntaxError()
		}
		return have
	}
	for {
		p.space()
		rawName, escaped, ok := p.str()
		if !ok {
			d.syntaxError()
			return have
		}
		name, ok := unquote(rawName, escaped)
		if !ok {
			d.syntaxError()
			return have
		}
		p.space()
		if !p.eat(':') {
			d.syntaxError()
			return have
		}
		p.space()
		value, ok := p.value(1)
		if !ok {
			d.syntaxError()
			return have
		}
		if names.add(name) {
			d.memberErr("%s: duplicate member %s", where, quoteName(name))
		}
		if i := member(name, value); i >= 0 && i < 32 {
			have |= 1 << i
		}
		p.space()
		switch {
		case p.eat(','):
			continue
		case p.eat('}'):
			if path == "" && !p.end() {
				d.syntaxError()
			}
			return have
		}
		d.syntaxError()
		return have
	}
}

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
	for p.i < len(p.s) {
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

// str returns the string at the cursor, quotes included, and whether it
// has escapes.
func (p *scanner) str() (raw string, escaped, ok bool) {
	start := p.i
	if !p.eat('"') {
		return "", false, false
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return p.s[start:p.i], escaped, true
		case c == '\\':
			escaped = true
			if p.i+1 >= len(p.s) {
				return "", false, false
			}
			switch p.s[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.s) {
					return "", false, false
				}
				for _, h := range []byte(p.s[p.i+2 : p.i+6]) {
					if !isHex(h) {
						return "", false, false
					}
				}
				p.i += 6
			default:
				return "", false, false
			}
		case c < 0x20:
			return "", false, false
		default:
			p.i++
		}
	}
	return "", false, false
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
		return // a duplicate: reported by object
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

// str decodes a string member. It is the one place every string member of
// a request passes through (path names it: "host", "spec.reload"), so a
// check that applies to every string member belongs here.
func (d *decodeState) str(path string, val string) string {
	if kind := kindOf(val); kind != "a string" {
		d.memberErr("%s: must be a string, got %s", path, kind)
		return ""
	}
	s, ok := unquote(val, strings.IndexByte(val, '\\') >= 0)
	if !ok {
		d.memberErr("%s: invalid string", path)
		return ""
	}
	return d.bounded(path, s) // the FieldBounds maxima (bounds.go)
}

// uint decodes a non-negative integer member that fits bits bits.
func (d *decodeState) uint(path string, val string, bits int) uint64 {
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

// spec decodes the spec member.
func (d *decodeState) spec(val string) Spec {
	var s Spec
	if kind := kindOf(val); kind != "an object" {
		d.memberErr("spec: must be an object, got %s", kind)
		return s
	}
	have := d.object("spec", val, func(name, v string) int {
		switch name {
		case "component":
			s.Component = d.str("spec.component", v)
			return 0
		case "service_name":
			s.ServiceName = d.str("spec.service_name", v)
			return 1
		case "reload":
			s.Reload = d.str("spec.reload", v)
			return 2
		}
		return -1
	})
	for i, name := range specRequired {
		if have&(1<<i) == 0 {
			d.memberErr("spec.%s: required", name)
			break
		}
	}
	return s
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
