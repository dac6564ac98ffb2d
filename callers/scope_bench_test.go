package callers

import (
	"testing"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// benchScope is a policy's scope of 16 patterns: 6 services, 4
// components, 4 hosts ({identity} among them) and both verbs.
var benchScope = ScopeSpec{
	Services:   []string{"review", "billing", "ingest-??", "*-canary", "edge-*", "search-*-api"},
	Components: []string{"agent", "collector-*", "review", "edge-proxy"},
	Hosts:      []string{"gw-?", "lb-0?", "edge-*-eu", IdentityPattern},
	Verbs:      []string{"mint", "deregister"},
}

// BenchmarkScopeCheck16 is one check against benchScope: a call in scope
// whose service, component and host each match their key's last pattern
// (the host by {identity}), and one out of scope on the host, the last
// dimension checked, after trying all of its patterns; each beside the
// naive model (path.Match for the globs, the identity's host derived on
// every call), the peer glob.go's figure is measured against.
func BenchmarkScopeCheck16(b *testing.B) {
	s, err := CompileScope("edge", benchScope)
	if err != nil {
		b.Fatal(err)
	}
	const identity = "registrar-client:uri:spiffe://example.org/host/web-17"
	idHost, hasHost := IdentityHost(identity)
	for _, c := range []struct {
		name                     string
		service, component, host string
		want                     vocab.Scope
	}{
		{"in-scope", "search-eu-west-api", "edge-proxy", "web-17", vocab.Scope(0)},
		{"out-of-scope", "search-eu-west-api", "edge-proxy", "web-18", vocab.ScopeHost},
	} {
		if got := naiveCheck(benchScope, identity, vocab.Mint, c.service, c.component, c.host); got != c.want {
			b.Fatalf("the model says %v, want %v", got, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if d := s.Check(idHost, hasHost, vocab.Mint, c.service, c.component, c.host); d != c.want {
					b.Fatalf("Check = %v, want %v", d, c.want)
				}
			}
		})
		b.Run(c.name+"/path.Match", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if d := naiveCheck(benchScope, identity, vocab.Mint, c.service, c.component, c.host); d != c.want {
					b.Fatalf("naiveCheck = %v, want %v", d, c.want)
				}
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.Check(idHost, hasHost, vocab.Mint, "search-eu-west-api", "edge-proxy", "web-17")
			}
		})
	})
}
