package wire

import (
	"encoding/base64"
	"unicode/utf8"
)

// The structured-field scanner the RateLimit fields are parsed with: RFC
// 9651's List of Items with Parameters (section 4.2.1), every bare item
// type (Integer, Decimal, String, Token, Byte Sequence, Boolean, Date,
// Display String), step for step as the RFC's algorithms, failing the whole
// field on the first deviation (section 1.1, "intentionally strict").
//
// It allocates only for a String with an escape in it and for the
// parameter slice, which one parse reuses across its members. It is written
// here because neither the standard library nor golang.org/x/net exports a
// structured-field parser (x/net's httpsfv is internal to it); the test's
// independent reading of the RFC (sfref_test.go) holds it to the algorithms.

// sfKind is a bare item's type.
type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
	sfDate
	sfDisplay
)

// sfBare is a bare item: num holds an Integer, a Date or a Boolean (0 or
// 1); str a String (unescaped), a Token or a Byte Sequence's base64 text.
// A Decimal and a Display String are checked and kept as nothing: neither
// field defines a parameter of those types.
type sfBare struct {
	kind sfKind
	num  int64
	str  string
}

// sfParam is one parameter, in the order received; a repeated key is kept
// each time, and the reader takes the last (section 4.2.3.2: "overwrite
// its value").
type sfParam struct {
	key string
	val sfBare
}

// sfScanner walks a field value. off is the offset of the next byte.
type sfScanner struct {
	s   string
	off int
}

func (sc *sfScanner) empty() bool { return sc.off >= len(sc.s) }

// peek returns the next byte, 0 at the end (0 is not valid anywhere in a
// field, so it fails every test a real byte could pass).
func (sc *sfScanner) peek() byte {
	if sc.off < len(sc.s) {
		return sc.s[sc.off]
	}
	return 0
}

func (sc *sfScanner) skipSP() {
	for sc.peek() == ' ' {
		sc.off++
	}
}

// skipOWS discards SP and HTAB: the list separator's whitespace.
func (sc *sfScanner) skipOWS() {
	for c := sc.peek(); c == ' ' || c == '\t'; c = sc.peek() {
		sc.off++
	}
}

func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool   { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }

// isTchar is RFC 9110's tchar: any VCHAR except the delimiters.
func isTchar(c byte) bool {
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return isDigit(c) || isAlpha(c)
}

// bare parses a bare item (section 4.2.3.1); ok is false when it fails.
func (sc *sfScanner) bare() (sfBare, bool) {
	switch c := sc.peek(); {
	case c == '-' || isDigit(c):
		return sc.number()
	case c == '"':
		s, ok := sc.str()
		return sfBare{kind: sfString, str: s}, ok
	case isAlpha(c) || c == '*':
		return sfBare{kind: sfToken, str: sc.token()}, true
	case c == ':':
		s, ok := sc.bytes()
		return sfBare{kind: sfBytes, str: s}, ok
	case c == '?':
		return sc.boolean()
	case c == '@':
		sc.off++
		n, ok := sc.number()
		return sfBare{kind: sfDate, num: n.num}, ok && n.kind == sfInteger
	case c == '%':
		return sfBare{kind: sfDisplay}, sc.display()
	}
	return sfBare{}, false
}

// number parses an Integer or a Decimal (section 4.2.4): at most 15
// digits, or at most 12 before the point and 1 to 3 after it.
func (sc *sfScanner) number() (sfBare, bool) {
	neg := sc.peek() == '-'
	if neg {
		sc.off++
	}
	if !isDigit(sc.peek()) {
		return sfBare{}, false
	}
	var n int64
	digits, point, frac := 0, false, 0
scan:
	for ; !sc.empty(); sc.off++ {
		c := sc.s[sc.off]
		switch {
		case isDigit(c) && point:
			frac++
		case isDigit(c):
			n = n*10 + int64(c-'0')
			digits++
		case c == '.' && !point:
			if digits > 12 {
				return sfBare{}, false
			}
			point = true
		default:
			break scan // not part of the number: left for the caller
		}
		if !point && digits > 15 || point && digits+1+frac > 16 {
			return sfBare{}, false
		}
	}
	if point {
		return sfBare{kind: sfDecimal}, frac >= 1 && frac <= 3
	}
	if neg {
		n = -n
	}
	return sfBare{kind: sfInteger, num: n}, true
}

// str parses a String (section 4.2.5): printable ASCII between DQUOTEs,
// with only \" and \\ escaped. Without an escape the result shares the
// field's memory.
func (sc *sfScanner) str() (string, bool) {
	sc.off++ // the opening DQUOTE
	start := sc.off
	var buf []byte // the unescaped text, once an escape is met
	for ; !sc.empty(); sc.off++ {
		c := sc.s[sc.off]
		switch {
		case c == '\\':
			if sc.off+1 >= len(sc.s) {
				return "", false
			}
			next := sc.s[sc.off+1]
			if next != '"' && next != '\\' {
				return "", false
			}
			if buf == nil {
				buf = make([]byte, 0, len(sc.s)-start)
			}
			buf = append(buf, sc.s[start:sc.off]...)
			buf = append(buf, next)
			sc.off++
			start = sc.off + 1
		case c == '"':
			end := sc.off
			sc.off++
			if buf == nil {
				return sc.s[start:end], true
			}
			return string(append(buf, sc.s[start:end]...)), true
		case c < 0x20 || c > 0x7e:
			return "", false
		}
	}
	return "", false // no closing DQUOTE
}

// token parses a Token (section 4.2.6); the caller has seen its first
// character, ALPHA or "*".
func (sc *sfScanner) token() string {
	start := sc.off
	sc.off++
	for c := sc.peek(); isTchar(c) || c == ':' || c == '/'; c = sc.peek() {
		sc.off++
	}
	return sc.s[start:sc.off]
}

// bytes parses a Byte Sequence (section 4.2.7) and returns its base64 text,
// checked: the alphabet, then a decoding with the padding synthesized when
// it is missing and non-zero pad bits allowed, as the RFC asks of parsers.
func (sc *sfScanner) bytes() (string, bool) {
	sc.off++ // the opening ":"
	start := sc.off
	for ; !sc.empty(); sc.off++ {
		c := sc.s[sc.off]
		if c == ':' {
			text := sc.s[start:sc.off]
			sc.off++
			_, ok := decodeSFBytes(text)
			return text, ok
		}
		if !isDigit(c) && !isAlpha(c) && c != '+' && c != '/' && c != '=' {
			return "", false
		}
	}
	return "", false // no closing ":"
}

// decodeSFBytes decodes a Byte Sequence's base64 text, padding it to a
// multiple of four with "=" first.
func decodeSFBytes(text string) ([]byte, bool) {
	if pad := len(text) % 4; pad != 0 {
		text += "===="[pad:]
	}
	b, err := base64.StdEncoding.DecodeString(text)
	return b, err == nil
}

// boolean parses a Boolean (section 4.2.8).
func (sc *sfScanner) boolean() (sfBare, bool) {
	sc.off++ // "?"
	switch sc.peek() {
	case '1':
		sc.off++
		return sfBare{kind: sfBoolean, num: 1}, true
	case '0':
		sc.off++
		return sfBare{kind: sfBoolean}, true
	}
	return sfBare{}, false
}

// display checks a Display String (section 4.2.10): %" then printable
// ASCII with %xx escapes of bytes that, with the rest, are valid UTF-8, up
// to a closing DQUOTE.
func (sc *sfScanner) display() bool {
	if sc.off+1 >= len(sc.s) || sc.s[sc.off+1] != '"' {
		return false
	}
	sc.off += 2
	var buf [utf8.UTFMax]byte // an incomplete rune carried between bytes
	n := 0
	for !sc.empty() {
		c := sc.s[sc.off]
		sc.off++
		switch {
		case c < 0x20 || c > 0x7e:
			return false
		case c == '"':
			return n == 0
		case c == '%':
			if sc.off+2 > len(sc.s) {
				return false
			}
			hi, ok1 := hexDigit(sc.s[sc.off])
			lo, ok2 := hexDigit(sc.s[sc.off+1])
			if !ok1 || !ok2 {
				return false
			}
			sc.off += 2
			c = hi<<4 | lo
		}
		// Feed the byte to the UTF-8 check: a rune completes, or waits.
		buf[n] = c
		n++
		if utf8.FullRune(buf[:n]) {
			if r, size := utf8.DecodeRune(buf[:n]); r == utf8.RuneError && size <= 1 {
				return false
			}
			n = 0
		}
	}
	return false // no closing DQUOTE
}

// hexDigit decodes one hex digit, in either case (RFC 9651 decodes a
// Display String's escapes "in a case-insensitive fashion"; its serializer
// writes lowercase).
func hexDigit(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// key parses a key (section 4.2.3.3).
func (sc *sfScanner) key() (string, bool) {
	if c := sc.peek(); !isLCAlpha(c) && c != '*' {
		return "", false
	}
	start := sc.off
	for c := sc.peek(); isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*'; c = sc.peek() {
		sc.off++
	}
	return sc.s[start:sc.off], true
}

// params parses Parameters (section 4.2.3.2), appending each to ps.
func (sc *sfScanner) params(ps []sfParam) ([]sfParam, bool) {
	for sc.peek() == ';' {
		sc.off++
		sc.skipSP()
		k, ok := sc.key()
		if !ok {
			return ps, false
		}
		v := sfBare{kind: sfBoolean, num: 1}
		if sc.peek() == '=' {
			sc.off++
			if v, ok = sc.bare(); !ok {
				return ps, false
			}
		}
		ps = append(ps, sfParam{key: k, val: v})
	}
	return ps, true
}

// innerList parses an Inner List (section 4.2.1.2) and its parameters,
// keeping nothing: neither field allows one, but the List must parse.
func (sc *sfScanner) innerList(ps []sfParam) ([]sfParam, bool) {
	sc.off++ // "("
	for !sc.empty() {
		sc.skipSP()
		if sc.peek() == ')' {
			sc.off++
			return sc.params(ps)
		}
		if _, ok := sc.bare(); !ok {
			return ps, false
		}
		var ok bool
		if ps, ok = sc.params(ps); !ok {
			return ps, false
		}
		if c := sc.peek(); c != ' ' && c != ')' {
			return ps, false
		}
	}
	return ps, false // no closing ")"
}
