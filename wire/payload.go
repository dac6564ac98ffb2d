package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	var req MintRequest
	d := newDecodeState(body)
	// Required members are numbered in the spec's order: the first missing
	// one is reported.
	have := d.object("", body, func(name string, val []byte) int {
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
	if err := d.finish(have, "service_name", "host", "component", "spec", "wrap_ttl"); err != nil {
		return MintRequest{}, err
	}
	req.ProtocolVersion = ProtocolVersion
	return req, nil
}

// DecodeDeregister decodes and checks the body of POST /v1/deregister, with
// DecodeMint's rules: protocol_version, service_name, host, component
// required; instance and idempotency_key optional.
func DecodeDeregister(body []byte) (DeregisterRequest, error) {
	var req DeregisterRequest
	d := newDecodeState(body)
	have := d.object("", body, func(name string, val []byte) int {
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
	if err := d.finish(have, "service_name", "host", "component"); err != nil {
		return DeregisterRequest{}, err
	}
	req.ProtocolVersion = ProtocolVersion
	return req, nil
}

// decodeState accumulates the decoder's findings. A syntax problem stops
// decoding at once; a member problem is remembered (the first one) and
// decoding goes on, so that a wrong protocol_version is reported ahead of
// any member problem wherever it appears in the object.
type decodeState struct {
	fatal      *MalformedError // syntax, not an object: stop
	versionErr *MalformedError
	versionOK  bool
	member     *MalformedError // the first member problem
}

func newDecodeState(body []byte) *decodeState {
	d := &decodeState{}
	switch {
	case len(body) > MaxBodyBytes:
		d.fatal = malformedf("request body exceeds %d bytes", MaxBodyBytes)
	case !utf8.Valid(body):
		d.fatal = malformedf("request body is not valid UTF-8")
	default:
		d.fatal = checkSyntax(body)
	}
	return d
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
func (d *decodeState) finish(have uint, required ...string) error {
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
// member at path), calling member with each member's name and raw value in
// order. member returns the index of a required member, or -1; the result
// has bit i set for each required index seen. Duplicate names are a member
// problem.
//
// raw has passed json.Valid (the body in newDecodeState; a member value is
// a span of it), so the walk only finds spans; it still checks every index
// and reports a broken invariant rather than panic.
func (d *decodeState) object(path string, raw []byte, member func(name string, val []byte) int) uint {
	if d.fatal != nil {
		return 0
	}
	where := "request body"
	if path != "" {
		where = path
	}
	w := walker{b: raw}
	w.space()
	if !w.eat('{') {
		// Only the body can get here: spec's kind is checked before.
		d.fatal = malformedf("request body: must be a JSON object, got %s", kindOf(raw))
		return 0
	}
	var (
		have  uint
		names dupSet
	)
	w.space()
	if w.eat('}') {
		return have
	}
	for {
		w.space()
		rawName, ok := w.str()
		if !ok {
			d.fatal = malformedf("%s: unreadable member name", where)
			return have
		}
		name, ok := unquote(rawName)
		if !ok {
			d.fatal = malformedf("%s: unreadable member name", where)
			return have
		}
		w.space()
		if !w.eat(':') {
			d.fatal = malformedf("%s: unreadable member %s", where, quoteName(name))
			return have
		}
		w.space()
		value, ok := w.value()
		if !ok {
			d.fatal = malformedf("%s: unreadable value of member %s", where, quoteName(name))
			return have
		}
		if names.add(name) {
			d.memberErr("%s: duplicate member %s", where, quoteName(name))
		}
		if i := member(name, value); i >= 0 && i < 32 {
			have |= 1 << i
		}
		w.space()
		switch {
		case w.eat(','):
			continue
		case w.eat('}'):
			return have
		}
		d.fatal = malformedf("%s: unreadable object", where)
		return have
	}
}

// walker finds the spans of JSON text already known to be valid.
type walker struct {
	b []byte
	i int
}

func (w *walker) space() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\r', '\n':
			w.i++
		default:
			return
		}
	}
}

func (w *walker) eat(c byte) bool {
	if w.i < len(w.b) && w.b[w.i] == c {
		w.i++
		return true
	}
	return false
}

// str returns the string at the cursor, quotes included.
func (w *walker) str() ([]byte, bool) {
	start := w.i
	if !w.eat('"') {
		return nil, false
	}
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case '\\':
			w.i += 2
		case '"':
			w.i++
			return w.b[start:w.i], true
		default:
			w.i++
		}
	}
	return nil, false
}

// value returns the value at the cursor.
func (w *walker) value() ([]byte, bool) {
	if w.i >= len(w.b) {
		return nil, false
	}
	start := w.i
	switch w.b[w.i] {
	case '"':
		return w.str()
	case '{', '[':
		depth := 0
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case '"':
				if _, ok := w.str(); !ok {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			w.i++
			if depth == 0 {
				return w.b[start:w.i], true
			}
		}
		return nil, false
	}
	for w.i < len(w.b) { // a number or a literal
		switch w.b[w.i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return w.b[start:w.i], w.i > start
		}
		w.i++
	}
	return w.b[start:w.i], w.i > start
}

// unquote decodes a JSON string (quotes included). Without escapes it is
// a plain copy; escapes go through encoding/json.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// dupSet detects repeated member names: a short list first, a map once an
// object has many members, so a 64 KiB object of tiny members costs linear
// time, not quadratic.
type dupSet struct {
	few  []string
	many map[string]struct{}
}

// add records name and reports whether it was already there.
func (s *dupSet) add(name string) bool {
	const maxFew = 16
	if s.many != nil {
		if _, dup := s.many[name]; dup {
			return true
		}
		s.many[name] = struct{}{}
		return false
	}
	for _, n := range s.few {
		if n == name {
			return true
		}
	}
	s.few = append(s.few, name)
	if len(s.few) > maxFew {
		s.many = make(map[string]struct{}, 2*len(s.few))
		for _, n := range s.few {
			s.many[n] = struct{}{}
		}
		s.few = nil
	}
	return false
}

// checkSyntax rejects a body that is not one valid JSON value, naming
// the byte and the problem as encoding/json reports them.
func checkSyntax(body []byte) *MalformedError {
	if json.Valid(body) {
		return nil
	}
	if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
		return malformedf("request body is empty, want a JSON object")
	}
	var raw json.RawMessage
	err := json.Unmarshal(body, &raw)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return malformedf("request body is not valid JSON at byte %d: %s", se.Offset, se.Error())
	}
	return malformedf("request body is not valid JSON")
}

// version checks protocol_version.
func (d *decodeState) version(val []byte) {
	if d.versionOK || d.versionErr != nil {
		return // a duplicate: reported by object
	}
	kind := kindOf(val)
	switch {
	case kind != "a number":
		d.versionErr = malformedf("protocol_version: must be the integer %d, got %s", ProtocolVersion, kind)
	case string(val) != "1":
		d.versionErr = malformedf("protocol_version: must be %d, the only version this server speaks", ProtocolVersion)
	default:
		d.versionOK = true
	}
}

// str decodes a string member.
func (d *decodeState) str(path string, val []byte) string {
	if kind := kindOf(val); kind != "a string" {
		d.memberErr("%s: must be a string, got %s", path, kind)
		return ""
	}
	s, ok := unquote(val)
	if !ok {
		d.memberErr("%s: invalid string", path)
		return ""
	}
	return d.bounded(path, s) // the FieldBounds maxima (bounds.go)
}

// uint decodes a non-negative integer member that fits bits bits.
func (d *decodeState) uint(path string, val []byte, bits int) uint64 {
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
	case bytes.ContainsAny(val, ".eE"):
		d.memberErr("%s: must be an integer, got a fraction or an exponent", path)
		return 0
	}
	n, err := strconv.ParseUint(string(val), 10, bits)
	if err != nil {
		d.memberErr("%s: out of range (at most %d)", path, uint64(1)<<bits-1)
		return 0
	}
	return n
}

// instance decodes the instance member: a positive integer of 32 bits.
// An explicit 0 is malformed rather than "absent", so a present instance
// always reaches the verbs as present.
func (d *decodeState) instance(val []byte) uint32 {
	if string(val) == "0" {
		d.memberErr("instance: must be 1 or more when present (omit it for a component without instances)")
		return 0
	}
	return uint32(d.uint("instance", val, 32))
}

// spec decodes the spec member.
func (d *decodeState) spec(val []byte) Spec {
	var s Spec
	if kind := kindOf(val); kind != "an object" {
		d.memberErr("spec: must be an object, got %s", kind)
		return s
	}
	have := d.object("spec", val, func(name string, v []byte) int {
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
	for i, name := range []string{"component", "service_name", "reload"} {
		if have&(1<<i) == 0 {
			d.memberErr("spec.%s: required", name)
			break
		}
	}
	return s
}

// kindOf names the JSON kind of a syntactically valid value.
func kindOf(val []byte) string {
	v := bytes.TrimLeft(val, " \t\r\n")
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
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
