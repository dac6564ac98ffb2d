package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

// edgeBodies are aimed at the decoder's shortcuts: known names matched as
// constants (so every near miss, escape and case change of one), strings
// scanned eight bytes at a time (so a quote, a backslash, a control
// character and a multi-byte character at every offset), plain integers
// read by hand (so every number form and range edge), and the compact
// colon (so white space around it).
func edgeBodies() []string {
	const base = `"protocol_version":1,"service_name":"s","host":"h","component":"c",` +
		`"spec":{"component":"c","service_name":"s","reload":"r"},"wrap_ttl":3`
	wrap := func(members string) string { return `{` + members + `}` }
	var bodies []string
	names := []string{"protocol_version", "service_name", "host", "instance", "component", "spec",
		"wrap_ttl", "idempotency_key", "reload"}
	for _, n := range names {
		escaped := `\u00` + hex2(n[0]) + n[1:]
		for _, v := range []string{n, n + "x", n[:len(n)-1], escaped, strings.ToUpper(n[:1]) + n[1:], n + `\n`} {
			bodies = append(bodies,
				wrap(base+`,"`+v+`":"x"`),
				wrap(base+`,"`+v+`":7`),
				wrap(`"`+v+`":{},`+base),
				strings.Replace(wrap(base), `"reload":"r"`, `"reload":"r","`+v+`":"y"`, 1),
				strings.Replace(wrap(base), `"spec":{`, `"spec":{"`+v+`":[1],`, 1),
			)
		}
		// The same name twice, once spelt with an escape: a duplicate.
		bodies = append(bodies,
			wrap(base+`,"`+n+`":1,"`+escaped+`":1`),
			strings.Replace(wrap(base), `"spec":{`, `"spec":{"`+n+`":1,"`+escaped+`":2,`, 1),
		)
	}
	for off := 0; off < 20; off++ {
		pad := strings.Repeat("a", off)
		for _, c := range []string{`"`, `\\`, `\"`, `\n`, `\u0041`, `\u00`, `\q`, "\x01", "\x1f", "\t", "é", "😀", " ", "\x7f"} {
			v := pad + c + "z"
			bodies = append(bodies,
				strings.Replace(wrap(base), `"host":"h"`, `"host":"`+v+`"`, 1),
				strings.Replace(wrap(base), `"reload":"r"`, `"reload":"`+v+`"`, 1),
				wrap(base+`,"`+v+`":1`),
				wrap(base+`,"x":"`+v+`"`),
			)
		}
		// A body that ends inside a string, at every offset.
		bodies = append(bodies, wrap(base)[:len(base)-off])
	}
	for _, num := range []string{"0", "1", "2", "9", "10", "01", "-1", "-0", "1.0", "1e2", "1E2", "1.", "1e", "0.5",
		"4294967295", "4294967296", "9999999999999999999", "18446744073709551615", "18446744073709551616",
		"123456789012345678901", "null", "true", `"1"`, "[]", "{}"} {
		bodies = append(bodies,
			wrap(base+`,"instance":`+num),
			strings.Replace(wrap(base), `"wrap_ttl":3`, `"wrap_ttl":`+num, 1),
			strings.Replace(wrap(base), `"protocol_version":1`, `"protocol_version":`+num, 1),
			wrap(base+`,"x":`+num),
			wrap(base+`,"instance":`+num+`}`),
		)
	}
	for _, sp := range []string{" ", "\t", "\r\n", "  \n "} {
		bodies = append(bodies,
			strings.ReplaceAll(wrap(base), `":`, `"`+sp+`:`),
			strings.ReplaceAll(wrap(base), `":`, `":`+sp),
			strings.ReplaceAll(wrap(base), `,`, sp+`,`+sp),
			strings.ReplaceAll(wrap(base), `}`, sp+`}`),
			strings.ReplaceAll(wrap(base), `{`, `{`+sp),
			strings.ReplaceAll(wrap(base), `":`, `"`+sp+"\x01:"),
		)
	}
	// The depth limit, counted from the body, through each kind of member.
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, n := range []int{9998, 9999, 10000} {
		bodies = append(bodies,
			strings.Replace(wrap(base), `"host":"h"`, `"host":`+nest(n), 1),
			strings.Replace(wrap(base), `"wrap_ttl":3`, `"wrap_ttl":`+nest(n), 1),
			strings.Replace(wrap(base), `"reload":"r"`, `"reload":`+nest(n), 1),
			strings.Replace(wrap(base), `"reload":"r"`, `"reload":"r","x":`+nest(n), 1),
			strings.Replace(wrap(base), `"spec":{"component":"c","service_name":"s","reload":"r"}`, `"spec":`+nest(n), 1),
		)
	}
	// spec and wrap_ttl are a deregister's unknown members: any JSON.
	bodies = append(bodies,
		wrap(`"protocol_version":1,"service_name":"s","host":"h","component":"c","spec":5,"wrap_ttl":"x"`),
		wrap(`"protocol_version":1,"service_name":"s","host":"h","component":"c","spec":{"component":1,"component":2}`),
		wrap(`"protocol_version":1,"service_name":"s","host":"h","component":"c","reload":1,"reload":2`),
		wrap(base+`,"spec":[]`),
		strings.Replace(wrap(base), `"spec":{"component":"c","service_name":"s","reload":"r"}`, `"spec":{}`, 1),
		strings.Replace(wrap(base), `"spec":{"component":"c","service_name":"s","reload":"r"}`, `"spec":{ }`, 1),
		strings.Replace(wrap(base), `"spec":{"component":"c","service_name":"s","reload":"r"}`, `"spec":{"reload":"r"}`, 1),
		strings.Replace(wrap(base), `"spec":{"component":"c","service_name":"s","reload":"r"}`, `"spec":{"component":"c",}`, 1),
		strings.Replace(wrap(base), `"spec":{"component":"c","service_name":"s","reload":"r"}`, `"spec":{"component":"c"`, 1),
		`{"h`, `{"`, `{"host"`, `{"host":`, `{"protocol_version"`, `{"spec":{"re`,
	)
	return bodies
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}

func TestDecodeAgreesWithReferenceOnEdges(t *testing.T) {
	bodies := edgeBodies()
	if len(bodies) < 1000 {
		t.Fatalf("only %d edge bodies", len(bodies))
	}
	for _, b := range bodies {
		checkAgree(t, []byte(b))
	}
}

// BenchmarkDecodeDeregister is BenchmarkDecodeMint's sibling: the
// deregister body every throttled deregister is decoded from.
func BenchmarkDecodeDeregister(b *testing.B) {
	benchDecode(b, deregisterBody, wire.DecodeDeregister)
}

// BenchmarkDecodeMintEncodingJSON is the standard library's peer of
// BenchmarkDecodeMint: the same body into the same type by json.Unmarshal,
// which checks less (no duplicate members, no required ones, no bounds).
func BenchmarkDecodeMintEncodingJSON(b *testing.B) {
	benchDecode(b, mintBody, func(body []byte) (req wire.MintRequest, err error) {
		return req, json.Unmarshal(body, &req)
	})
}

func BenchmarkDecodeMint(b *testing.B) {
	benchDecode(b, mintBody, wire.DecodeMint)
}

// benchDecode measures decode on body, allocations and throughput.
func benchDecode[R any](b *testing.B, body string, decode func([]byte) (R, error)) {
	in := []byte(body)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := decode(in); err != nil {
			b.Fatal(err)
		}
	}
}
