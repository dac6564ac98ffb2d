package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Several stores, one registry. Registrars that share one OpenBao cluster
// each write their own store, and each store is consistent alone (its
// daemon's per-registration lock orders its own answers); what one store
// cannot show is an answer that contradicts another daemon's. Every
// success outcome says what state the registration was in and what it
// left it in:
//
//	first_mint                 absent  → present
//	idempotent_remint          present → present
//	identity_removed           present → absent
//	idempotent_already_absent  absent  → absent
//
// ScanStores merges the stores' success outcomes per registration in the
// order of their timestamps and asks that they admit one history: each
// answer's "before" must be the state the previous answer left. Two
// answers whose invocations overlapped (the earlier's outcome less than
// the clock skew before the later's intent) may have taken effect in
// either order, and either order that fits is accepted. An answer that
// fits no order is a finding, named by what it contradicts.

// CrossKind names a finding only the stores together show. Its string is
// the stable spelling of the scan report.
type CrossKind string

// The cross-store findings.
const (
	// CrossDuplicateFirstMint: a first_mint while the registration was
	// present: two first_mint answers with no identity_removed between.
	// One registration, two identities handed out.
	CrossDuplicateFirstMint CrossKind = "duplicate_first_mint"
	// CrossRemintWhileAbsent: an idempotent_remint while the registration
	// was absent (after an identity_removed or an already_absent, with no
	// first_mint between): a mint answered from a binding a deregister had
	// removed, which is how an orphan role is left.
	CrossRemintWhileAbsent CrossKind = "remint_while_absent"
	// CrossAbsentWhilePresent: an idempotent_already_absent while the
	// registration was present (a mint answered before it, no
	// identity_removed between): the deregister left what the mint made.
	CrossAbsentWhilePresent CrossKind = "absent_while_present"
	// CrossDuplicateRemoval: an identity_removed while the registration
	// was absent: two deregisters both answered removed, with no mint
	// between.
	CrossDuplicateRemoval CrossKind = "duplicate_removal"
	// CrossUnsettledIntent: an intent without an outcome in its store
	// (older than the settle grace) after which no store holds an answer
	// for its registration: a daemon died mid-invocation and no other
	// daemon has finished or cleaned the registration since, so the
	// cluster may hold what it half made.
	CrossUnsettledIntent CrossKind = "unsettled_intent"
)

// CrossKinds are the cross-store findings in the order reports list them.
var CrossKinds = [...]CrossKind{CrossDuplicateFirstMint, CrossRemintWhileAbsent, CrossAbsentWhilePresent, CrossDuplicateRemoval, CrossUnsettledIntent}

// DefaultClockSkew is ScanOptions.ClockSkew's default: how far apart the
// clocks of two registrars' hosts may be. Answers closer than it are taken
// as concurrent.
const DefaultClockSkew = 2 * time.Second

// MaxCrossAnswers bounds the answers (success outcomes and unpaired
// intents) ScanStores keeps to compare across stores; past it the rest are
// counted in CrossReport.Unchecked and not compared. About 200 bytes each.
const MaxCrossAnswers = 1 << 18

// CrossAnswer locates one record a finding is about.
type CrossAnswer struct {
	// Store is the index of the store in the dirs given to ScanStores.
	Store     int
	File      string
	Line      uint64
	RequestID string
	Verb      vocab.Verb
	// Class is the outcome's class; 0 for an intent.
	Class vocab.OutcomeClass
	// Intent is the instant of the invocation's intent (when the store
	// still holds it, else TS), TS the record's own.
	Intent, TS time.Time
}

// CrossFinding is one finding only the stores together show.
type CrossFinding struct {
	Kind CrossKind
	// Registration is the registration's id as the outcomes carry it, or
	// for an intent whose registration no outcome names,
	// "<host>/<service_name>/<instance>" as requested.
	Registration string
	// Earlier is the answer whose state Later contradicts (zero for
	// CrossUnsettledIntent); Later is the contradicting answer, or the
	// unsettled intent.
	Earlier, Later CrossAnswer
	// Detail says what is wrong in a sentence.
	Detail string
}

// CrossReport is what ScanStores found across the stores.
type CrossReport struct {
	// ClockSkew is the tolerance used.
	ClockSkew time.Duration
	// Registrations is how many registrations had an answer in any store.
	Registrations uint64
	// Answers is how many success outcomes were compared.
	Answers uint64
	// ByKind counts the findings per kind (every CrossKinds member).
	ByKind map[CrossKind]uint64
	// Findings lists them, the first MaxReportedLines by registration and
	// time.
	Findings []CrossFinding
	// SettledElsewhere counts the intents without an outcome whose
	// registration a later answer, in any store, settled: a crash another
	// daemon (or the same one, later) finished or cleaned.
	SettledElsewhere uint64
	// Unchecked counts the answers past MaxCrossAnswers, not compared.
	Unchecked uint64
}

// Total is the number of findings.
func (c *CrossReport) Total() uint64 {
	var n uint64
	for _, v := range c.ByKind {
		n += v
	}
	return n
}

// MultiReport is the result of ScanStores: each store's own report, in
// the order of the dirs, and what they show together.
type MultiReport struct {
	Stores []*Report
	Cross  CrossReport
}

// Anomalies reports whether any store has an anomaly or the stores
// together a finding.
func (m *MultiReport) Anomalies() bool {
	for _, r := range m.Stores {
		if r.Anomalies() {
			return true
		}
	}
	return m.Cross.Total() > 0
}

// ScanStores scans each directory of dirs as Scan does (opts.Dir is
// ignored; every other option applies to each), with one reference instant
// for all, and compares their registrations' answers across them (see
// the rules above). The stores are those of registrars sharing one
// registry (several daemons on one OpenBao cluster); a directory given
// twice is refused, as it would only duplicate every answer.
func ScanStores(ctx context.Context, opts ScanOptions, dirs []string) (*MultiReport, error) {
	if len(dirs) == 0 {
		return nil, errors.New("audit: scan: no directory given")
	}
	for i, d := range dirs {
		if slices.Contains(dirs[:i], d) {
			return nil, fmt.Errorf("audit: scan: %s is given twice", d)
		}
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultScanGrace
	}
	if opts.ClockSkew <= 0 {
		opts.ClockSkew = DefaultClockSkew
	}
	x := &crossState{skew: opts.ClockSkew, settled: opts.Now.Add(-opts.Grace), regID: map[string]string{}}
	out := &MultiReport{}
	for i, d := range dirs {
		o := opts
		o.Dir = d
		col := x.store(i)
		rep, err := scan(ctx, o, func(sc *scanner) { sc.onRecord = col.record })
		if err != nil {
			return nil, err
		}
		col.finish()
		out.Stores = append(out.Stores, rep)
	}
	out.Cross = x.report()
	return out, nil
}

// crossState is ScanStores's: the answers of every store so far.
type crossState struct {
	skew    time.Duration
	settled time.Time
	answers []crossAnswer
	// unpaired are the intents without an outcome, older than the grace.
	unpaired []crossAnswer
	// regID maps a requested key to the registration id its outcomes
	// carry.
	regID     map[string]string
	unchecked uint64
	// kept counts the answers and unpaired intents kept, in scan order.
	kept int
}

// crossAnswer is a CrossAnswer with its registration's key, and its order
// in the scan (ties of time keep store and file order).
type crossAnswer struct {
	CrossAnswer
	key   string
	order int
}

// storeCollector gathers one store's answers.
type storeCollector struct {
	x     *crossState
	store int
	// intents are the store's intents waiting for their outcome.
	intents map[string]crossAnswer
}

func (x *crossState) store(i int) *storeCollector {
	return &storeCollector{x: x, store: i, intents: map[string]crossAnswer{}}
}

// requestedKey is the registration a request names: derivation is a pure
// function of these three, so equal keys are one registration.
func requestedKey(r *Requested) string {
	if r == nil {
		return ""
	}
	return r.Host + "/" + r.ServiceName + "/" + strconv.FormatUint(uint64(r.Instance), 10)
}

// record is the scanner's hook: each well-formed record in the window.
func (c *storeCollector) record(file string, line uint64, r *Record) {
	switch r.Phase {
	case PhaseIntent:
		if _, dup := c.intents[r.RequestID]; dup || r.Requested == nil {
			return // a duplicate is the store's own malformed line
		}
		c.intents[strings.Clone(r.RequestID)] = crossAnswer{
			CrossAnswer: CrossAnswer{Store: c.store, File: file, Line: line, RequestID: strings.Clone(r.RequestID), Verb: r.Verb, Intent: r.TS, TS: r.TS},
			key:         strings.Clone(requestedKey(r.Requested)),
		}
	case PhaseOutcome:
		in, paired := c.intents[r.RequestID]
		if paired {
			delete(c.intents, r.RequestID)
		}
		if r.Outcome == nil || r.Outcome.Class == vocab.ClassRefused || r.Requested == nil {
			return // a refusal changes no registration
		}
		a := crossAnswer{
			CrossAnswer: CrossAnswer{Store: c.store, File: file, Line: line, RequestID: strings.Clone(r.RequestID), Verb: r.Verb, Class: r.Outcome.Class, Intent: r.TS, TS: r.TS},
			key:         strings.Clone(requestedKey(r.Requested)),
		}
		if paired && !in.Intent.After(r.TS) {
			a.Intent = in.Intent
		}
		if r.RegistrationID != "" {
			if _, ok := c.x.regID[a.key]; !ok {
				c.x.regID[a.key] = strings.Clone(r.RegistrationID)
			}
		}
		c.x.add(&c.x.answers, a)
	}
}

// finish keeps the store's settled intents without an outcome.
func (c *storeCollector) finish() {
	for _, in := range c.intents {
		if in.TS.Before(c.x.settled) {
			c.x.add(&c.x.unpaired, in)
		}
	}
}

func (x *crossState) add(to *[]crossAnswer, a crossAnswer) {
	if x.kept >= maxCrossAnswers {
		x.unchecked++
		return
	}
	a.order = x.kept
	x.kept++
	*to = append(*to, a)
}

// maxCrossAnswers is MaxCrossAnswers; the tests lower it.
var maxCrossAnswers = MaxCrossAnswers

// registration state, as an answer finds and leaves it.
type regState uint8

const (
	stateAbsent regState = iota + 1
	statePresent
)

// before and after are the states a success class asserts.
func before(c vocab.OutcomeClass) regState {
	if c == vocab.ClassFirstMint || c == vocab.ClassIdempotentAlreadyAbsent {
		return stateAbsent
	}
	return statePresent
}

func after(c vocab.OutcomeClass) regState {
	if c == vocab.ClassFirstMint || c == vocab.ClassIdempotentRemint {
		return statePresent
	}
	return stateAbsent
}

// contradiction names the finding of an answer of class c in state s.
func contradiction(s regState, c vocab.OutcomeClass) CrossKind {
	switch {
	case s == statePresent && c == vocab.ClassFirstMint:
		return CrossDuplicateFirstMint
	case s == statePresent:
		return CrossAbsentWhilePresent
	case c == vocab.ClassIdempotentRemint:
		return CrossRemintWhileAbsent
	}
	return CrossDuplicateRemoval
}

var crossDetail = map[CrossKind]string{
	CrossDuplicateFirstMint: "answered first_mint while the registration was present: the earlier answer made it and no identity_removed came between",
	CrossRemintWhileAbsent:  "answered idempotent_remint while the registration was absent: the earlier answer left it absent and no first_mint came between (an orphan role may be left)",
	CrossAbsentWhilePresent: "answered idempotent_already_absent while the registration was present: the earlier mint made it and no identity_removed came between (the registration, or an orphan role, is left)",
	CrossDuplicateRemoval:   "answered identity_removed while the registration was absent: the earlier answer left it absent and no mint came between",
	CrossUnsettledIntent:    "has no outcome in any store and no later answer for its registration: the daemon stopped mid-invocation and nothing has finished or cleaned the registration since; deregister or remint it",
}

// report compares the answers per registration.
func (x *crossState) report() CrossReport {
	rep := CrossReport{ClockSkew: x.skew, ByKind: map[CrossKind]uint64{}, Unchecked: x.unchecked, Answers: uint64(len(x.answers))}
	for _, k := range CrossKinds {
		rep.ByKind[k] = 0
	}
	name := func(key string) string {
		if id, ok := x.regID[key]; ok {
			return id
		}
		return key
	}
	found := func(f CrossFinding) {
		rep.ByKind[f.Kind]++
		if len(rep.Findings) < MaxReportedLines {
			rep.Findings = append(rep.Findings, f)
		}
	}
	slices.SortFunc(x.answers, func(a, b crossAnswer) int {
		return cmp.Or(strings.Compare(a.key, b.key), a.TS.Compare(b.TS), cmp.Compare(a.order, b.order))
	})
	for run := range chunkBy(x.answers) {
		rep.Registrations++
		var (
			prev       = run[0]
			state      = after(prev.Class)
			stateEarly = before(prev.Class) // the state before prev
		)
		for i := 1; i < len(run); i++ {
			a := run[i]
			switch {
			case state == before(a.Class):
				stateEarly, state, prev = state, after(a.Class), a
				continue
			case !x.ordered(prev, a) && after(a.Class) == before(prev.Class) && stateEarly == before(a.Class):
				// Concurrent with prev, and fits taking effect before
				// it: prev stays the last, its state unchanged.
				stateEarly = after(a.Class)
				continue
			}
			if i+1 < len(run) {
				// Concurrent with the next, which fits taking effect
				// first, and a after it: take them in that order.
				if b := run[i+1]; !x.ordered(a, b) && state == before(b.Class) && after(b.Class) == before(a.Class) {
					run[i], run[i+1] = b, a
					i--
					continue
				}
			}
			k := contradiction(state, a.Class)
			found(CrossFinding{Kind: k, Registration: name(a.key), Earlier: prev.CrossAnswer, Later: a.CrossAnswer, Detail: crossDetail[k]})
			stateEarly, state, prev = state, after(a.Class), a
		}
	}
	// An unpaired intent is settled by any answer for its registration
	// after it.
	slices.SortFunc(x.unpaired, func(a, b crossAnswer) int {
		return cmp.Or(strings.Compare(a.key, b.key), a.TS.Compare(b.TS), cmp.Compare(a.order, b.order))
	})
	for _, in := range x.unpaired {
		i, _ := slices.BinarySearchFunc(x.answers, in.key, func(a crossAnswer, key string) int { return strings.Compare(a.key, key) })
		settled := false
		for ; i < len(x.answers) && x.answers[i].key == in.key; i++ {
			if x.answers[i].TS.After(in.TS) {
				settled = true
				break
			}
		}
		if settled {
			rep.SettledElsewhere++
			continue
		}
		found(CrossFinding{Kind: CrossUnsettledIntent, Registration: name(in.key), Later: in.CrossAnswer, Detail: crossDetail[CrossUnsettledIntent]})
	}
	return rep
}

// ordered reports that a's answer was written before b's invocation
// began, by more than the clock skew: b cannot have taken effect first.
func (x *crossState) ordered(a, b crossAnswer) bool { return a.TS.Add(x.skew).Before(b.Intent) }

// chunkBy yields the runs of answers of one registration (sorted by key).
func chunkBy(as []crossAnswer) func(yield func([]crossAnswer) bool) {
	return func(yield func([]crossAnswer) bool) {
		for i := 0; i < len(as); {
			j := i + 1
			for j < len(as) && as[j].key == as[i].key {
				j++
			}
			if !yield(as[i:j]) {
				return
			}
			i = j
		}
	}
}
