package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// Histograms groups its histograms by scope, in the order they joined: a
// histogram joins the scope of an earlier one, even with another scope's
// between them, instead of opening a second entry of the same scope.
func TestHistogramsGroupTheirHistogramsByScope(t *testing.T) {
	hs := NewHistograms()
	sets := []attribute.Set{attribute.NewSet()}
	for _, h := range []struct{ scope, name string }{{"a", "a.one"}, {"b", "b.one"}, {"a", "a.two"}} {
		if _, err := hs.add(h.scope, h.name, "s", "", nil, sets); err != nil {
			t.Fatal(err)
		}
	}
	sms, err := hs.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, sm := range sms {
		names := []string{sm.Scope.Name}
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
		}
		got = append(got, names)
	}
	if len(got) != 2 || len(got[0]) != 3 || got[0][0] != "a" || got[0][1] != "a.one" || got[0][2] != "a.two" ||
		len(got[1]) != 2 || got[1][0] != "b" || got[1][1] != "b.one" {
		t.Errorf("scopes %v, want [[a a.one a.two] [b b.one]]", got)
	}
}
