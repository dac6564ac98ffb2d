package vocab

// Multiplicity says how many registrations of one component a deployment may
// hold, and so how a registration id is derived from it. The zero value is
// not a valid multiplicity: a component always names one explicitly.
type Multiplicity uint8

const (
	// OnePerDeployment: registration_id = <component>.
	OnePerDeployment Multiplicity = iota + 1
	// OnePerHost: registration_id = <host>-<component>.
	OnePerHost
	// ManyPerHost: registration_id = <host>-<component>-<NNN>, instance
	// 1..999.
	ManyPerHost
)

var multiplicities = NewEnum[Multiplicity]("multiplicity", "multiplicity", []string{
	OnePerDeployment: "one-per-deployment",
	OnePerHost:       "one-per-host",
	ManyPerHost:      "many-per-host",
})

// Valid reports whether m is one of the three defined multiplicities.
func (m Multiplicity) Valid() bool { return multiplicities.Valid(m) }

// String returns the configuration spelling ("one-per-deployment",
// "one-per-host", "many-per-host"), or "multiplicity(N)" for an invalid
// value.
func (m Multiplicity) String() string { return multiplicities.String(m) }

// MarshalText implements encoding.TextMarshaler; an invalid value is an
// error.
func (m Multiplicity) MarshalText() ([]byte, error) { return multiplicities.MarshalText(m) }

// UnmarshalText implements encoding.TextUnmarshaler with the exact spellings
// accepted by ParseMultiplicity.
func (m *Multiplicity) UnmarshalText(text []byte) error {
	return multiplicities.UnmarshalText(m, text)
}

// ParseMultiplicity parses the exact configuration spelling of a
// multiplicity; it is case-sensitive and accepts no surrounding space.
func ParseMultiplicity(s string) (Multiplicity, error) { return multiplicities.Parse(s) }
