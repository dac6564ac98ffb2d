package callers

import (
	"fmt"
	"testing"

	"github.com/registrar-otel/registrar-otel/internal/testing/cputime"
)

// benchPolicies is the sizing of the lookup: 1,024 policies, 512
// naming one exact identity each (host agents and local uids) and 512 one
// prefix each (teams' trust-domain paths), all under the spellings the
// server gives.
func benchPolicies() []Policy {
	ps := make([]Policy, 0, 1024)
	for i := range 256 {
		ps = append(ps,
			Policy{Name: fmt.Sprintf("host-%d", i), Identities: []string{fmt.Sprintf("registrar-client:uri:spiffe://example.org/host/agent-%04d", i)}},
			Policy{Name: fmt.Sprintf("uid-%d", i), Identities: []string{fmt.Sprintf("unix-peer:uid=%d", 1000+i)}})
	}
	for i := range 256 {
		ps = append(ps,
			Policy{Name: fmt.Sprintf("team-%d", i), IdentityPrefixes: []string{fmt.Sprintf("registrar-client:uri:spiffe://example.org/team-%03d/", i)}},
			Policy{Name: fmt.Sprintf("dns-%d", i), IdentityPrefixes: []string{fmt.Sprintf("registrar-client:dns:svc-%03d.", i)}})
	}
	return ps
}

// BenchmarkMatch is one lookup among 1,024 policies: an exact hit, a
// prefix hit, a miss that leaves the trie early and one that walks down
// to an exact identity before it fails (both the default); each beside
// the linear scan of the same policies, the rule as written, for the
// figure radix.go quotes.
func BenchmarkMatch(b *testing.B) {
	ps := benchPolicies()
	m, err := New(ps)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, id string }{
		{"exact", "registrar-client:uri:spiffe://example.org/host/agent-0173"},
		{"prefix", "registrar-client:uri:spiffe://example.org/team-042/ingest/worker-7"},
		{"miss", "registrar-client:uri:spiffe://example.org/host/agent-9999"},
		{"deep-miss", "registrar-client:uri:spiffe://example.org/host/agent-0173/x"},
	} {
		want := naiveMatch(ps, c.id)
		b.Run(c.name+"/radix", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if i, _ := m.Match(c.id); i != want {
					b.Fatalf("Match = %d, want %d", i, want)
				}
			}
		})
		b.Run(c.name+"/linear", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if i := naiveMatch(ps, c.id); i != want {
					b.Fatalf("naiveMatch = %d, want %d", i, want)
				}
			}
		})
	}
	b.Run("parallel/radix", func(b *testing.B) {
		b.ReportAllocs()
		id := "registrar-client:uri:spiffe://example.org/team-042/ingest/worker-7"
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Match(id)
			}
		})
	})
}

// reportCPU adds the process's CPU time per operation, cpu-ns/op, to a
// single-goroutine benchmark: on a shared machine ns/op also counts the
// time the benchmark waited for a core, CPU time does not.
func reportCPU(b *testing.B) func() {
	start := cputime.Now()
	return func() {
		if cputime.Available() && b.N > 0 {
			b.ReportMetric(float64(cputime.Now()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
