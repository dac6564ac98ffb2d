// Package enumname spells the module's small integer enums (verbs, buckets,
// phases, outcomes, statuses, kinds) from one table per type, so every
// String method is the same one line and an unknown value is spelt the same
// way everywhere: Type(N), as fmt's %d would print it.
package enumname

import "strconv"

// Of returns names[v], or kind(v) when v is outside the table or has no
// name there. names is indexed by the enum's value; a zero value left out of
// the table (most enums start at 1) is unnamed. Of does not allocate for a
// named value.
func Of[T ~uint8](names []string, kind string, v T) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return kind + "(" + strconv.Itoa(int(v)) + ")"
}
