package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The decoder spells the member names it interprets by hand, three times
// over (knownNames, the hand-counted lengths of knownLiteral, the length
// switch of knownName), and lists the required ones (mintRequired,
// deregisterRequired, specRequired). These tests hold all of them to the
// payload types' JSON tags, so a member added to a type cannot silently
// miss the fast path or the required check.

// jsonMember is one member of a payload type, read from its JSON tag.
type jsonMember struct {
	name      string
	omitempty bool
	field     reflect.StructField
}

func jsonMembers(t *testing.T, typ reflect.Type) []jsonMember {
	t.Helper()
	var out []jsonMember
	for f := range typ.Fields() {
		tag, ok := f.Tag.Lookup("json")
		if !ok || tag == "-" {
			t.Fatalf("%s.%s has no JSON tag: every request member is named by one", typ.Name(), f.Name)
		}
		name, opts, _ := strings.Cut(tag, ",")
		out = append(out, jsonMember{name: name, omitempty: opts == "omitempty", field: f})
	}
	return out
}

// requestTypes are the decoded payload types: both verbs' bodies and the
// object nested in a mint's.
var requestTypes = []reflect.Type{
	reflect.TypeFor[MintRequest](), reflect.TypeFor[DeregisterRequest](), reflect.TypeFor[Spec](),
}

func TestKnownNamesAreTheRequestTypesJSONTags(t *testing.T) {
	var tags []string
	for _, typ := range requestTypes {
		for _, m := range jsonMembers(t, typ) {
			if !slices.Contains(tags, m.name) {
				tags = append(tags, m.name)
			}
		}
	}
	known := slices.Clone(knownNames[:])
	slices.Sort(tags)
	slices.Sort(known)
	if !slices.Equal(tags, known) {
		t.Fatalf("knownNames %q, want the request types' JSON tags %q", known, tags)
	}
	for id, name := range knownNames {
		t.Run(name, func(t *testing.T) {
			if got := knownName(name); got != id {
				t.Errorf("knownName(%q) = %d, want %d", name, got, id)
			}
			for _, other := range []string{name + "x", name[:len(name)-1], strings.ToUpper(name)} {
				if got := knownName(other); got != -1 {
					t.Errorf("knownName(%q) = %d, want -1", other, got)
				}
			}
			// The literal as a body spells it, at an offset, followed by
			// its colon: matched, and the cursor lands just past the
			// closing quote.
			s := ` {"` + name + `":1}`
			if got, next := knownLiteral(s, 2); got != id || next != len(name)+4 {
				t.Errorf("knownLiteral(%q, 2) = (%d, %d), want (%d, %d)", s, got, next, id, len(name)+4)
			}
			// A longer name, a shorter one, an escaped spelling: not the
			// fast path's (the slow path decodes them).
			for _, other := range []string{`"` + name + `x":1`, `"` + name[:len(name)-1] + `":1`, `"\u00` +
				fmt.Sprintf("%x", name[0]) + name[1:] + `":1`} {
				if got, _ := knownLiteral(other, 0); got != -1 {
					t.Errorf("knownLiteral(%q) = %d, want -1", other, got)
				}
			}
			if got, _ := knownLiteral(`"`+name, 0); got != -1 {
				t.Errorf("knownLiteral of %q cut before its closing quote = %d, want -1", name, got)
			}
		})
	}
}

func TestRequiredListsAreTheTagsWithoutOmitempty(t *testing.T) {
	for _, c := range []struct {
		typ      reflect.Type
		required []string
	}{
		{reflect.TypeFor[MintRequest](), mintRequired[:]},
		{reflect.TypeFor[DeregisterRequest](), deregisterRequired[:]},
		{reflect.TypeFor[Spec](), specRequired[:]},
	} {
		var want []string
		for _, m := range jsonMembers(t, c.typ) {
			// protocol_version is required but checked on its own (first).
			if !m.omitempty && m.name != "protocol_version" {
				want = append(want, m.name)
			}
		}
		if !slices.Equal(c.required, want) {
			t.Errorf("%s: required %q, want the members without omitempty in declaration order %q", c.typ.Name(), c.required, want)
		}
	}
}

// fullBody returns a JSON object with every member of typ, each with a
// value no other member has (protocol_version 1), from the tags alone.
func fullBody(t *testing.T, typ reflect.Type, n *int) string {
	t.Helper()
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range jsonMembers(t, typ) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + m.name + `":`)
		*n++
		switch k := m.field.Type.Kind(); {
		case m.name == "protocol_version":
			fmt.Fprint(&b, ProtocolVersion)
		case k == reflect.String:
			fmt.Fprintf(&b, `"v%d"`, *n)
		case k >= reflect.Uint8 && k <= reflect.Uint64:
			fmt.Fprint(&b, *n)
		case k == reflect.Struct:
			b.WriteString(fullBody(t, m.field.Type, n))
		default:
			t.Fatalf("%s.%s: no test value for a %v member", typ.Name(), m.field.Name, k)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// TestEveryTaggedMemberIsDecoded: a body with every member the types'
// tags name, each with its own value, decodes to what encoding/json reads
// from the same tags: a member the decoder's walk does not interpret would
// be left zero.
func TestEveryTaggedMemberIsDecoded(t *testing.T) {
	var n int
	decodesAsJSON(t, "DecodeMint", fullBody(t, reflect.TypeFor[MintRequest](), &n), DecodeMint)
	decodesAsJSON(t, "DecodeDeregister", fullBody(t, reflect.TypeFor[DeregisterRequest](), &n), DecodeDeregister)
}

// decodesAsJSON checks that decode (named name) reads body as json.Unmarshal
// reads it into the same type.
func decodesAsJSON[R comparable](t *testing.T, name, body string, decode func([]byte) (R, error)) {
	t.Helper()
	got, err := decode([]byte(body))
	if err != nil {
		t.Fatalf("%s(%s): %v", name, body, err)
	}
	var want R
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s(%s)\n got %+v\nwant %+v", name, body, got, want)
	}
}
