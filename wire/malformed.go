package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MalformedError is the codec's rejection of a request. The server answers
// it RequestMalformed with Detail, before any verb runs. Detail names the
// member and the problem, is never empty, at most MaxDetailBytes long, and
// never echoes a value the caller sent (a member name is quoted, cut to 40
// bytes; a syntax error names the byte offset and at most one character).
type MalformedError struct {
	Detail string
}

func (e *MalformedError) Error() string { return "wire: malformed request: " + e.Detail }

func malformedf(format string, args ...any) *MalformedError {
	return &MalformedError{Detail: BoundDetail(fmt.Sprintf(format, args...))}
}

// BoundDetail cuts s to MaxDetailBytes on a UTF-8 boundary (an empty s
// becomes "malformed request"): every detail and logged error text a
// caller can provoke goes through it.
func BoundDetail(s string) string {
	if s == "" {
		return "malformed request"
	}
	if len(s) <= MaxDetailBytes {
		return s
	}
	cut := MaxDetailBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quoteName quotes a member name for a detail, cut to 40 bytes: a caller
// controls the names it sends.
func quoteName(s string) string {
	const maxName = 40
	if len(s) <= maxName {
		return strconv.Quote(s)
	}
	cut := maxName
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// checkSyntax names the byte and the problem of a body that is not one
// valid JSON value, as encoding/json reports them. It runs only on the
// rejection path.
func checkSyntax(body string) *MalformedError {
	if strings.TrimLeft(body, " \t\r\n") == "" {
		return malformedf("request body is empty, want a JSON object")
	}
	var raw json.RawMessage
	err := json.Unmarshal([]byte(body), &raw)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return malformedf("request body is not valid JSON at byte %d: %s", se.Offset, se.Error())
	}
	return malformedf("request body is not valid JSON")
}

// kindOf names the JSON kind of a syntactically valid value.
func kindOf(val string) string {
	// JSON's insignificant whitespace, skipped by hand: strings.TrimLeft
	// builds its byte set on every call, and this runs for every member.
	i := 0
	for i < len(val) && (val[i] == ' ' || val[i] == '\t' || val[i] == '\r' || val[i] == '\n') {
		i++
	}
	if i == len(val) {
		return "nothing"
	}
	switch val[i] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
