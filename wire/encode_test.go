package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// encodeStrings are the strings whose escaping differs between encoders:
// every ASCII control and HTML character, U+2028/U+2029, invalid and
// truncated UTF-8, multi-byte runes.
func encodeStrings() []string {
	ss := []string{"", "plain", `"quoted" \back\slash/`, "<script>&amp;</script>", "\u2028\u2029",
		"\xff\xfe", "a\xc3", "\xe2\x80", "é中𝄞", "\x7f", "tab\tnl\nret\rbs\bff\f"}
	for c := 0; c < 0x20; c++ {
		ss = append(ss, string(rune(c))+"x")
	}
	r := rand.New(rand.NewPCG(13, 13))
	alphabet := []string{"a", "\"", "\\", "<", ">", "&", "\n", "\x01", "\u2028", "\xff", "é", "\xe2\x80", "𝄞", " "}
	for range 2000 {
		var b []byte
		for range r.IntN(12) {
			b = append(b, alphabet[r.IntN(len(alphabet))]...)
		}
		ss = append(ss, string(b))
	}
	return ss
}

func TestAppendJSONStringMatchesMarshal(t *testing.T) {
	for _, s := range encodeStrings() {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, json.Marshal = %s", s, got, want)
		}
	}
}

// TestEncodeMatchesMarshal: each hand-assembled response is byte for byte
// what json.Marshal made of it, optional members present and absent, and
// an invalid registrar_health fails as json.Marshal fails.
func TestEncodeMatchesMarshal(t *testing.T) {
	e := &Encoder{}
	healths := []json.RawMessage{
		json.RawMessage(`{"limiter":{"limited_admission":3}}`),
		json.RawMessage(" {\n \"a\" : [1, 2], \"html\":\"<&>\"\n} "),
		json.RawMessage(`{}`),
	}
	r := rand.New(rand.NewPCG(1, 2))
	ss := encodeStrings()
	pick := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		return ss[r.IntN(len(ss))]
	}
	for i := range 3000 {
		h := healths[i%len(healths)]
		vs := []any{
			&RefusalResponse{ProtocolVersion: 1, RequestID: pick(), RegistrationID: pick(), Class: Class(pick()),
				Error: ErrorBody{ID: ErrorID(pick()), Reason: pick(), RetryAfter: uint64(r.IntN(3)) * r.Uint64N(1<<40), Detail: pick()}, RegistrarHealth: h},
			&MintResponse{ProtocolVersion: 1, RequestID: pick(), RegistrationID: pick(), Outcome: pick(),
				Material: Material{RoleID: pick(), WrappedSecretID: pick(), ExpiresAt: pick()}, RegistrarHealth: h},
			&DeregisterResponse{ProtocolVersion: 1, RequestID: pick(), RegistrationID: pick(), Outcome: pick(), RegistrarHealth: h},
			&HealthResponse{ProtocolVersion: 1, RegistrarHealth: h},
		}
		for _, v := range vs {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Append(nil, v)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Append(%+v):\n got %s, %v\nwant %s", v, got, err, want)
			}
		}
	}
	bad := &RefusalResponse{ProtocolVersion: 1, RegistrarHealth: json.RawMessage(`{"a":`)}
	if _, err := json.Marshal(bad); err == nil {
		t.Fatal("json.Marshal accepted invalid health JSON")
	}
	if _, err := e.Append(nil, bad); err == nil {
		t.Fatal("Append accepted invalid health JSON")
	}
}

// TestPreparedHealthOncePerSnapshot: the health member is prepared once
// per snapshot, and a new snapshot is prepared anew.
func TestPreparedHealthOncePerSnapshot(t *testing.T) {
	e := &Encoder{}
	a := json.RawMessage(`{ "a": 1 }`)
	first, _ := e.preparedHealth(a)
	c := e.hcache.Load()
	if again, _ := e.preparedHealth(a); &again[0] != &first[0] || e.hcache.Load() != c {
		t.Fatal("the same snapshot was prepared twice")
	}
	b := json.RawMessage(`{"b":2}`)
	if got, _ := e.preparedHealth(b); string(got) != `{"b":2}` {
		t.Fatalf("a new snapshot got %s", got)
	}
	if string(first) != `{"a":1}` {
		t.Fatalf("prepared %s, want the compacted JSON", first)
	}
}

// BenchmarkEncode measures the hand-written encoder against json.Marshal on
// the same responses: a mint's answer, a throttle's refusal and a health
// answer, each with the registrar_health member of the golden fixtures.
// The figure in encode.go's comment comes from here; run the two
// sub-benchmarks of a kind alternately (-count 1, several times) and quote
// the ratio.
func BenchmarkEncode(b *testing.B) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "response_mint_first_mint.json"))
	if err != nil {
		b.Fatal(err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(fixture, &members); err != nil {
		b.Fatal(err)
	}
	h := members["registrar_health"]
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"mint", &MintResponse{ProtocolVersion: 1, RequestID: "AAAAAAAAAAAA.1", RegistrationID: "h1-review-007", Outcome: "first_mint",
			Material: Material{RoleID: "role-h1-review-007", WrappedSecretID: "wsid-0123456789abcdef", ExpiresAt: "2026-12-01T12:05:00.123Z"}, RegistrarHealth: h}},
		{"refusal", &RefusalResponse{ProtocolVersion: 1, RequestID: "AAAAAAAAAAAA.1", Class: Retryable,
			Error: ErrorBody{ID: RegistrarBusy, RetryAfter: 7}, RegistrarHealth: h}},
		{"health", &HealthResponse{ProtocolVersion: 1, RegistrarHealth: h}},
	} {
		b.Run(tc.name+"/encoder", func(b *testing.B) {
			var e Encoder
			b.ReportAllocs()
			dst := make([]byte, 0, 1024) // the server's pooled buffer
			for b.Loop() {
				if dst, err = e.Append(dst[:0], tc.v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(tc.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
