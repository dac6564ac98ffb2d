package vocab

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Enum is the spelling table of one small integer enum T: names[v] is the
// text of value v on every surface (wire, audit line, configuration, metric
// label). A value whose entry is missing or empty is not a value of the enum:
// most enums start at 1, so that a zero T left unset is invalid.
//
// An Enum is built once, at package initialisation, and only read after
// that; it is safe for concurrent use. Every method is allocation-free for a
// valid value.
type Enum[T ~uint8] struct {
	typ   string // spelling of an unnamed value: typ(N), as %d would print N
	kind  string // what a value is, in prose, for error messages
	names []string
}

// NewEnum returns the table of an enum whose Go type is spelt typ (for an
// invalid value's String, "typ(N)") and whose values are, in prose, kind
// ("verb", "refusal reason"). names is indexed by value.
func NewEnum[T ~uint8](typ, kind string, names []string) Enum[T] {
	return Enum[T]{typ: typ, kind: kind, names: names}
}

// Valid reports whether v has a name.
func (e Enum[T]) Valid(v T) bool { return int(v) < len(e.names) && e.names[v] != "" }

// String returns v's name, or typ(N) for a value without one.
func (e Enum[T]) String(v T) string {
	if e.Valid(v) {
		return e.names[v]
	}
	return e.typ + "(" + strconv.Itoa(int(v)) + ")"
}

// MarshalText returns v's name; a value without one is an error, never a
// made-up spelling.
func (e Enum[T]) MarshalText(v T) ([]byte, error) {
	if !e.Valid(v) {
		return nil, fmt.Errorf("vocab: invalid %s %d", e.kind, uint8(v))
	}
	return []byte(e.names[v]), nil
}

// Parse returns the value named s: the exact spelling, no case folding, no
// surrounding space. Any other s is an *UnknownError.
func (e Enum[T]) Parse(s string) (T, error) {
	for v, name := range e.names {
		if name != "" && name == s {
			return T(v), nil
		}
	}
	return 0, &UnknownError{Kind: e.kind, Value: s, Want: e.Names()}
}

// UnmarshalText sets *p to the value named text, as Parse.
func (e Enum[T]) UnmarshalText(p *T, text []byte) error {
	v, err := e.Parse(string(text))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Names returns the names of the enum's values in value order.
func (e Enum[T]) Names() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ErrUnknown is matched (errors.Is) by every *UnknownError.
var ErrUnknown = errors.New("vocab: unknown name")

// UnknownError is Parse's answer to a spelling that names no value. Value is
// the text as given, possibly attacker-influenced and long: Error quotes at
// most 40 bytes of it, as ASCII, so a message stays one short line.
type UnknownError struct {
	// Kind is what was being parsed, in prose ("verb", "refusal reason").
	Kind string
	// Value is the text that named nothing.
	Value string
	// Want lists the valid spellings in value order.
	Want []string
}

// Error says what was parsed, what was given and what is accepted:
// `unknown verb "Mint" (want "mint" or "deregister")`.
func (e *UnknownError) Error() string {
	var b strings.Builder
	b.WriteString("unknown ")
	b.WriteString(e.Kind)
	b.WriteByte(' ')
	b.WriteString(QuoteBounded(e.Value))
	if len(e.Want) > 0 {
		b.WriteString(" (want ")
		for i, w := range e.Want {
			switch {
			case i == 0:
			case i == len(e.Want)-1:
				b.WriteString(" or ")
			default:
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(w))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Is makes every *UnknownError match ErrUnknown.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknown }

// QuoteBounded quotes an attacker-influenced string for an error message:
// ASCII only, at most 40 bytes of the original followed by "..." when cut.
func QuoteBounded(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.QuoteToASCII(s[:max]) + "..."
	}
	return strconv.QuoteToASCII(s)
}
