package config

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	gotoml "github.com/pelletier/go-toml/v2"
)

func TestKeyErrorFormatsTheValueAsTOMLWouldSpellIt(t *testing.T) {
	const rule = "must be an unsigned integer"
	k := "registrar.rate_limit_admission_burst"
	for _, c := range []struct {
		name string
		err  KeyError
		want string
	}{
		{"negative", KeyError{Key: k, Value: int64(-3), Rule: rule}, k + " must be an unsigned integer, got -3"},
		{"fraction", KeyError{Key: k, Value: 1.5, Rule: rule}, k + " must be an unsigned integer, got 1.5"},
		{"whole float", KeyError{Key: k, Value: 512.0, Rule: rule}, k + " must be an unsigned integer, got 512.0"},
		{"exponent", KeyError{Key: k, Value: 1e300, Rule: rule}, k + " must be an unsigned integer, got 1e+300"},
		{"nan", KeyError{Key: k, Value: math.NaN(), Rule: rule}, k + " must be an unsigned integer, got nan"},
		{"inf", KeyError{Key: k, Value: math.Inf(1), Rule: rule}, k + " must be an unsigned integer, got inf"},
		{"minus inf", KeyError{Key: k, Value: math.Inf(-1), Rule: rule}, k + " must be an unsigned integer, got -inf"},
		{"string", KeyError{Key: k, Value: "512", Rule: rule}, k + ` must be an unsigned integer, got "512"`},
		{"control characters", KeyError{Key: k, Value: "a\nb\x00", Rule: rule}, k + ` must be an unsigned integer, got "a\nb\x00"`},
		{"bool", KeyError{Key: k, Value: true, Rule: rule}, k + " must be an unsigned integer, got true"},
		{"array", KeyError{Key: k, Value: []any{int64(1)}, Rule: rule}, k + " must be an unsigned integer, got an array"},
		{"table", KeyError{Key: k, Value: map[string]any{}, Rule: rule}, k + " must be an unsigned integer, got a table"},
		{"date", KeyError{Key: k, Value: gotoml.LocalDate{Year: 1979, Month: 5, Day: 27}, Rule: rule}, k + " must be an unsigned integer, got 1979-05-27"},
		{"date-time", KeyError{Key: k, Value: time.Date(1979, 5, 27, 7, 32, 0, 0, time.UTC), Rule: rule}, k + " must be an unsigned integer, got 1979-05-27T07:32:00Z"},
		{"environment", KeyError{Key: k, Value: "-3", Rule: rule, EnvVar: "REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST"},
			k + ` must be an unsigned integer, got "-3" (from environment variable REGISTRAR_OTEL_REGISTRAR__RATE_LIMIT_ADMISSION_BURST)`},
		{"no value", KeyError{Key: "registrar.tls_key_file", Rule: "is required when registrar.tls_listen is set"},
			"registrar.tls_key_file is required when registrar.tls_listen is set"},
		{"hidden value", KeyError{Key: k, Value: uint32(0), Rule: ruleZeroBurst, hideValue: true},
			"registrar.rate_limit_admission_burst must be greater than 0; a zero burst throttles the first legitimate mint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Error(); got != c.want {
				t.Errorf("Error() =\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestKeyErrorTruncatesLongStrings(t *testing.T) {
	e := &KeyError{Key: "registrar.state_dir", Value: strings.Repeat("é", 300), Rule: "must not contain a NUL byte"}
	got := e.Error()
	if !strings.HasSuffix(got, `…" (600 bytes)`) && !strings.HasSuffix(got, "… (600 bytes)") {
		t.Errorf("Error() = %q, want it truncated with the length", got)
	}
	if len(got) > 300 {
		t.Errorf("Error() is %d bytes, want a truncated value", len(got))
	}
}

func TestKeyPathQuotesSegmentsThatAreNotBareKeys(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"registrar", "socket_path"}, "registrar.socket_path"},
		{[]string{"registrar", "components", "edge-proxy"}, "registrar.components.edge-proxy"},
		{[]string{"registrar", "a.b"}, `registrar."a.b"`},
		{[]string{"registrar", ""}, `registrar.""`},
		{[]string{"registrar", "line\nbreak"}, `registrar."line\nbreak"`},
	} {
		if got := keyPath(c.parts...); got != c.want {
			t.Errorf("keyPath(%q) = %s, want %s", c.parts, got, c.want)
		}
	}
}

func TestErrorsFlattensJoinedErrorsInOrder(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	got := Errors(errors.Join(a, errors.Join(b, c)))
	if len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Errorf("Errors = %v, want [a b c]", got)
	}
	if Errors(nil) != nil {
		t.Error("Errors(nil) is not nil")
	}
}
