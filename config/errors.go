package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// KeyError is one violated rule of one configuration key. Load and Validate
// return every KeyError they find, joined with errors.Join; use errors.As or
// walk the joined errors to inspect them.
type KeyError struct {
	// Key is the dotted key, e.g. "registrar.rate_limit_admission_burst";
	// segments that are not bare TOML keys are quoted. For a REGISTRAR_OTEL_
	// environment variable whose name is malformed it is the variable's name.
	Key string
	// Value is the offending value: as the TOML parser produced it (int64,
	// float64, string, bool, a time value, []any, map[string]any), the raw
	// string of an environment variable, or the decoded field value for a
	// rule checked after decoding. Nil when the rule concerns an absent key.
	Value any
	// Rule is the rule broken, worded to follow the key: "must be an
	// unsigned integer".
	Rule string
	// EnvVar names the environment variable the value came from; "" when it
	// came from the file or the defaults.
	EnvVar string

	// hideValue leaves ", got <Value>" out of the message when the rule
	// already says what the value is (a zero, a bad name).
	hideValue bool
	// secret marks a value that may carry credentials (a URL): Value holds
	// it redacted with RedactURL, and Error redacts it again whatever was
	// stored there.
	secret bool
}

// SecretKeyError is a KeyError whose value may carry credentials: it holds
// and prints the value redacted (RedactURL). For packages that check keys
// of their own, like the telemetry package.
func SecretKeyError(key, value, rule string) *KeyError {
	return &KeyError{Key: key, Value: RedactURL(value), Rule: rule, secret: true}
}

// Error returns "<key> <rule>, got <value>", the value formatted as TOML
// would spell it (strings quoted), followed by " (from environment variable
// NAME)" when the value came from the environment. The ", got" part is left
// out when the rule already states the value ("must be greater than 0; …").
// The message is always a single line.
func (e *KeyError) Error() string {
	var b strings.Builder
	b.WriteString(e.Key)
	b.WriteByte(' ')
	b.WriteString(e.Rule)
	if e.Value != nil && !e.hideValue {
		b.WriteString(", got ")
		v := e.Value
		if s, ok := v.(string); ok && e.secret {
			v = RedactURL(s)
		}
		b.WriteString(formatValue(v))
	}
	if e.EnvVar != "" {
		b.WriteString(" (from environment variable ")
		b.WriteString(envName(e.EnvVar))
		b.WriteByte(')')
	}
	return b.String()
}

// envName spells an environment variable's name for a message: as is when it
// is a portable name, quoted otherwise.
func envName(name string) string {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return quote(name)
		}
	}
	return name
}

// SyntaxError is a configuration file that is not valid TOML. Its message
// begins with the file and the position the parser reports,
// "config.toml:3:14: invalid TOML: …", or only the line for an error the
// parser reports without a position (a key defined twice):
// "config.toml:7: invalid TOML: key socket_path is already defined".
type SyntaxError struct {
	File   string // the path given to Load
	Line   int    // 1-based
	Column int    // 1-based; 0 when the parser reported only the line
	Msg    string // the parser's message, on one line
	Err    error  // the parser's error
}

func (e *SyntaxError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
	}
	b.WriteString(": invalid TOML: ")
	b.WriteString(e.Msg)
	return b.String()
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// FileError is a configuration file that could not be read; it wraps the
// *fs.PathError, so errors.Is(err, fs.ErrNotExist) works.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string {
	msg := e.Err.Error()
	if u, ok := e.Err.(interface{ Unwrap() error }); ok && u.Unwrap() != nil {
		msg = u.Unwrap().Error() // drop the PathError's repetition of op and path
	}
	return e.Path + ": cannot read configuration file: " + msg
}

func (e *FileError) Unwrap() error { return e.Err }

// keyPath joins key segments with '.', quoting any segment that is not a
// bare TOML key so that the dotted name is unambiguous and on one line.
func keyPath(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(p) {
			b.WriteString(p)
		} else {
			b.WriteString(quote(p))
		}
	}
	return b.String()
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// maxQuoted bounds how much of a string value a message repeats.
const maxQuoted = 200

// quote quotes s with Go escapes (close to TOML basic strings), so control
// characters never reach a terminal or break a line, and truncates it.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// formatValue spells a value the way the operator wrote it in TOML.
func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return formatFloat(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case interface{ String() string }: // go-toml's LocalDate, LocalTime, LocalDateTime
		return oneLine(v.String())
	default:
		return "a value of unsupported type"
	}
}

func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0" // 512.0 in the file is a float, and the message says so
	}
	return s
}

// oneLine escapes control characters and invalid UTF-8 so a message stays on
// one printable line; everything else is kept as is.
func oneLine(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			if s[i] < 0x10 {
				b.WriteByte('0')
			}
			b.WriteString(strconv.FormatUint(uint64(s[i]), 16))
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// UnsafeFileError is a configuration file that others than its owner, or
// an owner other than root or this user, could change: group- or
// world-writable, owned by another uid, or a symlink (whose target could
// be swapped between the check and the read). Whoever can write the file
// sets the limiter's bursts, so it can disable the limiter; Load refuses
// it, as the daemon refuses an unsafe socket directory.
type UnsafeFileError struct {
	// Path is the path given to Load.
	Path string
	// Target is always "": a symlink is refused by itself (Why), whatever
	// its target. Kept for callers that print it.
	Target string
	// Mode is the permission bits of a group- or world-writable file.
	Mode fs.FileMode
	// Why is the rule broken, when it is not the mode: "is a symlink; …"
	// or "is owned by uid 1001, …". "" for a writable file.
	Why string
}

func (e *UnsafeFileError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	b.WriteString(": unsafe configuration file: ")
	if e.Why != "" {
		b.WriteString("it ")
		b.WriteString(e.Why)
		return b.String()
	}
	if e.Target != "" {
		b.WriteString("it is a symlink to ")
		b.WriteString(e.Target)
		b.WriteString(", which is")
	} else {
		b.WriteString("it is")
	}
	fmt.Fprintf(&b, " group- or world-writable (mode %04o); whoever can write it can disable the limiter: chmod go-w it", e.Mode.Perm())
	return b.String()
}

// Is makes errors.Is(err, ErrUnsafeFile) true.
func (e *UnsafeFileError) Is(target error) bool { return target == ErrUnsafeFile }

// ErrUnsafeFile matches every *UnsafeFileError.
var ErrUnsafeFile = errors.New("config: unsafe configuration file")

// readConfigFile reads the configuration file with openChecked, its owner
// rule judged for uid, turning a
// refusal into the error Load returns: *UnsafeFileError for the rules that
// keep others from changing the file, *FileError for the rest.
func readConfigFile(path string, uid uint32) ([]byte, error) {
	data, p := openChecked(path, MaxConfigFileBytes, false, uid)
	if p == nil {
		return data, nil
	}
	switch p.kind {
	case kindWritable:
		return nil, &UnsafeFileError{Path: path, Mode: p.mode}
	case kindSymlink, kindForeign:
		return nil, &UnsafeFileError{Path: path, Why: p.text}
	case kindIO:
		return nil, &FileError{Path: path, Err: p.err}
	}
	return nil, &FileError{Path: path, Err: errors.New(p.text)}
}

// Errors flattens what Load, Validate and CheckFiles return (errors.Join
// trees) into the single errors, in order; nil for nil.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Errors(e)...)
		}
		return out
	}
	return []error{err}
}
