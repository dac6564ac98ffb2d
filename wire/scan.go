package wire

import (
	"encoding/json"
	"math/bits"
)

// scanValue reads the value at i, checked in full, depth arrays and
// objects deep; next is -1 when the grammar breaks. A plain integer (the
// usual number) is read here, anything else by a scanner.
func scanValue(s string, i, depth int) (v string, next int) {
	if i < len(s) && '1' <= s[i] && s[i] <= '9' {
		j := i + 1
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j >= len(s) || s[j] != '.' && s[j] != 'e' && s[j] != 'E' {
			return s[i:j], j
		}
	}
	p := scanner{s: s, i: i}
	v, ok := p.value(depth)
	if !ok {
		return "", -1
	}
	return v, p.i
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// maxDepth is encoding/json's nesting limit: a body nested deeper is not
// valid JSON to it, so it is not to this decoder either.
const maxDepth = 10000

// scanner reads JSON text, checking the grammar (RFC 8259, as encoding/json
// accepts it) as it goes. Its methods report false at the first byte that
// breaks it; the caller then stops. The text is valid UTF-8 (checked
// before), so only the grammar is left to check.
type scanner struct {
	s string
	i int
}

func (p *scanner) space() {
	for p.i < len(p.s) && p.s[p.i] <= ' ' {
		switch p.s[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *scanner) end() bool {
	p.space()
	return p.i == len(p.s)
}

// name reads a member name at the cursor and decodes it.
func (p *scanner) name() (string, bool) {
	raw, escaped, ok := p.str()
	if !ok {
		return "", false
	}
	return unquote(raw, escaped)
}

// plainRun returns the index of the first byte at or after i that is not
// plainByte, or len(s): eight bytes at a time while eight are left.
func plainRun(s string, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// The high bit of a byte is set in stop when that byte is below
		// 0x20, a quote or a backslash; the lowest such bit is exact (a
		// borrow only runs upward from a true one).
		q, b := x^(ones*'"'), x^(ones*'\\')
		stop := ((x - ones*0x20) &^ x) | ((q - ones) &^ q) | ((b - ones) &^ b)
		if stop &= highs; stop != 0 {
			return i + bits.TrailingZeros64(stop)>>3
		}
	}
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	return i
}

// plainByte is true for the bytes that stand for themselves inside a JSON
// string: not the quote, not the backslash, not a control character.
// (Bytes of multi-byte characters are plain: the text is valid UTF-8.)
var plainByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// str returns the string at the cursor, quotes included, and whether it
// has escapes.
func (p *scanner) str() (raw string, escaped, ok bool) {
	start := p.i
	if !p.eat('"') {
		return "", false, false
	}
	s, i := p.s, p.i
	for {
		for i < len(s) && plainByte[s[i]] {
			i++
		}
		if i >= len(s) {
			return "", false, false
		}
		switch s[i] {
		case '"':
			p.i = i + 1
			return s[start:p.i], escaped, true
		case '\\':
			escaped = true
			if i+1 >= len(s) {
				return "", false, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) {
					return "", false, false
				}
				for _, h := range []byte(s[i+2 : i+6]) {
					if !isHex(h) {
						return "", false, false
					}
				}
				i += 6
			default:
				return "", false, false
			}
		default: // a control character
			return "", false, false
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// value returns the value at the cursor, checked in full. depth is the
// number of arrays and objects the value is inside.
func (p *scanner) value(depth int) (string, bool) {
	if p.i >= len(p.s) {
		return "", false
	}
	start := p.i
	switch c := p.s[p.i]; {
	case c == '"':
		raw, _, ok := p.str()
		return raw, ok
	case c == '{' || c == '[':
		if !p.composite(depth + 1) {
			return "", false
		}
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		if !p.number() {
			return "", false
		}
	default:
		return "", false
	}
	return p.s[start:p.i], true
}

func (p *scanner) literal(lit string) (string, bool) {
	if len(p.s)-p.i < len(lit) || p.s[p.i:p.i+len(lit)] != lit {
		return "", false
	}
	p.i += len(lit)
	return lit, true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (p *scanner) number() bool {
	p.eat('-')
	switch {
	case p.eat('0'):
	case p.i < len(p.s) && '1' <= p.s[p.i] && p.s[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.eat('.') {
		if p.digits() == 0 {
			return false
		}
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

func (p *scanner) digits() int {
	start := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// composite reads an array or an object, opened at the cursor, at nesting
// depth depth.
func (p *scanner) composite(depth int) bool {
	if depth > maxDepth {
		return false
	}
	open := p.s[p.i]
	p.i++
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	p.space()
	if p.eat(closer) {
		return true
	}
	for {
		p.space()
		if open == '{' {
			if _, _, ok := p.str(); !ok {
				return false
			}
			p.space()
			if !p.eat(':') {
				return false
			}
			p.space()
		}
		if _, ok := p.value(depth); !ok {
			return false
		}
		p.space()
		switch {
		case p.eat(','):
			continue
		case p.eat(closer):
			return true
		}
		return false
	}
}

// unquote decodes a JSON string (quotes included). Without escapes it is
// a slice of raw, no copy; escapes go through encoding/json.
func unquote(raw string, escaped bool) (string, bool) {
	if len(raw) < 2 {
		return "", false
	}
	if !escaped {
		return raw[1 : len(raw)-1], true
	}
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return "", false
	}
	return s, true
}
