package callers_test

import (
	"fmt"

	"github.com/registrar-otel/registrar-otel/callers"
)

func Example() {
	m, err := callers.New([]callers.Policy{
		{
			Name:             "control-plane",
			Identities:       []string{"unix-peer:uid=0"},
			IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/control-plane/"},
		},
		{
			Name:             "agents",
			IdentityPrefixes: []string{"registrar-client:uri:spiffe://example.org/"},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{
		"unix-peer:uid=0",
		"registrar-client:uri:spiffe://example.org/control-plane/eu1",
		"registrar-client:uri:spiffe://example.org/host/web-17",
		"unix-peer:uid=1000",
	} {
		i, _ := m.Match(id)
		fmt.Printf("%s: %s\n", id, m.Name(i))
	}

	_, err = callers.New([]callers.Policy{
		{Name: "a", Identities: []string{"unix-peer:uid=0"}},
		{Name: "b", Identities: []string{"unix-peer:uid=0"}},
	})
	fmt.Println(err)
	// Output:
	// unix-peer:uid=0: control-plane
	// registrar-client:uri:spiffe://example.org/control-plane/eu1: control-plane
	// registrar-client:uri:spiffe://example.org/host/web-17: agents
	// unix-peer:uid=1000: default
	// callers: the identity "unix-peer:uid=0" is named by policy "a" and by policy "b"; an identity takes one policy
}
