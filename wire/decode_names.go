package wire

// The member names the decoder interprets, at either level, numbered for
// the bitmask of the names an object has had (knownName).
//
// A new request member touches, besides its payload type (payload.go):
// a name here and in knownNames, knownLiteral and knownName below (their
// lengths are counted by hand), its case in decodeState.request or spec
// and the required lists (decode.go), the frozen reference
// (refdecode_test.go), and the request goldens (a response member instead
// touches encode.go, which writes answers by hand). decode_names_test.go
// holds the names, the lengths and the required lists to the types' JSON
// tags, and checks that a body of every tagged member decodes whole.
const (
	nameProtocolVersion = iota
	nameServiceName
	nameHost
	nameInstance
	nameComponent
	nameSpec
	nameWrapTTL
	nameIdempotencyKey
	nameReload
)

var knownNames = [...]string{
	nameProtocolVersion: "protocol_version",
	nameServiceName:     "service_name",
	nameHost:            "host",
	nameInstance:        "instance",
	nameComponent:       "component",
	nameSpec:            "spec",
	nameWrapTTL:         "wrap_ttl",
	nameIdempotencyKey:  "idempotency_key",
	nameReload:          "reload",
}

// The hot walk (memberName here; decodeState.request, spec and str in
// decode.go) keeps its cursor in a local index (i, returned as
// next; -1 when the grammar breaks) rather than in a scanner, so that it
// stays in a register; whatever is not on the usual path is handed to a
// scanner at that index.

// memberName reads the member name at i and the colon after it; id is its
// knownName number.
func memberName(s string, i int) (name string, id, next int) {
	if id, next = knownLiteral(s, i); id >= 0 {
		name = knownNames[id]
	} else {
		p := scanner{s: s, i: i}
		var ok bool
		if name, ok = p.name(); !ok {
			return "", -1, -1
		}
		id, next = knownName(name), p.i
	}
	if next+1 < len(s) && s[next] == ':' && s[next+1] > ' ' {
		return name, id, next + 1 // the compact case
	}
	p := scanner{s: s, i: next}
	p.space()
	if !p.eat(':') {
		return "", -1, -1
	}
	p.space()
	return name, id, p.i
}

// knownLiteral reads a known name spelt without escapes (as every usual
// request spells them) at i and returns its number and the index after
// it, without scanning it byte by byte; for any other text, -1.
func knownLiteral(s string, i int) (id, next int) {
	if i+2 >= len(s) || s[i] != '"' {
		return -1, 0
	}
	// Each name is compared as a constant (the compiler turns that into a
	// few word compares), its closing quote included: a longer name does
	// not match.
	n := 0
	id = -1
	switch rest := s[i+1:]; rest[0] {
	case 'p':
		if len(rest) > 16 && rest[:16] == "protocol_version" && rest[16] == '"' {
			n, id = 16, nameProtocolVersion
		}
	case 's':
		if len(rest) > 12 && rest[:12] == "service_name" && rest[12] == '"' {
			n, id = 12, nameServiceName
		} else if len(rest) > 4 && rest[:5] == `spec"` {
			n, id = 4, nameSpec
		}
	case 'h':
		if len(rest) > 4 && rest[:5] == `host"` {
			n, id = 4, nameHost
		}
	case 'i':
		if len(rest) > 8 && rest[:9] == `instance"` {
			n, id = 8, nameInstance
		} else if len(rest) > 15 && rest[:15] == "idempotency_key" && rest[15] == '"' {
			n, id = 15, nameIdempotencyKey
		}
	case 'c':
		if len(rest) > 9 && rest[:10] == `component"` {
			n, id = 9, nameComponent
		}
	case 'w':
		if len(rest) > 8 && rest[:9] == `wrap_ttl"` {
			n, id = 8, nameWrapTTL
		}
	case 'r':
		if len(rest) > 6 && rest[:7] == `reload"` {
			n, id = 6, nameReload
		}
	}
	return id, i + n + 2
}

// knownName returns name's number, or -1 for any other name. Names are
// exact (case-sensitive).
func knownName(name string) int {
	switch len(name) {
	case 4:
		if name == "host" {
			return nameHost
		}
		if name == "spec" {
			return nameSpec
		}
	case 6:
		if name == "reload" {
			return nameReload
		}
	case 8:
		if name == "instance" {
			return nameInstance
		}
		if name == "wrap_ttl" {
			return nameWrapTTL
		}
	case 9:
		if name == "component" {
			return nameComponent
		}
	case 12:
		if name == "service_name" {
			return nameServiceName
		}
	case 15:
		if name == "idempotency_key" {
			return nameIdempotencyKey
		}
	case 16:
		if name == "protocol_version" {
			return nameProtocolVersion
		}
	}
	return -1
}

// members tracks the names an object has had, so that a repeated one is a
// member problem: the known names (knownName) in a bitmask, any other in a
// dupSet. Either way the comparison is of the decoded (unescaped) names.
type members struct {
	known uint
	other dupSet
}

// repeated records name (numbered id by knownName) and reports whether the
// object already had it.
func (m *members) repeated(name string, id int) bool {
	if id < 0 {
		return m.other.add(name)
	}
	bit := uint(1) << id
	dup := m.known&bit != 0
	m.known |= bit
	return dup
}

// dupSet detects repeated member names: a fixed array first (no
// allocation for an ordinary request), a map once an object has many
// members, so a 64 KiB object of tiny members costs linear time, not
// quadratic.
type dupSet struct {
	few  [maxFewNames]string
	n    int
	many map[string]struct{}
}

const maxFewNames = 16

// add records name and reports whether it was already there.
func (s *dupSet) add(name string) bool {
	if s.many != nil {
		if _, dup := s.many[name]; dup {
			return true
		}
		s.many[name] = struct{}{}
		return false
	}
	for _, n := range s.few[:s.n] {
		if n == name {
			return true
		}
	}
	if s.n < maxFewNames {
		s.few[s.n] = name
		s.n++
		return false
	}
	s.many = make(map[string]struct{}, 4*maxFewNames)
	for _, n := range s.few {
		s.many[n] = struct{}{}
	}
	s.many[name] = struct{}{}
	return false
}
