package enumname

import "testing"

type color uint8

var colorNames = [...]string{1: "red", 2: "green"}

func TestNamedValuesAndTheFallbackSpelling(t *testing.T) {
	for _, c := range []struct {
		v    color
		want string
	}{
		{1, "red"}, {2, "green"}, {0, "color(0)"}, {3, "color(3)"}, {255, "color(255)"},
	} {
		if got := Of(colorNames[:], "color", c.v); got != c.want {
			t.Errorf("Of(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestANamedValueDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Of(colorNames[:], "color", color(2)) }); n != 0 {
		t.Errorf("Of allocated %v times for a named value, want 0", n)
	}
}
