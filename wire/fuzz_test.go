package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/wiretest"
	"github.com/registrar-otel/registrar-otel/wire"
)

// checkRejected: every rejection is a *MalformedError with a bounded,
// non-empty detail.
func checkRejected(t *testing.T, err error) {
	var me *wire.MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("got %T %v, want a *wire.MalformedError", err, err)
	}
	if me.Detail == "" || len(me.Detail) > wire.MaxDetailBytes {
		t.Fatalf("detail is %d bytes, want 1..%d", len(me.Detail), wire.MaxDetailBytes)
	}
}

// generic decodes an accepted body with encoding/json, as an independent
// reading of the members the decoder took.
func generic(t *testing.T, body []byte) map[string]any {
	if len(body) > wire.MaxBodyBytes {
		t.Fatalf("accepted a %d-byte body", len(body))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("accepted a body encoding/json rejects: %v", err)
	}
	if m["protocol_version"] != json.Number("1") {
		t.Fatalf("accepted protocol_version %v", m["protocol_version"])
	}
	return m
}

func agree(t *testing.T, m map[string]any, member string, got any) {
	t.Helper()
	want, present := m[member]
	switch g := got.(type) {
	case string:
		if !present && g == "" {
			return
		}
		if want != g {
			t.Fatalf("%s: decoder took %q, encoding/json reads %v", member, g, want)
		}
	case uint64:
		if !present && g == 0 {
			return
		}
		n, ok := want.(json.Number)
		if !ok || string(n) != strconv.FormatUint(g, 10) {
			t.Fatalf("%s: decoder took %d, encoding/json reads %v", member, g, want)
		}
	}
}

func FuzzDecodeMint(f *testing.F) {
	for _, tc := range mintDecodeCases() {
		if len(tc.body) <= 4096 { // the two giant cases stay in the table tests
			f.Add([]byte(tc.body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := wire.DecodeMint(body)
		if err != nil {
			checkRejected(t, err)
			return
		}
		m := agreeShared(t, body, req.ServiceName, req.Host, req.Component, req.Instance, req.IdempotencyKey)
		agree(t, m, "wrap_ttl", req.WrapTTL)
		spec, ok := m["spec"].(map[string]any)
		if !ok {
			t.Fatalf("accepted spec %v", m["spec"])
		}
		agree(t, spec, "component", req.Spec.Component)
		agree(t, spec, "service_name", req.Spec.ServiceName)
		agree(t, spec, "reload", req.Spec.Reload)
	})
}

func FuzzDecodeDeregister(f *testing.F) {
	for _, tc := range deregisterDecodeCases() {
		f.Add([]byte(tc.body))
	}
	f.Add([]byte(wiretest.MintBody))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := wire.DecodeDeregister(body)
		if err != nil {
			checkRejected(t, err)
			return
		}
		agreeShared(t, body, req.ServiceName, req.Host, req.Component, req.Instance, req.IdempotencyKey)
	})
}

// agreeShared checks the members a mint and a deregister share against
// encoding/json's reading of body, and returns that reading.
func agreeShared(t *testing.T, body []byte, serviceName, host, component string, instance uint32, key string) map[string]any {
	t.Helper()
	m := generic(t, body)
	agree(t, m, "service_name", serviceName)
	agree(t, m, "host", host)
	agree(t, m, "component", component)
	agree(t, m, "instance", uint64(instance))
	agree(t, m, "idempotency_key", key)
	return m
}
