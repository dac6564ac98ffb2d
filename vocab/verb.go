package vocab

// Verb is one of the registrar's two verbs. The zero value is Mint.
//
// Verb marshals to and from its wire spelling ("mint", "deregister") as text,
// so it can be used directly in JSON payloads and audit records.
type Verb uint8

// The two verbs. There are exactly two; NumVerbs sizes per-verb arrays.
const (
	Mint Verb = iota
	Deregister

	// NumVerbs is the number of verbs, for arrays indexed by Verb.
	NumVerbs = 2
)

var verbs = NewEnum[Verb]("Verb", "verb", []string{
	Mint:       "mint",
	Deregister: "deregister",
})

// Valid reports whether v is one of the two verbs.
func (v Verb) Valid() bool { return verbs.Valid(v) }

// String returns the verb's spelling on every surface: "mint" or
// "deregister" (Verb(N) for an invalid value).
func (v Verb) String() string { return verbs.String(v) }

// MarshalText implements encoding.TextMarshaler. An invalid verb is an error.
func (v Verb) MarshalText() ([]byte, error) { return verbs.MarshalText(v) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// two spellings.
func (v *Verb) UnmarshalText(b []byte) error { return verbs.UnmarshalText(v, b) }

// ParseVerb parses "mint" or "deregister" (exact spelling, no case folding).
func ParseVerb(s string) (Verb, error) { return verbs.Parse(s) }
