package config

import "github.com/registrar-otel/registrar-otel/vocab"

// checkComponentName enforces the DNS-label rule: component names are part of
// derived registration ids.
func checkComponentName(name string) *KeyError {
	if vocab.IsDNSLabel(name) {
		return nil
	}
	return &KeyError{Key: keyPath("registrar", "components", name), Value: name, hideValue: true,
		Rule: "is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids"}
}
