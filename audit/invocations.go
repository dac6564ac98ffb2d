package audit

import (
	"cmp"
	"slices"
	"strings"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// IdentityInvocations is one (caller identity, verb, result)'s
// invocations, as a scan with ScanOptions.ByIdentity counts them: an
// outcome record in a file read is one invocation under its class, a
// limited (not shadow) record its count under ResultLimited, and a rotated
// record in the window adds the counts it carries for the files retention
// deleted. So what a caller did shows whether or not its records' files
// still exist.
type IdentityInvocations struct {
	CallerIdentity string
	Verb           vocab.Verb
	Result         Result
	// Invocations is the total; Rotated the part of it counted by rotated
	// records (invocations whose records' files were deleted).
	Invocations, Rotated uint64
}

// InvocationTotals is Invocations and Rotated summed, for the remainder
// past MaxScanIdentities keys (with a rotated record's others, which name
// no identity).
type InvocationTotals struct {
	Invocations, Rotated uint64
}

// invocation counts n invocations of (identity, verb, result); rotated:
// counted by a rotated record. It allocates only for a new key.
func (sc *scanner) invocation(identity string, verb vocab.Verb, result Result, n uint64, rotated bool) {
	k := countKey{identity, verb, result}
	e := sc.invocations[k]
	if e == nil {
		if len(sc.invocations) >= MaxScanIdentities {
			sc.rep.InvocationsOtherIdentities[verb][result].add(n, rotated)
			return
		}
		// The identity may be a slice of the decoder's buffer: keep a copy.
		k.identity = strings.Clone(identity)
		e = &IdentityInvocations{CallerIdentity: k.identity, Verb: verb, Result: result}
		sc.invocations[k] = e
	}
	e.Invocations = addSat(e.Invocations, n)
	if rotated {
		e.Rotated = addSat(e.Rotated, n)
	}
}

// add counts n invocations in a total.
func (t *InvocationTotals) add(n uint64, rotated bool) {
	t.Invocations = addSat(t.Invocations, n)
	if rotated {
		t.Rotated = addSat(t.Rotated, n)
	}
}

// countInvocations counts a record in the window for the per-identity
// invocations (ScanOptions.ByIdentity).
func (sc *scanner) countInvocations(r *Record) {
	switch r.Phase {
	case PhaseOutcome:
		sc.invocation(r.CallerIdentity, r.Verb, ResultOf(r.Outcome.Class), 1, false)
	case PhaseLimited:
		if !r.Shadow {
			sc.invocation(r.CallerIdentity, r.Verb, ResultLimited, r.Count, false)
		}
	case PhaseAdmin:
		if r.Admin.Action != ActionRotated {
			return
		}
		for _, c := range r.Admin.Counts {
			sc.invocation(c.Identity, c.Verb, c.Result, c.Invocations, true)
		}
		for _, c := range r.Admin.Others {
			sc.rep.InvocationsOtherIdentities[c.Verb][c.Result].add(c.Invocations, true)
		}
	case PhaseIntent:
	}
}

// finishInvocations lists the per-identity invocations: the identities
// with the most invocations first, each identity's rows together in verb
// and result order.
func (sc *scanner) finishInvocations() {
	totals := map[string]uint64{}
	for _, e := range sc.invocations {
		totals[e.CallerIdentity] = addSat(totals[e.CallerIdentity], e.Invocations)
		sc.rep.InvocationsByIdentity = append(sc.rep.InvocationsByIdentity, *e)
	}
	slices.SortFunc(sc.rep.InvocationsByIdentity, func(a, b IdentityInvocations) int {
		return cmp.Or(cmp.Compare(totals[b.CallerIdentity], totals[a.CallerIdentity]), cmp.Compare(a.CallerIdentity, b.CallerIdentity),
			cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Result, b.Result))
	})
}
