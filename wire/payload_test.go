package wire_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// decodeCase is one body for a decoder: accepted as want, or rejected with
// a detail containing wantDetail.
type decodeCase[R comparable] struct {
	name       string
	body       string
	want       R
	wantDetail string
}

type (
	mintDecodeCase       = decodeCase[wire.MintRequest]
	deregisterDecodeCase = decodeCase[wire.DeregisterRequest]
)

// mutated returns r changed by mut (if any).
func mutated[R any](r R, mut func(*R)) R {
	if mut != nil {
		mut(&r)
	}
	return r
}

func wantMint(mut func(*wire.MintRequest)) wire.MintRequest {
	r := wiretest.GoodMint()
	r.ProtocolVersion, r.IdempotencyKey = 1, "k1"
	return mutated(r, mut)
}

func mintDecodeCases() []mintDecodeCase {
	return []mintDecodeCase{
		// Accepted.
		{name: "full request", body: wiretest.MintBody, want: wantMint(nil)},
		{name: "without instance", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7,`, ``), want: wantMint(func(r *wire.MintRequest) { r.Instance = 0 })},
		{name: "largest instance", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":4294967295`), want: wantMint(func(r *wire.MintRequest) { r.Instance = 4294967295 })},
		{name: "without idempotency key", body: wiretest.ReplaceMember(wiretest.MintBody, `,"idempotency_key":"k1"`, ``), want: wantMint(func(r *wire.MintRequest) { r.IdempotencyKey = "" })},
		{name: "wrap ttl zero is the verbs' to refuse", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":0`), want: wantMint(func(r *wire.MintRequest) { r.WrapTTL = 0 })},
		{name: "largest wrap ttl", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":18446744073709551615`), want: wantMint(func(r *wire.MintRequest) { r.WrapTTL = 18446744073709551615 })},
		{name: "empty strings are the verbs' to refuse", body: wiretest.ReplaceMember(wiretest.MintBody, `"service_name":"review","host"`, `"service_name":"","host"`), want: wantMint(func(r *wire.MintRequest) { r.ServiceName = "" })},
		{name: "unknown members ignored at every level", body: wiretest.ReplaceMember(wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":300,"future":{"a":[1,{"b":null}]},"x":null`), `"reload":`, `"extra":[true],"reload":`), want: wantMint(nil)},
		{name: "escaped member names", body: wiretest.ReplaceMember(wiretest.MintBody, `"service_name":"review","host"`, `"service\u005fname":"review","host"`), want: wantMint(nil)},
		{name: "whitespace around the object", body: " \n\t" + wiretest.MintBody + "\r\n ", want: wantMint(nil)},
		{name: "members in another order", body: `{"wrap_ttl":300,"spec":{"reload":"r","service_name":"review","component":"review"},"component":"review","host":"h1","service_name":"review","protocol_version":1}`,
			want: wire.MintRequest{ProtocolVersion: 1, ServiceName: "review", Host: "h1", Component: "review", Spec: wire.Spec{Component: "review", ServiceName: "review", Reload: "r"}, WrapTTL: 300}},
		{name: "unicode in strings", body: wiretest.ReplaceMember(wiretest.MintBody, `"systemctl reload review"`, `"reload \u00e9 é"`), want: wantMint(func(r *wire.MintRequest) { r.Spec.Reload = "reload é é" })},

		// Rejected by the codec.
		{name: "empty body", body: ``, wantDetail: "request body is empty"},
		{name: "not JSON", body: `protocol_version=1`, wantDetail: "not valid JSON"},
		{name: "truncated JSON", body: wiretest.MintBody[:40], wantDetail: "not valid JSON"},
		{name: "an array", body: `[` + wiretest.MintBody + `]`, wantDetail: "must be a JSON object, got an array"},
		{name: "null", body: `null`, wantDetail: "must be a JSON object, got null"},
		{name: "data after the object", body: wiretest.MintBody + `{}`, wantDetail: "after top-level value"},
		{name: "invalid UTF-8", body: wiretest.ReplaceMember(wiretest.MintBody, `"h1"`, "\"h\xff\""), wantDetail: "not valid UTF-8"},
		{name: "missing protocol_version", body: wiretest.ReplaceMember(wiretest.MintBody, `"protocol_version":1,`, ``), wantDetail: "protocol_version: required"},
		{name: "protocol_version 2", body: wiretest.ReplaceMember(wiretest.MintBody, `"protocol_version":1`, `"protocol_version":2`), wantDetail: "protocol_version: must be 1"},
		{name: "protocol_version 1.0", body: wiretest.ReplaceMember(wiretest.MintBody, `"protocol_version":1`, `"protocol_version":1.0`), wantDetail: "protocol_version: must be 1"},
		{name: "protocol_version as a string", body: wiretest.ReplaceMember(wiretest.MintBody, `"protocol_version":1`, `"protocol_version":"1"`), wantDetail: "protocol_version: must be the integer 1, got a string"},
		{name: "wrong protocol_version reported before other problems", body: `{"service_name":5,"protocol_version":2}`, wantDetail: "protocol_version: must be 1"},
		{name: "missing service_name", body: wiretest.ReplaceMember(wiretest.MintBody, `"service_name":"review","host"`, `"host"`), wantDetail: "service_name: required"},
		{name: "null service_name", body: wiretest.ReplaceMember(wiretest.MintBody, `"service_name":"review","host"`, `"service_name":null,"host"`), wantDetail: "service_name: must be a string, got null"},
		{name: "numeric service_name", body: wiretest.ReplaceMember(wiretest.MintBody, `"service_name":"review","host"`, `"service_name":5,"host"`), wantDetail: "service_name: must be a string, got a number"},
		{name: "missing host", body: wiretest.ReplaceMember(wiretest.MintBody, `"host":"h1",`, ``), wantDetail: "host: required"},
		{name: "boolean host", body: wiretest.ReplaceMember(wiretest.MintBody, `"host":"h1"`, `"host":true`), wantDetail: "host: must be a string, got a boolean"},
		{name: "missing component", body: wiretest.ReplaceMember(wiretest.MintBody, `"component":"review","spec"`, `"spec"`), wantDetail: "component: required"},
		{name: "null instance", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":null`), wantDetail: "instance: must not be null"},
		{name: "instance zero is not absence", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":0`), wantDetail: "instance: must be 1 or more when present"},
		{name: "negative instance", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":-1`), wantDetail: "instance: must be a non-negative integer, got a negative number"},
		{name: "fractional instance", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":7.5`), wantDetail: "instance: must be an integer"},
		{name: "instance with an exponent", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":7e0`), wantDetail: "instance: must be an integer"},
		{name: "string instance", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":"7"`), wantDetail: "instance: must be a non-negative integer, got a string"},
		{name: "instance past 32 bits", body: wiretest.ReplaceMember(wiretest.MintBody, `"instance":7`, `"instance":4294967296`), wantDetail: "instance: out of range"},
		{name: "missing wrap_ttl", body: wiretest.ReplaceMember(wiretest.MintBody, `,"wrap_ttl":300`, ``), wantDetail: "wrap_ttl: required"},
		{name: "string wrap_ttl", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":"300"`), wantDetail: "wrap_ttl: must be a non-negative integer, got a string"},
		{name: "negative wrap_ttl", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":-300`), wantDetail: "wrap_ttl: must be a non-negative integer, got a negative number"},
		{name: "wrap_ttl past 64 bits", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":18446744073709551616`), wantDetail: "wrap_ttl: out of range"},
		{name: "null wrap_ttl", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":null`), wantDetail: "wrap_ttl: must not be null"},
		{name: "missing spec", body: `{"protocol_version":1,"service_name":"review","host":"h1","component":"review","wrap_ttl":300}`, wantDetail: "spec: required"},
		{name: "null spec", body: `{"protocol_version":1,"service_name":"review","host":"h1","component":"review","spec":null,"wrap_ttl":300}`, wantDetail: "spec: must be an object, got null"},
		{name: "spec as an array", body: `{"protocol_version":1,"service_name":"review","host":"h1","component":"review","spec":[],"wrap_ttl":300}`, wantDetail: "spec: must be an object, got an array"},
		{name: "spec without reload", body: wiretest.ReplaceMember(wiretest.MintBody, `,"reload":"systemctl reload review"`, ``), wantDetail: "spec.reload: required"},
		{name: "spec with a numeric reload", body: wiretest.ReplaceMember(wiretest.MintBody, `"reload":"systemctl reload review"`, `"reload":1`), wantDetail: "spec.reload: must be a string, got a number"},
		{name: "duplicate member in spec", body: wiretest.ReplaceMember(wiretest.MintBody, `"reload":`, `"component":"x","reload":`), wantDetail: `spec: duplicate member "component"`},
		{name: "duplicate service_name", body: wiretest.ReplaceMember(wiretest.MintBody, `"host":"h1"`, `"host":"h1","service_name":"other"`), wantDetail: `request body: duplicate member "service_name"`},
		{name: "duplicate protocol_version", body: wiretest.ReplaceMember(wiretest.MintBody, `"host":"h1"`, `"host":"h1","protocol_version":1`), wantDetail: `duplicate member "protocol_version"`},
		{name: "duplicate member spelt with an escape", body: wiretest.ReplaceMember(wiretest.MintBody, `"host":"h1"`, `"host":"h1","\u0068ost":"h2"`), wantDetail: `duplicate member "host"`},
		{name: "duplicate unknown member", body: wiretest.ReplaceMember(wiretest.MintBody, `"host":"h1"`, `"host":"h1","x":1,"x":2`), wantDetail: `duplicate member "x"`},
		{name: "numeric idempotency_key", body: wiretest.ReplaceMember(wiretest.MintBody, `"idempotency_key":"k1"`, `"idempotency_key":1`), wantDetail: "idempotency_key: must be a string, got a number"},
		{name: "null idempotency_key", body: wiretest.ReplaceMember(wiretest.MintBody, `"idempotency_key":"k1"`, `"idempotency_key":null`), wantDetail: "idempotency_key: must be a string, got null"},
		{name: "nesting past the decoder's depth", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":300,"deep":`+strings.Repeat("[", 10001)+strings.Repeat("]", 10001)), wantDetail: "not valid JSON"},
		{name: "body over 64 KiB", body: wiretest.ReplaceMember(wiretest.MintBody, `"wrap_ttl":300`, `"wrap_ttl":300,"pad":"`+strings.Repeat("p", wire.MaxBodyBytes)+`"`), wantDetail: "request body exceeds 65536 bytes"},
	}
}

func wantDeregister(mut func(*wire.DeregisterRequest)) wire.DeregisterRequest {
	r := wiretest.GoodDeregister()
	r.ProtocolVersion, r.IdempotencyKey = 1, "k1"
	return mutated(r, mut)
}

func deregisterDecodeCases() []deregisterDecodeCase {
	return []deregisterDecodeCase{
		{name: "full request", body: wiretest.DeregisterBody, want: wantDeregister(nil)},
		{name: "without instance", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"instance":7,`, ``), want: wantDeregister(func(r *wire.DeregisterRequest) { r.Instance = 0 })},
		{name: "mint members are unknown here and ignored", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"component":"review"`, `"component":"review","spec":null,"wrap_ttl":"x"`), want: wantDeregister(nil)},
		{name: "empty body", body: ``, wantDetail: "request body is empty"},
		{name: "bad JSON", body: `{"protocol_version":1,`, wantDetail: "not valid JSON"},
		{name: "protocol_version 0", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"protocol_version":1`, `"protocol_version":0`), wantDetail: "protocol_version: must be 1"},
		{name: "missing service_name", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"service_name":"review",`, ``), wantDetail: "service_name: required"},
		{name: "null instance", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"instance":7`, `"instance":null`), wantDetail: "instance: must not be null"},
		{name: "instance zero is not absence", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"instance":7`, `"instance":0`), wantDetail: "instance: must be 1 or more when present"},
		{name: "negative instance", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"instance":7`, `"instance":-7`), wantDetail: "instance: must be a non-negative integer"},
		{name: "missing host", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"host":"h1",`, ``), wantDetail: "host: required"},
		{name: "missing component", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"component":"review",`, ``), wantDetail: "component: required"},
		{name: "duplicate component", body: wiretest.ReplaceMember(wiretest.DeregisterBody, `"component":"review"`, `"component":"review","component":"review"`), wantDetail: `duplicate member "component"`},
	}
}

// checkRejection asserts err is a *MalformedError with a bounded detail
// containing want.
func checkRejection(t *testing.T, err error, want string) {
	t.Helper()
	var me *wire.MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("got error %v (%T), want a *wire.MalformedError", err, err)
	}
	if me.Detail == "" || len(me.Detail) > wire.MaxDetailBytes {
		t.Fatalf("detail is %d bytes, want 1..%d", len(me.Detail), wire.MaxDetailBytes)
	}
	if !strings.Contains(me.Detail, want) {
		t.Fatalf("detail got %q, want it to contain %q", me.Detail, want)
	}
}

func TestDecodeMint(t *testing.T) {
	runDecodeCases(t, mintDecodeCases(), wire.DecodeMint)
}

func TestDecodeDeregister(t *testing.T) {
	runDecodeCases(t, deregisterDecodeCases(), wire.DecodeDeregister)
}

// runDecodeCases runs each case through decode as a subtest.
func runDecodeCases[R comparable](t *testing.T, cases []decodeCase[R], decode func([]byte) (R, error)) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode([]byte(tc.body))
			if tc.wantDetail != "" {
				checkRejection(t, err, tc.wantDetail)
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %+v", err, tc.want)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestEncodedRequestsDecodeBack: what the client sends, the server reads.
func TestEncodedRequestsDecodeBack(t *testing.T) {
	m := wiretest.GoodMint()
	m.ProtocolVersion, m.IdempotencyKey = 1, "k"
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := wire.DecodeMint(b); err != nil || got != m {
		t.Fatalf("got %+v, %v, want %+v", got, err, m)
	}
	d := wiretest.GoodDeregister()
	d.ProtocolVersion, d.Instance = 1, 0
	b, err = json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := wire.DecodeDeregister(b); err != nil || got != d {
		t.Fatalf("got %+v, %v, want %+v", got, err, d)
	}
}

func TestManyTinyMembersDecodeInLinearTime(t *testing.T) {
	// ~10 000 distinct unknown members in 64 KiB: the duplicate check must
	// not be quadratic. (A correctness check; the time is the benchmark's.)
	var b strings.Builder
	b.WriteString(`{"protocol_version":1,"service_name":"s","host":"h","component":"c"`)
	for i := 0; b.Len() < wire.MaxBodyBytes-64; i++ {
		b.WriteString(`,"`)
		b.WriteString(strings.Repeat("x", 1+i%3))
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`":0`)
	}
	b.WriteString(`}`)
	if _, err := wire.DecodeDeregister([]byte(b.String())); err != nil {
		t.Fatalf("got %v, want accepted", err)
	}
}
