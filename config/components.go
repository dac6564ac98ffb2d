package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// keyMaxInstancesPerHost is the key of a component table beside
// multiplicity: the ceiling of one (component, host).
const keyMaxInstancesPerHost = "max_instances_per_host"

// Rules of a component's max_instances_per_host.
const ruleZeroInstancesPerHost = "must be greater than 0; leave it out for no ceiling (a zero ceiling would refuse every first mint of the component)"

// checkComponentName enforces the DNS-label rule: component names are part of
// derived registration ids.
func checkComponentName(name string) *KeyError {
	if vocab.IsDNSLabel(name) {
		return nil
	}
	return &KeyError{Key: keyPath("registrar", "components", name), Value: name, hideValue: true,
		Rule: "is not a valid component name: it must be a DNS label (1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-') because it is part of derived registration ids"}
}

// componentCeilingKey is registrar.components.<name>.max_instances_per_host,
// held apart from the multiplicities (Registrar.MaxInstancesPerHost). Its
// value is read by componentsKey's decoder, which reads each component's
// table whole: a ceiling is kept only for a component whose multiplicity
// decoded, so a broken component table gives one error, not two.
var componentCeilingKey = key{
	table: "registrar", name: "components", listed: "registrar.components.<name>." + keyMaxInstancesPerHost,
	typ: "u32", live: live, doc: "the most live instances of a many-per-host component one host may hold",
	setDefault: func(c *Config) { c.Registrar.MaxInstancesPerHost = nil },
	decode:     func(*decoder, string, any, *Config) {}, // componentsKey's decoder reads it
	show:       func(c *Config) string { return showCeilings(c.Registrar.MaxInstancesPerHost) },
	check: func(c *Config, _ string, add func(*KeyError)) {
		checkCeilings(c.Registrar.Components, c.Registrar.MaxInstancesPerHost, add)
	},
	field: func(c *Config) any { return &c.Registrar.MaxInstancesPerHost },
	raw:   func(*Config) any { return nil }, // in componentsKey's raw value
}

// checkCeilings is Validate's rule of the components' ceilings: each of a
// configured many-per-host component (one-per-host and one-per-deployment
// hold at most one instance per host already), and greater than 0.
func checkCeilings(components map[string]vocab.Multiplicity, ceilings map[string]uint32, add func(*KeyError)) {
	for _, name := range slices.Sorted(maps.Keys(ceilings)) {
		key := keyPath("registrar", "components", name, keyMaxInstancesPerHost)
		n := ceilings[name]
		m, ok := components[name]
		switch {
		case !ok:
			add(&KeyError{Key: key, Value: n, hideValue: true,
				Rule: "names no configured component: registrar.components." + keyPath(name) + " has no multiplicity"})
		case !m.Valid():
			// The multiplicity's own error says it all.
		case m != vocab.ManyPerHost:
			add(&KeyError{Key: key, Value: n, hideValue: true,
				Rule: "applies only to a many-per-host component: " + name + " is " + m.String() + ", which holds at most one instance per host already"})
		case n == 0:
			add(&KeyError{Key: key, Value: n, Rule: ruleZeroInstancesPerHost, hideValue: true})
		}
	}
}

// showCeilings is the components' ceilings on one line, sorted by name,
// or "none".
func showCeilings(m map[string]uint32) string {
	if len(m) == 0 {
		return showNone
	}
	parts := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, name+"="+showU32(m[name]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
