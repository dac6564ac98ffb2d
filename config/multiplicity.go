package config

import (
	"errors"
	"fmt"
	"strconv"
)

// Multiplicity says how many registrations of one component a deployment may
// hold, and so how a registration id is derived from it. The zero value is
// not a valid multiplicity: a component always names one explicitly.
type Multiplicity uint8

const (
	// OnePerDeployment: registration_id = <component>.
	OnePerDeployment Multiplicity = iota + 1
	// OnePerHost: registration_id = <host>-<component>.
	OnePerHost
	// ManyPerHost: registration_id = <host>-<component>-<NNN>, instance 1..999.
	ManyPerHost
)

var multiplicityNames = [...]string{
	OnePerDeployment: "one-per-deployment",
	OnePerHost:       "one-per-host",
	ManyPerHost:      "many-per-host",
}

// String returns the configuration spelling ("one-per-deployment",
// "one-per-host", "many-per-host"), or "multiplicity(N)" for an invalid value.
func (m Multiplicity) String() string {
	if m.Valid() {
		return multiplicityNames[m]
	}
	return "multiplicity(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is one of the three defined multiplicities.
func (m Multiplicity) Valid() bool {
	return m >= OnePerDeployment && m <= ManyPerHost
}

// MarshalText implements encoding.TextMarshaler; an invalid value is an error.
func (m Multiplicity) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("config: invalid multiplicity %d", uint8(m))
	}
	return []byte(multiplicityNames[m]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with the exact spellings
// accepted by ParseMultiplicity.
func (m *Multiplicity) UnmarshalText(text []byte) error {
	v, err := ParseMultiplicity(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ErrInvalidMultiplicity is returned (wrapped) by ParseMultiplicity.
var ErrInvalidMultiplicity = errors.New(`config: multiplicity must be one of "one-per-deployment", "one-per-host", "many-per-host"`)

// ParseMultiplicity parses the exact configuration spelling of a
// multiplicity; it is case-sensitive and accepts no surrounding space.
func ParseMultiplicity(s string) (Multiplicity, error) {
	for m := OnePerDeployment; m <= ManyPerHost; m++ {
		if s == multiplicityNames[m] {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w, got %s", ErrInvalidMultiplicity, strconv.Quote(s))
}

// checkComponentName enforces the DNS-label rule: component names are part of
// derived registration ids.
func checkComponentName(name string) *KeyError {
	if IsDNSLabel(name) {
		return nil
	}
	return &KeyError{Key: keyPath("registrar", "components", name), Value: name, hideValue: true,
		Rule: "is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids"}
}

// IsDNSLabel reports whether s is a DNS label as the registrar spells one:
// 1 to 63 octets of [a-z0-9-], not starting or ending with '-' (lower case
// only, no IDNA). Component names (here) and the verbs' service names and
// hosts (package registrar) follow it, since all three are joined into
// derived registration ids.
func IsDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
