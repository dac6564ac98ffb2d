package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
)

func verbP(v vocab.Verb) *vocab.Verb         { return &v }
func bucketP(b vocab.Bucket) *vocab.Bucket   { return &b }
func tokensP(n uint32) *uint32               { return &n }
func longIdentity(n int, fill string) string { return strings.Repeat(fill, n) }

const showAnswer = `{"identities":[{"identity":"unix-peer:uid=0","policy":"control-plane","pool":"local","buckets":[` +
	`{"verb":"mint","bucket":"predecision_refusal","state":"absent","burst":32,"refill_interval_ms":1000,"tokens":32,"retry_after_seconds":0,"shadow":null},` +
	`{"verb":"mint","bucket":"admission","state":"entry","burst":1600,"refill_interval_ms":100,"tokens":0,"retry_after_seconds":1,"shadow":{"state":"entry","burst":800,"refill_interval_ms":100,"tokens":0,"retry_after_seconds":1}}]}],` +
	`"overflow":[{"pool":"local","entries":3,"max_entries":256,"buckets":[{"policy":"default","verb":"mint","bucket":"admission","burst":512,"refill_interval_ms":500,"tokens":512,"retry_after_seconds":0}]}]}`

// The show client sends GET with the identity as the one query parameter
// (escaped), and decodes every member of the answer.
func TestLimitsClientSendsTheIdentityAndDecodesTheAnswer(t *testing.T) {
	var gotQuery url.Values
	var method, path string
	c := fakeRegistrar(t, func(w http.ResponseWriter, r *http.Request) {
		method, path, gotQuery = r.Method, r.URL.Path, r.URL.Query()
		w.Write([]byte(showAnswer))
	})
	id := "registrar-client:uri:spiffe://example.org/a b&c=d?"
	ans, err := c.Limits(context.Background(), LimitsRequest{Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet || path != PathLimits || len(gotQuery) != 1 || gotQuery.Get("identity") != id {
		t.Errorf("sent %s %s ?%v, want GET %s ?identity=%s", method, path, gotQuery, PathLimits, id)
	}
	want := LimitsAnswer{
		Identities: []IdentityLimits{{Identity: "unix-peer:uid=0", Policy: "control-plane", Pool: PoolLocal, Buckets: []KeyLimits{
			{Verb: vocab.Mint, Bucket: vocab.PredecisionRefusal, BucketLimits: BucketLimits{State: KeyAbsent, Burst: 32, RefillIntervalMS: 1000, Tokens: 32}},
			{Verb: vocab.Mint, Bucket: vocab.Admission, BucketLimits: BucketLimits{State: KeyEntry, Burst: 1600, RefillIntervalMS: 100, RetryAfterSeconds: 1},
				Shadow: &BucketLimits{State: KeyEntry, Burst: 800, RefillIntervalMS: 100, RetryAfterSeconds: 1}},
		}}},
		Overflow: []PoolOverflow{{Pool: PoolLocal, Entries: 3, MaxEntries: 256, Buckets: []OverflowBucket{
			{Policy: "default", Verb: vocab.Mint, Bucket: vocab.Admission, Burst: 512, RefillIntervalMS: 500, Tokens: 512}}}},
	}
	if !reflect.DeepEqual(*ans, want) {
		t.Errorf("decoded %+v\nwant %+v", *ans, want)
	}
	// The answer re-encodes to the bytes it was decoded from: the Go types
	// and the documented shape are one.
	if b, _ := json.Marshal(ans); string(b) != showAnswer {
		t.Errorf("re-encoded as\n%s\nwant\n%s", b, showAnswer)
	}

	if _, err := c.Limits(context.Background(), LimitsRequest{}); err != nil || path != PathLimits || len(gotQuery) != 0 {
		t.Errorf("show without an identity: %v, sent ?%v; want no query", err, gotQuery)
	}
}

// The reset client posts the request as JSON, leaving out the verb and the
// bucket when unset, and decodes the answer.
func TestLimitsResetClientPostsTheRequestAndDecodesTheAnswer(t *testing.T) {
	a := &answer{status: 200, body: []byte(`{"identity":"unix-peer:uid=1000","policy":"default","pool":"local","reset":[` +
		`{"verb":"mint","bucket":"admission","before":"entry","tokens_before":0,"tokens":8,"shadow_tokens":4}],"recorded":true}`)}
	c := fakeRegistrar(t, a.serve)
	ans, err := c.LimitsReset(context.Background(), LimitsResetRequest{Identity: "unix-peer:uid=1000", Verb: verbP(vocab.Mint), Bucket: bucketP(vocab.Admission)})
	if err != nil {
		t.Fatal(err)
	}
	if a.method != http.MethodPost || a.path != PathLimitsReset || a.ctype != "application/json" ||
		string(a.got) != `{"identity":"unix-peer:uid=1000","verb":"mint","bucket":"admission"}` {
		t.Errorf("sent %s %s (%s) %s", a.method, a.path, a.ctype, a.got)
	}
	want := LimitsResetAnswer{Identity: "unix-peer:uid=1000", Policy: "default", Pool: PoolLocal, Recorded: true,
		Reset: []KeyReset{{Verb: vocab.Mint, Bucket: vocab.Admission, Before: KeyEntry, Tokens: 8, ShadowTokens: tokensP(4)}}}
	if !reflect.DeepEqual(*ans, want) {
		t.Errorf("decoded %+v, want %+v", *ans, want)
	}
	if _, err := c.LimitsReset(context.Background(), LimitsResetRequest{Identity: "unix-peer:uid=1000"}); err != nil || string(a.got) != `{"identity":"unix-peer:uid=1000"}` {
		t.Errorf("reset of every bucket: %v, sent %s; want the identity alone", err, a.got)
	}
}

// A request the daemon would refuse is refused by the client before it is
// sent, as an *AdminRequestError naming the member.
func TestLimitsClientsRefuseABadRequestWithoutSendingIt(t *testing.T) {
	sent := 0
	c := fakeRegistrar(t, func(w http.ResponseWriter, _ *http.Request) { sent++; w.Write([]byte("{}")) })
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		call   func() error
		member string
	}{
		{"show: an identity too long", func() error {
			_, err := c.Limits(ctx, LimitsRequest{Identity: longIdentity(MaxIdentityBytes+1, "a")})
			return err
		}, "identity"},
		{"show: a control character", func() error { _, err := c.Limits(ctx, LimitsRequest{Identity: "unix-peer:uid=0\n"}); return err }, "identity"},
		{"reset: no identity", func() error { _, err := c.LimitsReset(ctx, LimitsResetRequest{}); return err }, "identity"},
		{"reset: invalid UTF-8", func() error { _, err := c.LimitsReset(ctx, LimitsResetRequest{Identity: "a\xff"}); return err }, "identity"},
		{"reset: no such verb", func() error {
			_, err := c.LimitsReset(ctx, LimitsResetRequest{Identity: "a", Verb: verbP(vocab.Verb(7))})
			return err
		}, "verb"},
		{"reset: no such bucket", func() error {
			_, err := c.LimitsReset(ctx, LimitsResetRequest{Identity: "a", Bucket: bucketP(vocab.Bucket(2))})
			return err
		}, "bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var re *AdminRequestError
			if !errors.As(err, &re) || re.Member != tc.member || !errors.Is(err, ErrAdminRequest) {
				t.Errorf("got %v, want an *AdminRequestError naming %s", err, tc.member)
			}
		})
	}
	if sent != 0 {
		t.Errorf("%d bad requests were sent", sent)
	}
}

func TestCheckIdentityBounds(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want string // "" for accepted
	}{
		{"unix-peer:uid=0", ""},
		{longIdentity(MaxIdentityBytes/2, "é"), ""},
		{longIdentity(MaxIdentityBytes, "a"), ""},
		{longIdentity(MaxIdentityBytes+1, "a"), "513 bytes, longer than the 512"},
		{"", "empty"},
		{"a\x00b", "control character (0x00) at byte 1"},
		{"a\x7f", "control character (0x7f) at byte 1"},
		{"\x1f", "control character (0x1f) at byte 0"},
		{"a\xc3", "not valid UTF-8"},
	} {
		err := CheckIdentity(tc.id)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "identity: ")) {
			t.Errorf("CheckIdentity(%.20q…) = %v, want %q", tc.id, err, tc.want)
		}
	}
}

func TestDecodeLimitsQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string // the identity, or the error's text
		bad   bool
	}{
		{"", "", false},
		{"identity=unix-peer%3Auid%3D0", "unix-peer:uid=0", false},
		{"identity=registrar-client:uri:spiffe://x/a%20b", "registrar-client:uri:spiffe://x/a b", false},
		{"identity=", "identity: empty: omit it", true},
		{"identity", "identity: empty: omit it", true},
		{"identity=a&identity=b", "identity: given more than once", true},
		{"identity=a&verb=mint", `query: unknown parameter "verb" (the one parameter is identity)`, true},
		{"Identity=a", `query: unknown parameter "Identity"`, true},
		{"identity=%zz", "query: not a query string", true},
		{"identity=a;b", "query: not a query string", true},
		{"identity=a%00", "identity: a control character (0x00)", true},
		{"identity=%ff", "identity: not valid UTF-8", true},
		{"identity=" + longIdentity(MaxIdentityBytes+1, "a"), "identity: 513 bytes", true},
	} {
		req, err := DecodeLimitsQuery(tc.query)
		switch {
		case tc.bad && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, ErrAdminRequest)):
			t.Errorf("?%.40s: %+v, %v; want an error starting %q", tc.query, req, err, tc.want)
		case !tc.bad && (err != nil || req.Identity != tc.want):
			t.Errorf("?%.40s: %+v, %v; want identity %q", tc.query, req, err, tc.want)
		}
	}
}

// resetCases are the reset codec's table, and the fuzz target's seeds.
var resetCases = []struct {
	body string
	want LimitsResetRequest
	err  string // the error's start; "" for accepted
}{
	{`{"identity":"unix-peer:uid=0"}`, LimitsResetRequest{Identity: "unix-peer:uid=0"}, ""},
	{` { "identity" : "a" , "verb" : "deregister" , "bucket" : "predecision_refusal" } `,
		LimitsResetRequest{Identity: "a", Verb: verbP(vocab.Deregister), Bucket: bucketP(vocab.PredecisionRefusal)}, ""},
	{`{"bucket":"admission","identity":"\u0061"}`, LimitsResetRequest{Identity: "a", Bucket: bucketP(vocab.Admission)}, ""},
	{`{}`, LimitsResetRequest{}, "identity: required"},
	{`{"identity":""}`, LimitsResetRequest{}, "identity: required"},
	{`{"verb":"mint"}`, LimitsResetRequest{}, "identity: required"},
	{`{"identity":"a","bukcet":"admission"}`, LimitsResetRequest{}, `"bukcet": unknown member`},
	{`{"identity":"a","Verb":"mint"}`, LimitsResetRequest{}, `"Verb": unknown member`},
	{`{"identity":"a","identity":"b"}`, LimitsResetRequest{}, "identity: given twice"},
	{`{"identity":"a","ident\u0069ty":"b"}`, LimitsResetRequest{}, "identity: given twice"},
	{`{"identity":"a","verb":null}`, LimitsResetRequest{}, "verb: null: omit the member instead"},
	{`{"identity":null}`, LimitsResetRequest{}, "identity: null"},
	{`{"identity":7}`, LimitsResetRequest{}, "identity: must be a string"},
	{`{"identity":"a","bucket":["admission"]}`, LimitsResetRequest{}, "bucket: must be a string"},
	{`{"identity":"a","verb":{"x":1}}`, LimitsResetRequest{}, "verb: must be a string"},
	{`{"identity":"a","verb":"Mint"}`, LimitsResetRequest{}, `verb: unknown verb "Mint" (want "mint" or "deregister")`},
	{`{"identity":"a","bucket":"admision"}`, LimitsResetRequest{}, `bucket: unknown bucket "admision" (want "predecision_refusal" or "admission")`},
	{`{"identity":"a"}{}`, LimitsResetRequest{}, "body: more than one JSON value"},
	{`{"identity":"a"} x`, LimitsResetRequest{}, "body: more than one JSON value"},
	{`{"identity":"a"`, LimitsResetRequest{}, "body: not a JSON object"},
	{`{"identity" "a"}`, LimitsResetRequest{}, "body: not a JSON object"},
	{`["identity","a"]`, LimitsResetRequest{}, "body: not a JSON object"},
	{`"a"`, LimitsResetRequest{}, "body: not a JSON object"},
	{``, LimitsResetRequest{}, "body: not a JSON object"},
	{`{"identity":"a` + "\xff" + `"}`, LimitsResetRequest{}, "body: not valid UTF-8"},
	{`{"identity":"a\u0000"}`, LimitsResetRequest{}, "identity: a control character"},
	{`{"identity":"` + longIdentity(MaxIdentityBytes+1, "a") + `"}`, LimitsResetRequest{}, "identity: 513 bytes"},
	{`{"identity":"a"}` + strings.Repeat(" ", MaxLimitsResetBodyBytes), LimitsResetRequest{}, "body: 8208 bytes, more than 8192"},
}

func TestDecodeLimitsReset(t *testing.T) {
	for _, tc := range resetCases {
		req, err := DecodeLimitsReset([]byte(tc.body))
		switch {
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err) || !errors.Is(err, ErrAdminRequest)):
			t.Errorf("%.60s: %+v, %v; want an error starting %q", tc.body, req, err, tc.err)
		case tc.err == "" && (err != nil || !reflect.DeepEqual(req, tc.want)):
			t.Errorf("%.60s: %+v, %v; want %+v", tc.body, req, err, tc.want)
		}
	}
	// The longest identity, every byte escaped, fits the body bound.
	var b strings.Builder
	b.WriteString(`{"identity":"`)
	for range MaxIdentityBytes {
		b.WriteString(`\u0061`)
	}
	b.WriteString(`","verb":"\u0064\u0065\u0072\u0065\u0067\u0069\u0073\u0074\u0065\u0072","bucket":"predecision_refusal"}`)
	if req, err := DecodeLimitsReset([]byte(b.String())); err != nil || len(req.Identity) != MaxIdentityBytes {
		t.Errorf("the longest identity fully escaped (%d bytes): %v", b.Len(), err)
	}
}

// FuzzDecodeLimitsReset: any body decodes or is refused as an
// *AdminRequestError, never a panic; an accepted request passes Check and
// survives its own encoding.
func FuzzDecodeLimitsReset(f *testing.F) {
	for _, tc := range resetCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeLimitsReset(body)
		if err != nil {
			if !errors.Is(err, ErrAdminRequest) {
				t.Fatalf("%q: %v is not an *AdminRequestError", body, err)
			}
			return
		}
		if err := req.Check(); err != nil {
			t.Fatalf("%q decoded to %+v, which Check refuses: %v", body, req, err)
		}
		enc, err := json.Marshal(&req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeLimitsReset(enc)
		if err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("%q → %+v → %s → %+v, %v", body, req, enc, again, err)
		}
	})
}

// Every identity a full map can hold (512 entries: at most 512
// identities), each of the longest identity spelt with the character JSON
// escapes, every number at its largest and a shadow on every bucket, fits
// MaxLimitsAnswerBytes, as the daemon encodes it.
func TestLimitsAnswerOfAFullMapFitsItsBound(t *testing.T) {
	worst := BucketLimits{State: KeyOverflow, Burst: 1<<32 - 1, RefillIntervalMS: 1<<64 - 1, Tokens: 1<<32 - 1, RetryAfterSeconds: 1<<64 - 1}
	var ans LimitsAnswer
	for i := range 512 {
		id := []byte(longIdentity(MaxIdentityBytes, `"`))
		copy(id, []byte{byte('0' + i%10), byte('0' + i/10%10), byte('0' + i/100)})
		il := IdentityLimits{Identity: string(id), Policy: longIdentity(vocab.MaxDNSLabelBytes, "p"), Pool: PoolRemote}
		for v := range vocab.Verb(vocab.NumVerbs) {
			for b := range vocab.Bucket(vocab.NumBuckets) {
				il.Buckets = append(il.Buckets, KeyLimits{Verb: v, Bucket: b, BucketLimits: worst, Shadow: &worst})
			}
		}
		ans.Identities = append(ans.Identities, il)
	}
	for _, p := range []Pool{PoolLocal, PoolRemote} {
		po := PoolOverflow{Pool: p, Entries: 256, MaxEntries: 256}
		for v := range vocab.Verb(vocab.NumVerbs) {
			for b := range vocab.Bucket(vocab.NumBuckets) {
				po.Buckets = append(po.Buckets, OverflowBucket{Policy: "control-plane-0123456789-0123456789-0123456789-0123456789-01234", Verb: v, Bucket: b, Burst: worst.Burst, RefillIntervalMS: worst.RefillIntervalMS, Tokens: worst.Tokens, RetryAfterSeconds: worst.RetryAfterSeconds})
			}
		}
		ans.Overflow = append(ans.Overflow, po)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&ans); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > MaxLimitsAnswerBytes {
		t.Fatalf("the worst full map's answer is %d bytes, over MaxLimitsAnswerBytes %d", buf.Len(), MaxLimitsAnswerBytes)
	}
	t.Logf("the worst full map's answer: %d bytes (bound %d)", buf.Len(), MaxLimitsAnswerBytes)
}

// An administrative refusal is an *AdminError; a 200 that is not the
// answer, or one over its bound, is an error naming the request.
func TestLimitsClientsReportRefusalsAndNonAnswers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		status int
		body   []byte
		want   string
		admin  string
	}{
		{403, []byte(`{"error":"AdminForbidden","detail":"no"}`), "AdminForbidden: no", AdminForbidden},
		{400, []byte(`{"error":"AdminBadRequest","detail":"identity: empty"}`), "AdminBadRequest: identity: empty", AdminBadRequest},
		{501, []byte(`{"error":"AdminUnsupported","detail":"x"}`), "AdminUnsupported: x", AdminUnsupported},
		{502, []byte("<html>"), `answered HTTP 502 to a limits request, not an administrative answer`, ""},
		{200, []byte("<html>"), `answered HTTP 200 to a limits request, not its answer`, ""},
		{200, []byte(`{"identities":[{"buckets":[{"verb":"Mint"}]}]}`), `answered HTTP 200 to a limits request, not its answer`, ""},
		{200, bytes.Repeat([]byte(" "), MaxLimitsAnswerBytes+1), "answered a limits request with more than 4194304 bytes", ""},
	} {
		a := &answer{status: tc.status, body: tc.body}
		_, err := fakeRegistrar(t, a.serve).Limits(ctx, LimitsRequest{})
		var ae *AdminError
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &ae) != (tc.admin != "") || tc.admin != "" && (ae.ID != tc.admin || ae.StatusCode != tc.status) {
			t.Errorf("show answered %d %.40s: %v, want %q", tc.status, tc.body, err, tc.want)
		}
	}
	a := &answer{status: 200, body: []byte(`{"reset":[{"before":7}]}`)}
	if _, err := fakeRegistrar(t, a.serve).LimitsReset(ctx, LimitsResetRequest{Identity: "a"}); err == nil || !strings.Contains(err.Error(), "to a limits reset, not its answer") {
		t.Errorf("reset answered garbage: %v", err)
	}
	a = &answer{status: 500, body: []byte(`{"error":"AdminFailed","detail":"audit store unwritable"}`)}
	var ae *AdminError
	if _, err := fakeRegistrar(t, a.serve).LimitsReset(ctx, LimitsResetRequest{Identity: "a"}); !errors.As(err, &ae) || ae.ID != AdminFailed || ae.StatusCode != 500 {
		t.Errorf("reset refused: %v, want AdminFailed (500)", err)
	}
}
