package vocab

import (
	"errors"
	"strings"
	"testing"
)

func TestMultiplicityTextRoundTrips(t *testing.T) {
	for _, m := range []Multiplicity{OnePerDeployment, OnePerHost, ManyPerHost} {
		text, err := m.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText() error: %v", m, err)
		}
		var back Multiplicity
		if err := back.UnmarshalText(text); err != nil || back != m {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v, nil", text, back, err, m)
		}
		if string(text) != m.String() {
			t.Errorf("MarshalText = %q, String = %q; want them equal", text, m.String())
		}
	}
}

func TestParseMultiplicityAcceptsOnlyTheExactSpellings(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Multiplicity
	}{
		{"one-per-deployment", OnePerDeployment},
		{"one-per-host", OnePerHost},
		{"many-per-host", ManyPerHost},
	} {
		if got, err := ParseMultiplicity(c.in); err != nil || got != c.want {
			t.Errorf("ParseMultiplicity(%q) = %v, %v; want %v, nil", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "Many-Per-Host", " many-per-host", "many-per-host ", "many_per_host", "sometimes"} {
		if got, err := ParseMultiplicity(in); !errors.Is(err, ErrUnknown) {
			t.Errorf("ParseMultiplicity(%q) = %v, %v; want ErrUnknown", in, got, err)
		}
	}
}

func TestZeroMultiplicityIsInvalid(t *testing.T) {
	var m Multiplicity
	if m.Valid() {
		t.Error("the zero Multiplicity is valid, want invalid")
	}
	if got, want := m.String(), "multiplicity(0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if _, err := m.MarshalText(); err == nil {
		t.Error("MarshalText of the zero Multiplicity succeeded, want an error")
	}
}

func TestComponentNamesMustBeDNSLabels(t *testing.T) {
	ok := []string{"review", "edge-proxy", "a", "0", "z9", strings.Repeat("a", 63), "registrar-otel-internal"}
	bad := []string{strings.Repeat("a", 64), "", "-", "-edge", "edge-", "Edge", "edgE", "edge_proxy", "edge.proxy",
		"édge", "edge proxy", "a/b", "a:b", "a`b", "a{b", "a,b"}
	for _, s := range ok {
		if !IsDNSLabel(s) {
			t.Errorf("IsDNSLabel(%q) = false, want true", s)
		}
	}
	for _, s := range bad {
		if IsDNSLabel(s) {
			t.Errorf("IsDNSLabel(%q) = true, want false", s)
		}
	}
}
