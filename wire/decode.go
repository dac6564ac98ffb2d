package wire

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

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
//
// Why by hand, not encoding/json: a throttled flood is answered after this
// decode, so its cost is the floor of every refused request. The figures,
// from BenchmarkDecodeMint against its peers in the same run
// (BenchmarkDecodeMintEncodingJSON: json.Unmarshal of the same body into
// MintRequest, which checks less; BenchmarkDecodeMintReference: the
// json.Valid-based decoder this one replaced, frozen in refdecode_test.go):
//
//   - commit 5225c51 (single pass, strings sliced from one copy): DecodeMint
//     2.7 µs and 26 allocations -> 0.84 µs and 1 (the body's copy);
//   - commit 7feddbf (members decoded as met, known names matched as
//     constants, strings scanned eight bytes at a time): 942 ns -> 371 ns
//     (2.8x; deregister 493 -> 210 ns), still 1 allocation;
//   - re-run for issue 23 (8 interleaved passes, 2 cores under a load of
//     14, so absolute figures are high): DecodeMint median 603 ns, 1
//     allocation (224 B); encoding/json 7.3x slower per pass (3.8-13x),
//     14 allocations (464 B); the reference 8.9x (4.9-18x), 26.
//
// They run with go test -run '^$' -bench '^BenchmarkDecode' -benchmem
// ./wire/ (and make bench); the ratio to encoding/json is what keeps this
// code justified.
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

// minFieldBound is the smallest of the FieldBounds maxima: a string no
// longer is within every bound, so only a longer one is looked up.
var minFieldBound = func() int {
	m := MaxBodyBytes
	for _, b := range fieldBounds {
		m = min(m, b.MaxBytes)
	}
	return m
}()

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
