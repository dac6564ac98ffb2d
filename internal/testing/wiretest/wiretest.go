// Package wiretest holds the one good mint and deregister that the
// protocol's decoder tests and the server's handler tests both send: the
// request bodies, as bytes on the wire, and the requests they spell. It is
// test support: production code never imports it (cmd/registrar-otel's
// deptest holds that).
package wiretest

import (
	"strings"

	"github.com/registrar-otel/registrar-otel/wire"
)

// The request bodies: a good mint and a good deregister of h1-review-007,
// each with the idempotency key "k1".
const (
	MintBody = `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review",` +
		`"spec":{"component":"review","service_name":"review","reload":"systemctl reload review"},"wrap_ttl":300,"idempotency_key":"k1"}`
	DeregisterBody = `{"protocol_version":1,"service_name":"review","host":"h1","instance":7,"component":"review","idempotency_key":"k1"}`
)

// GoodMint is the request MintBody spells, without its idempotency key.
func GoodMint() wire.MintRequest {
	return wire.MintRequest{
		ServiceName: "review",
		Host:        "h1",
		Instance:    7,
		Component:   "review",
		Spec:        wire.Spec{Component: "review", ServiceName: "review", Reload: "systemctl reload review"},
		WrapTTL:     300,
	}
}

// GoodDeregister is the request DeregisterBody spells, without its
// idempotency key.
func GoodDeregister() wire.DeregisterRequest {
	return wire.DeregisterRequest{ServiceName: "review", Host: "h1", Instance: 7, Component: "review"}
}

// ReplaceMember returns body with the first occurrence of old replaced by
// new; it panics when old is not in body, so a fixture that drifts from
// the body it edits fails loudly instead of testing the good body.
func ReplaceMember(body, old, new string) string {
	if !strings.Contains(body, old) {
		panic("ReplaceMember: " + old + " not in body")
	}
	return strings.Replace(body, old, new, 1)
}

// Pad returns body, a JSON object, with spaces before its closing brace so
// that it is n bytes long and still valid JSON (n >= len(body)): the
// bodies at and past a size bound.
func Pad(body string, n int) string {
	return body[:len(body)-1] + strings.Repeat(" ", n-len(body)) + "}"
}
