package wire_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
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
	benchDecode(b, wiretest.DeregisterBody, wire.DecodeDeregister)
}

// BenchmarkDecodeMintEncodingJSON is the standard library's peer of
// BenchmarkDecodeMint: the same body into the same type by json.Unmarshal,
// which checks less (no duplicate members, no required ones, no bounds).
func BenchmarkDecodeMintEncodingJSON(b *testing.B) {
	benchDecode(b, wiretest.MintBody, func(body []byte) (req wire.MintRequest, err error) {
		return req, json.Unmarshal(body, &req)
	})
}

func BenchmarkDecodeMint(b *testing.B) {
	benchDecode(b, wiretest.MintBody, wire.DecodeMint)
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

// agreeBodies are bodies aimed at the places a one-pass grammar check can
// differ from json.Valid: every number, literal and escape form, depth at
// and past encoding/json's limit, and damage after an otherwise good
// object.
func agreeBodies() []string {
	deep := func(n int, open, close string) string {
		return `{"protocol_version":1,"x":` + strings.Repeat(open, n) + strings.Repeat(close, n) + `}`
	}
	bodies := []string{
		``, ` `, `{`, `}`, `[]`, `"x"`, `1`, `null`, `{} {}`, `{}x`, `{} `, "{}\n",
		`{"protocol_version":1}`, `{"protocol_version":1,}`, `{,"protocol_version":1}`,
		`{"protocol_version" 1}`, `{"protocol_version":1 "host":"h"}`, `{"protocol_version":01}`,
		`{"protocol_version":-0}`, `{"protocol_version":1.0}`, `{"protocol_version":1e0}`, `{"protocol_version":1E+0}`,
		`{"protocol_version":1,"x":-}`, `{"protocol_version":1,"x":1.}`, `{"protocol_version":1,"x":.5}`,
		`{"protocol_version":1,"x":-`, `{"protocol_version":1,"x":-9}`, `{"protocol_version":1,"x":9.5}`,
		`{"protocol_version":1,"x":9e1}`, `{"protocol_version":1,"x":[-9,9.0,0.9,-0.9e-9]}`,
		`{"protocol_version":1,"x":1e}`, `{"protocol_version":1,"x":1e+}`, `{"protocol_version":1,"x":+1}`,
		`{"protocol_version":1,"x":tru}`, `{"protocol_version":1,"x":truex}`, `{"protocol_version":1,"x":nul}`,
		`{"protocol_version":1,"x":[1,2,]}`, `{"protocol_version":1,"x":[,]}`, `{"protocol_version":1,"x":{"a"}}`,
		`{"protocol_version":1,"x":{"a":1,}}`, `{"protocol_version":1,"x":{1:1}}`, `{"protocol_version":1,"x":[{"a":[{}]}]}`,
		`{"protocol_version":1,"x":"\u00e9\ud800\\\/\b\f\n\r\t"}`, `{"protocol_version":1,"x":"\u00g0"}`,
		`{"protocol_version":1,"x":"\x"}`, "{\"protocol_version\":1,\"x\":\"a\x01b\"}", `{"protocol_version":1,"x":"abc`,
		`{"protocol_version":1,"\u0068ost":"h","host":"h2"}`, `{"protocol_version":1,"host":"\u0068"}`,
		`{"protocol_version":1,"spec":{"component":"c","component":"d"}}`, `{"protocol_version":1,"spec":[]}`,
		`{"protocol_version":1,"spec":{"a":{"b":[1,{"c":null}]}}}`, `{"protocol_version":1,"instance":0}`,
		`{"protocol_version":1,"instance":4294967296}`, `{"protocol_version":1,"wrap_ttl":18446744073709551616}`,
		"\t\r\n {\"protocol_version\" : 1 , \"host\" : \"h\" } \t\r\n",
		deep(9998, "[", "]"), deep(9999, "[", "]"), deep(10000, "[", "]"),
		deep(9998, `{"a":`, "}"), deep(9999, `{"a":`, "}"),
		`{"protocol_version":1,"x":` + strings.Repeat("[", 20000),
		"\xff", "{\"protocol_version\":1,\"host\":\"\xc3\"}",
	}
	for i := 0; i < 40; i++ { // past the dupSet's fixed array, with a late duplicate
		bodies = append(bodies, `{"protocol_version":1,`+strings.Repeat(`"m":1,`, 0)+manyMembers(i)+`}`)
	}
	return bodies
}

func manyMembers(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(`"m`)
		b.WriteByte(byte('a' + i%26))
		b.WriteByte(byte('a' + i/26))
		b.WriteString(`":1,`)
	}
	b.WriteString(`"maa":2`)
	return b.String()
}

func detailOf(err error) string {
	var me *wire.MalformedError
	if errors.As(err, &me) {
		return me.Detail
	}
	if err != nil {
		return "non-malformed error: " + err.Error()
	}
	return ""
}

// checkAgree: the single-pass decoder and the reference (the decoder before
// it, json.Valid pre-pass and all) give the same request or the same detail.
func checkAgree(t *testing.T, body []byte) {
	t.Helper()
	gotM, errM := wire.DecodeMint(body)
	wantM, wantErrM := wire.RefDecodeMint(body)
	if detailOf(errM) != detailOf(wantErrM) || gotM != wantM {
		t.Fatalf("DecodeMint(%.200q):\n got %+v, %q\nwant %+v, %q", body, gotM, detailOf(errM), wantM, detailOf(wantErrM))
	}
	gotD, errD := wire.DecodeDeregister(body)
	wantD, wantErrD := wire.RefDecodeDeregister(body)
	if detailOf(errD) != detailOf(wantErrD) || gotD != wantD {
		t.Fatalf("DecodeDeregister(%.200q):\n got %+v, %q\nwant %+v, %q", body, gotD, detailOf(errD), wantD, detailOf(wantErrD))
	}
}

func agreeSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, tc := range mintDecodeCases() {
		seeds = append(seeds, []byte(tc.body))
	}
	for _, tc := range deregisterDecodeCases() {
		seeds = append(seeds, []byte(tc.body))
	}
	for _, b := range agreeBodies() {
		seeds = append(seeds, []byte(b))
	}
	files, err := filepath.Glob(filepath.Join("testdata", "request_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("request fixtures: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

func TestDecodeAgreesWithReference(t *testing.T) {
	for _, body := range agreeSeeds(t) {
		checkAgree(t, body)
	}
}

func FuzzDecodeAgreesWithReference(f *testing.F) {
	for _, b := range agreeSeeds(f) {
		if len(b) <= 4096 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkAgree(t, body) })
}

// TestTheDecodersTakeABodyOfExactlyMaxBodyBytes holds the decoder's own
// bound, apart from the server's (server's TestABodyOfExactlyMaxBodyBytesIsAccepted):
// a body of exactly MaxBodyBytes decodes, one byte more is malformed with
// the bound named, for both verbs.
func TestTheDecodersTakeABodyOfExactlyMaxBodyBytes(t *testing.T) {
	for _, v := range []struct {
		name   string
		body   string
		decode func([]byte) error
	}{
		{"mint", wiretest.MintBody, func(b []byte) error { _, err := wire.DecodeMint(b); return err }},
		{"deregister", wiretest.DeregisterBody, func(b []byte) error { _, err := wire.DecodeDeregister(b); return err }},
	} {
		if err := v.decode([]byte(wiretest.Pad(v.body, wire.MaxBodyBytes))); err != nil {
			t.Errorf("%s: a body of exactly %d bytes: %v, want accepted", v.name, wire.MaxBodyBytes, err)
		}
		err := v.decode([]byte(wiretest.Pad(v.body, wire.MaxBodyBytes+1)))
		var me *wire.MalformedError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), "exceeds 65536 bytes") {
			t.Errorf("%s: a body of %d bytes: %v, want a MalformedError naming the bound", v.name, wire.MaxBodyBytes+1, err)
		}
	}
}

func TestDecodeMintAllocatesOnlyTheBodyCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count in -short mode skipped")
	}
	body := []byte(wiretest.MintBody)
	if n := testing.AllocsPerRun(200, func() {
		if _, err := wire.DecodeMint(body); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("DecodeMint allocates %v times per call, want at most 1 (the body's one copy)", n)
	}
	dbody := []byte(wiretest.DeregisterBody)
	if n := testing.AllocsPerRun(200, func() {
		if _, err := wire.DecodeDeregister(dbody); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("DecodeDeregister allocates %v times per call, want at most 1", n)
	}
}

// BenchmarkDecodeMintReference is the decoder before the single-pass
// rewrite, the peer of BenchmarkDecodeMint.
func BenchmarkDecodeMintReference(b *testing.B) {
	benchDecode(b, wiretest.MintBody, wire.RefDecodeMint)
}
