package wire

// The decoder as it was before the single-pass rewrite (issue 13): a
// json.Valid pre-pass, then a walk over spans of the validated body. It is
// kept here, renamed, as the reference the new decoder must agree with on
// every input (TestDecodeAgreesWithReference, FuzzDecodeAgreesWithReference).

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

func refDecodeMint(body []byte) (MintRequest, error) {
	var req MintRequest
	d := refNewDecodeState(body)
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

// refDecodeDeregister decodes and checks the body of POST /v1/deregister, with
// refDecodeMint's rules: protocol_version, service_name, host, component
// required; instance and idempotency_key optional.
func refDecodeDeregister(body []byte) (DeregisterRequest, error) {
	var req DeregisterRequest
	d := refNewDecodeState(body)
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

// refDecodeState accumulates the decoder's findings. A syntax problem stops
// decoding at once; a member problem is remembered (the first one) and
// decoding goes on, so that a wrong protocol_version is reported ahead of
// any member problem wherever it appears in the object.
type refDecodeState struct {
	fatal      *MalformedError // syntax, not an object: stop
	versionErr *MalformedError
	versionOK  bool
	member     *MalformedError // the first member problem
}

func refNewDecodeState(body []byte) *refDecodeState {
	d := &refDecodeState{}
	switch {
	case len(body) > MaxBodyBytes:
		d.fatal = malformedf("request body exceeds %d bytes", MaxBodyBytes)
	case !utf8.Valid(body):
		d.fatal = malformedf("request body is not valid UTF-8")
	default:
		d.fatal = refCheckSyntax(body)
	}
	return d
}

func (d *refDecodeState) memberErr(format string, args ...any) {
	if d.member == nil {
		d.member = malformedf(format, args...)
	}
}

// finish returns the decoding's verdict: a syntax problem, then the
// protocol version, then the first member problem, then the first missing
// required member (names in the spec's order; have has bit i set when
// required[i] was present; protocol_version is tracked on its own).
func (d *refDecodeState) finish(have uint, required ...string) error {
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
// raw has passed json.Valid (the body in refNewDecodeState; a member value is
// a span of it), so the walk only finds spans; it still checks every index
// and reports a broken invariant rather than panic.
func (d *refDecodeState) object(path string, raw []byte, member func(name string, val []byte) int) uint {
	if d.fatal != nil {
		return 0
	}
	where := "request body"
	if path != "" {
		where = path
	}
	w := refWalker{b: raw}
	w.space()
	if !w.eat('{') {
		// Only the body can get here: spec's kind is checked before.
		d.fatal = malformedf("request body: must be a JSON object, got %s", refKindOf(raw))
		return 0
	}
	var (
		have  uint
		names refDupSet
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
		name, ok := refUnquote(rawName)
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

// refWalker finds the spans of JSON text already known to be valid.
type refWalker struct {
	b []byte
	i int
}

func (w *refWalker) space() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\r', '\n':
			w.i++
		default:
			return
		}
	}
}

func (w *refWalker) eat(c byte) bool {
	if w.i < len(w.b) && w.b[w.i] == c {
		w.i++
		return true
	}
	return false
}

// str returns the string at the cursor, quotes included.
func (w *refWalker) str() ([]byte, bool) {
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
func (w *refWalker) value() ([]byte, bool) {
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

// refUnquote decodes a JSON string (quotes included). Without escapes it is
// a plain copy; escapes go through encoding/json.
func refUnquote(raw []byte) (string, bool) {
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

// refDupSet detects repeated member names: a short list first, a map once an
// object has many members, so a 64 KiB object of tiny members costs linear
// time, not quadratic.
type refDupSet struct {
	few  []string
	many map[string]struct{}
}

// add records name and reports whether it was already there.
func (s *refDupSet) add(name string) bool {
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

// refCheckSyntax rejects a body that is not one valid JSON value, naming
// the byte and the problem as encoding/json reports them.
func refCheckSyntax(body []byte) *MalformedError {
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
func (d *refDecodeState) version(val []byte) {
	if d.versionOK || d.versionErr != nil {
		return // a duplicate: reported by object
	}
	kind := refKindOf(val)
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
func (d *refDecodeState) str(path string, val []byte) string {
	if kind := refKindOf(val); kind != "a string" {
		d.memberErr("%s: must be a string, got %s", path, kind)
		return ""
	}
	s, ok := refUnquote(val)
	if !ok {
		d.memberErr("%s: invalid string", path)
		return ""
	}
	return s
}

// uint decodes a non-negative integer member that fits bits bits.
func (d *refDecodeState) uint(path string, val []byte, bits int) uint64 {
	kind := refKindOf(val)
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
func (d *refDecodeState) instance(val []byte) uint32 {
	if string(val) == "0" {
		d.memberErr("instance: must be 1 or more when present (omit it for a component without instances)")
		return 0
	}
	return uint32(d.uint("instance", val, 32))
}

// spec decodes the spec member.
func (d *refDecodeState) spec(val []byte) Spec {
	var s Spec
	if kind := refKindOf(val); kind != "an object" {
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

// refKindOf names the JSON kind of a syntactically valid value.
func refKindOf(val []byte) string {
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

// RefDecodeMint and RefDecodeDeregister export the reference decoder to
// the external tests.
var (
	RefDecodeMint       = refDecodeMint
	RefDecodeDeregister = refDecodeDeregister
)
