package wire_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/wire"
)

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

func TestDecodeMintAllocatesOnlyTheBodyCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count in -short mode skipped")
	}
	body := []byte(mintBody)
	if n := testing.AllocsPerRun(200, func() {
		if _, err := wire.DecodeMint(body); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("DecodeMint allocates %v times per call, want at most 1 (the body's one copy)", n)
	}
	dbody := []byte(deregisterBody)
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
	benchDecode(b, mintBody, wire.RefDecodeMint)
}
