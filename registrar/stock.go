package registrar

import (
	"cmp"
	"slices"
)

// Stock is the live registrations the verbs count, for the gauges
// (registrar_registrations and registrar_registrations_ceiling) and the
// tests. A reservation in flight (a mint the backend may be creating)
// counts as live.
type Stock struct {
	// Components are the configured components, sorted by name, each once
	// (also those without a registration).
	Components []ComponentStock
	// Policies are the caller policies, under the authority in force,
	// whose identities own at least one live registration, by index.
	Policies []PolicyStock
}

// ComponentStock is one configured component's live registrations.
type ComponentStock struct {
	Component string
	// Live is its live registrations, every host together.
	Live uint64
	// BusiestHost is the most live registrations one host holds of it:
	// what its ceiling bounds.
	BusiestHost uint32
	// Ceiling is its max_instances_per_host, 0 for none.
	Ceiling uint32
}

// PolicyStock is one caller policy's live registrations.
type PolicyStock struct {
	// Policy is the policy's index (Authority.Policy's).
	Policy int
	// Live is the live registrations its identities own.
	Live uint64
	// Ceiling is its max_registrations, 0 for none.
	Ceiling uint32
}

// Stock returns the counts now. It takes the count lock for a copy of a
// few numbers per component and per policy (and, once after each reload
// of the caller policies, a recount of the policies over every
// registration), so it is cheap enough for every metrics collection.
func (v *Verbs) Stock() Stock {
	comps := *v.components.Load()
	ceilings := *v.ceilings.Load()
	authp := v.authority.Load()
	st := Stock{Components: make([]ComponentStock, 0, len(comps))}
	v.tally.mu.Lock()
	s := v.tally.s
	for name := range comps {
		c := ComponentStock{Component: name, Ceiling: ceilings[name]}
		if t := s.comps[name]; t != nil {
			c.Live, c.BusiestHost = t.live, t.busiest
		}
		st.Components = append(st.Components, c)
	}
	s.under(authp)
	for p, n := range s.policies {
		st.Policies = append(st.Policies, PolicyStock{Policy: p, Live: n})
	}
	v.tally.mu.Unlock()
	slices.SortFunc(st.Components, func(a, b ComponentStock) int { return cmp.Compare(a.Component, b.Component) })
	slices.SortFunc(st.Policies, func(a, b PolicyStock) int { return cmp.Compare(a.Policy, b.Policy) })
	if authp != nil {
		for i := range st.Policies {
			st.Policies[i].Ceiling = (*authp).MaxRegistrations(st.Policies[i].Policy)
		}
	}
	return st
}
