package vocab

import (
	"errors"
	"strings"
	"testing"
)

type color uint8

var colors = NewEnum[color]("color", "colour", []string{1: "red", 2: "green"})

func TestNamedValuesAndTheFallbackSpelling(t *testing.T) {
	for _, c := range []struct {
		v    color
		want string
	}{
		{1, "red"}, {2, "green"}, {0, "color(0)"}, {3, "color(3)"}, {255, "color(255)"},
	} {
		if got := colors.String(c.v); got != c.want {
			t.Errorf("String(%d) = %q, want %q", c.v, got, c.want)
		}
		if got, want := colors.Valid(c.v), !strings.HasPrefix(c.want, "color("); got != want {
			t.Errorf("Valid(%d) = %v, want %v", c.v, got, want)
		}
	}
}

func TestANamedValueDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = colors.String(color(2)) }); n != 0 {
		t.Errorf("String allocated %v times for a named value, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = colors.Parse("green") }); n != 0 {
		t.Errorf("Parse allocated %v times for a known name, want 0", n)
	}
}

func TestParseAcceptsOnlyTheExactSpellings(t *testing.T) {
	for _, c := range []struct {
		in   string
		want color
	}{{"red", 1}, {"green", 2}} {
		if got, err := colors.Parse(c.in); err != nil || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, nil", c.in, got, err, c.want)
		}
	}
	// The empty name of the unnamed zero value is not a spelling of it.
	for _, in := range []string{"", "Red", " red", "red ", "blue", "color(1)"} {
		got, err := colors.Parse(in)
		if !errors.Is(err, ErrUnknown) || got != 0 {
			t.Errorf("Parse(%q) = %v, %v; want 0, ErrUnknown", in, got, err)
		}
		var ue *UnknownError
		if !errors.As(err, &ue) || ue.Kind != "colour" || ue.Value != in {
			t.Errorf("Parse(%q) error = %#v; want an *UnknownError naming the kind and the value", in, err)
		}
	}
}

func TestUnknownErrorSaysWhatIsAccepted(t *testing.T) {
	for _, c := range []struct {
		want []string
		in   string
		msg  string
	}{
		{[]string{"mint", "deregister"}, "Mint", `unknown verb "Mint" (want "mint" or "deregister")`},
		{[]string{"a", "b", "c"}, "x", `unknown verb "x" (want "a", "b" or "c")`},
		{[]string{"a"}, "x", `unknown verb "x" (want "a")`},
		{nil, "x", `unknown verb "x"`},
		{nil, strings.Repeat("é", 30), `unknown verb "` + strings.Repeat(`\u00e9`, 20) + `"...`},
	} {
		if got := (&UnknownError{Kind: "verb", Value: c.in, Want: c.want}).Error(); got != c.msg {
			t.Errorf("Error() = %s\nwant      %s", got, c.msg)
		}
	}
}

func TestUnmarshalTextLeavesTheValueOnError(t *testing.T) {
	v := color(2)
	if err := colors.UnmarshalText(&v, []byte("blue")); err == nil || v != 2 {
		t.Errorf("UnmarshalText(blue) = %v, value %v; want an error and the value kept", err, v)
	}
	if err := colors.UnmarshalText(&v, []byte("red")); err != nil || v != 1 {
		t.Errorf("UnmarshalText(red) = %v, value %v; want nil, 1", err, v)
	}
}

func TestMarshalTextRefusesAnUnnamedValue(t *testing.T) {
	if b, err := colors.MarshalText(1); err != nil || string(b) != "red" {
		t.Errorf("MarshalText(1) = %q, %v; want red", b, err)
	}
	for _, v := range []color{0, 3} {
		if _, err := colors.MarshalText(v); err == nil || !strings.Contains(err.Error(), "invalid colour") {
			t.Errorf("MarshalText(%d) = %v; want an invalid colour error", v, err)
		}
	}
}

func TestNamesListsTheValuesInOrder(t *testing.T) {
	if got := strings.Join(colors.Names(), ","); got != "red,green" {
		t.Errorf("Names() = %s, want red,green", got)
	}
}
