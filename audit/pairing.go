package audit

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// reqState is what the scan knows about a request_id whose intent is still
// waiting for its outcome: the only per-request state it keeps.
type reqState struct {
	first UnpairedIntent // the first intent seen
	order uint64         // its position in the scan, for sorting
}

// scanner is one scan's state: the report it fills and what pairing intents
// with outcomes needs to remember. It is not safe for concurrent use.
type scanner struct {
	rep     *Report
	cutoff  time.Time
	settled time.Time
	// waiting holds the request_ids with an intent and, so far, no
	// outcome. Once its outcome arrives a request_id leaves it for the
	// compact sets below, which remember, at about two bytes per id, what
	// the duplicate rule needs: whose intent and whose outcome were seen.
	waiting  map[string]*reqState
	intents  idSet  // intents seen, of request_ids no longer waiting
	outcomes idSet  // outcomes seen
	order    uint64 // lines seen so far, across files
	dec      lineDecoder
	// decode is dec.decode; the benchmarks set it to the token decoder
	// alone, to measure what the single pass buys the scan.
	decode func(line []byte) (*Record, error)
	// euid is the scanning process's effective uid (os.Geteuid), by which
	// the directory's ownership is judged; the tests set another.
	euid func() int
	// byIdentity sums limited records per key (ScanOptions.ByIdentity);
	// nil otherwise.
	byIdentity map[identityKey]*LimitedSummary
	// byPolicy sums limited and shadow records per key; created on the
	// first one.
	byPolicy map[policyKey]*LimitedSummary
	// refusedBy sums authorization refusals per key
	// (ScanOptions.ByIdentity); nil otherwise.
	refusedBy map[refusedKey]*IdentityRefused
	// invocations sums invocations per (identity, verb, result), rotated
	// records' counts included (ScanOptions.ByIdentity); nil otherwise.
	invocations map[countKey]*IdentityInvocations

	// onRecord, when set (ScanStores), is given every well-formed record
	// in the window, in file order.
	onRecord func(name string, lineNo uint64, r *Record)

	// refLine and refFinish replace line and finish (the reference scan of
	// the benchmarks and agreement tests); nil in production.
	refLine   func(name string, lineNo uint64, chunk []byte)
	refFinish func()
}

// line classifies one complete line ('\n' included).
func (sc *scanner) line(name string, lineNo uint64, chunk []byte) {
	if sc.refLine != nil {
		sc.refLine(name, lineNo, chunk)
		return
	}
	r := sc.counted(name, lineNo, chunk)
	if r == nil {
		return
	}
	if sc.onRecord != nil {
		sc.onRecord(name, lineNo, r)
	}
	switch r.Phase {
	case PhaseLimited:
		if sc.byIdentity != nil && !r.Shadow {
			sc.identity(r)
		}
		sc.policy(r)
		sc.noteLate(name, lineNo, r)
	case PhaseAdmin:
		sc.admin(name, lineNo, r)
	case PhaseIntent:
		id := r.RequestID
		switch {
		case sc.waiting[id] != nil || sc.intents.has(id):
			sc.malformed(name, lineNo, RuleDuplicateRequestID, "second intent for request_id "+id)
		case sc.outcomes.has(id):
			sc.intents.add(id) // its outcome came first: paired
		default:
			// The id is a slice of this line's own copy, never reused.
			sc.waiting[id] = &reqState{first: UnpairedIntent{File: name, Line: lineNo, RequestID: id, TS: r.TS}, order: sc.order}
		}
	case PhaseOutcome:
		id := r.RequestID
		if sc.outcomes.has(id) {
			sc.malformed(name, lineNo, RuleDuplicateRequestID, "second outcome for request_id "+id)
			return
		}
		sc.outcomes.add(id)
		if _, ok := sc.waiting[id]; ok {
			delete(sc.waiting, id)
			sc.intents.add(id)
		}
	}
}

// counted decodes one line and counts it: a malformed line under its rule,
// a record inside the window under its phase (and a limited record's count
// under its bucket, an authorization refusal under its reason). It returns
// the record inside the window, or nil.
func (sc *scanner) counted(name string, lineNo uint64, chunk []byte) *Record {
	sc.order++
	r, err := sc.decode(chunk)
	if err != nil {
		sc.decodeFailed(name, lineNo, err)
		return nil
	}
	if r.TS.Before(sc.cutoff) {
		return nil
	}
	sc.rep.Records[r.Phase-1]++
	if sc.invocations != nil {
		sc.countInvocations(r)
	}
	switch {
	case r.Phase == PhaseLimited && r.Shadow:
		sc.rep.ShadowLimited[r.LimitedBucket].add(r.Count)
	case r.Phase == PhaseLimited:
		sc.rep.Limited[r.LimitedBucket].add(r.Count)
	case r.Phase == PhaseOutcome && r.Outcome.Class == vocab.ClassRefused:
		sc.refused(r)
	}
	return r
}

// decodeFailed counts a line the decoder rejected, under the rule it names.
func (sc *scanner) decodeFailed(name string, lineNo uint64, err error) {
	var de *DecodeError
	if errors.As(err, &de) {
		sc.malformed(name, lineNo, de.Rule, de.detail())
	} else {
		sc.malformed(name, lineNo, RuleInvalidJSON, err.Error())
	}
}

// malformed counts a malformed line, listing the first MaxReportedLines.
func (sc *scanner) malformed(name string, lineNo uint64, rule Rule, detail string) {
	sc.rep.MalformedRecords++
	sc.rep.MalformedByRule[rule]++
	if len(sc.rep.Malformed) < MaxReportedLines {
		sc.rep.Malformed = append(sc.rep.Malformed, MalformedLine{File: name, Line: lineNo, Rule: rule, Detail: detail})
	}
}

type identityKey struct {
	identity string
	bucket   vocab.Bucket
}

// identity adds a limited record to its (identity, bucket) sum, or to the
// remainder once MaxScanIdentities keys are held.
func (sc *scanner) identity(r *Record) {
	k := identityKey{r.CallerIdentity, r.LimitedBucket}
	s := sc.byIdentity[k]
	if s == nil {
		if len(sc.byIdentity) >= MaxScanIdentities {
			sc.rep.LimitedOtherIdentities[r.LimitedBucket].add(r.Count)
			return
		}
		// The identity is a slice of the decoder's buffer: keep a copy.
		k.identity = strings.Clone(k.identity)
		s = &LimitedSummary{}
		sc.byIdentity[k] = s
	}
	s.add(r.Count)
}

type refusedKey struct {
	identity string
	reason   vocab.Reason
	scope    vocab.Scope
}

// refused counts a refused outcome record whose reason is one of
// AuthorizationReasons: under its reason, out_of_scope also under the
// scope its detail names, and with ByIdentity under its (identity,
// reason, scope) key, or in the remainder once MaxScanIdentities keys are
// held. Other refusals are not counted. It allocates only for a new key.
func (sc *scanner) refused(r *Record) {
	reason := r.Outcome.Reason
	var scope vocab.Scope
	switch reason {
	case vocab.ReasonOutOfScope:
		scope = scopeNamed(r.Outcome.Detail)
		sc.rep.RefusedOutOfScope[scope]++
	case vocab.ReasonNoPolicy, vocab.ReasonNotOwner, vocab.ReasonInstanceCeiling:
	default:
		return
	}
	sc.rep.Refused[reason]++
	if sc.refusedBy == nil {
		return
	}
	k := refusedKey{r.CallerIdentity, reason, scope}
	s := sc.refusedBy[k]
	if s == nil {
		if len(sc.refusedBy) >= MaxScanIdentities {
			sc.rep.RefusedOtherIdentities[reason]++
			return
		}
		// The identity is a slice of the decoder's buffer: keep a copy.
		k.identity = strings.Clone(k.identity)
		s = &IdentityRefused{CallerIdentity: k.identity, Reason: reason, Scope: scope}
		sc.refusedBy[k] = s
	}
	s.Records++
}

// scopeNamed is the scope an out_of_scope record's detail names (the
// registrar writes the scope's spelling alone), or 0. Unlike
// vocab.ParseScope it allocates nothing for a detail that names none.
func scopeNamed(detail string) vocab.Scope {
	for s := vocab.ScopeVerb; s.Valid(); s++ {
		if detail == s.String() {
			return s
		}
	}
	return 0
}

type policyKey struct {
	policy string
	bucket vocab.Bucket
	shadow bool
}

// MaxScanPolicyKeys bounds the (policy, bucket, shadow) keys a scan keeps:
// past it, records are summed in Report.OtherPolicies, so a store of any
// size is scanned in bounded memory. The configuration bounds the policies
// in force; a store that names more keys than this was written under many
// configurations, or by something else.
const MaxScanPolicyKeys = 4096

// policy adds a limited record to its (policy, bucket, shadow) sum, or to
// the remainder once MaxScanPolicyKeys keys are held.
func (sc *scanner) policy(r *Record) {
	if sc.byPolicy == nil {
		sc.byPolicy = make(map[policyKey]*LimitedSummary)
	}
	k := policyKey{r.PolicyName(), r.LimitedBucket, r.Shadow}
	s := sc.byPolicy[k]
	if s == nil {
		if len(sc.byPolicy) >= MaxScanPolicyKeys {
			shadow := 0
			if r.Shadow {
				shadow = 1
			}
			sc.rep.OtherPolicies[shadow][r.LimitedBucket].add(r.Count)
			return
		}
		// The policy may be a slice of the decoder's buffer: keep a copy.
		k.policy = strings.Clone(k.policy)
		s = &LimitedSummary{}
		sc.byPolicy[k] = s
	}
	s.add(r.Count)
}

// admin counts an admin record by action and lists the first
// MaxReportedLines.
func (sc *scanner) admin(name string, lineNo uint64, r *Record) {
	sc.rep.Admin[r.Admin.Action]++
	if len(sc.rep.AdminRecords) >= MaxReportedLines {
		return
	}
	a := *r.Admin
	a.Identity = strings.Clone(a.Identity)
	a.Verbs = slices.Clone(a.Verbs)
	a.Buckets = slices.Clone(a.Buckets)
	a.Counts = slices.Clone(a.Counts) // a fresh record's: its strings are its own
	a.Others = slices.Clone(a.Others)
	sc.rep.AdminRecords = append(sc.rep.AdminRecords, AdminEntry{File: name, Line: lineNo, TS: r.TS, CallerIdentity: strings.Clone(r.CallerIdentity), Admin: a})
}

// finish counts the unpaired intents and sorts the per-identity and
// per-policy sums.
func (sc *scanner) finish() {
	if sc.refFinish != nil {
		sc.refFinish()
		return
	}
	for k, s := range sc.byIdentity {
		sc.rep.LimitedByIdentity = append(sc.rep.LimitedByIdentity, IdentityLimited{CallerIdentity: k.identity, Bucket: k.bucket, LimitedSummary: *s})
	}
	slices.SortFunc(sc.rep.LimitedByIdentity, func(a, b IdentityLimited) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Records, a.Records),
			cmp.Compare(a.CallerIdentity, b.CallerIdentity), cmp.Compare(a.Bucket, b.Bucket))
	})
	sc.finishPolicies()
	sc.finishRefused()
	sc.finishInvocations()
	var unpaired []*reqState
	for _, st := range sc.waiting {
		if st.first.TS.Before(sc.settled) {
			sc.rep.IntentWithoutOutcome++
			unpaired = append(unpaired, st)
		}
	}
	slices.SortFunc(unpaired, func(a, b *reqState) int { return cmp.Compare(a.order, b.order) })
	for _, st := range unpaired[:min(len(unpaired), MaxReportedLines)] {
		sc.rep.Unpaired = append(sc.rep.Unpaired, st.first)
	}
}

// finishPolicies lists the per-policy sums, sorted.
func (sc *scanner) finishPolicies() {
	for k, s := range sc.byPolicy {
		sc.rep.ByPolicy = append(sc.rep.ByPolicy, PolicyLimited{Policy: k.policy, Bucket: k.bucket, Shadow: k.shadow, LimitedSummary: *s})
	}
	slices.SortFunc(sc.rep.ByPolicy, func(a, b PolicyLimited) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Records, a.Records),
			cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Bucket, b.Bucket), boolCompare(a.Shadow, b.Shadow))
	})
}

// finishRefused lists the per-identity refusals, sorted.
func (sc *scanner) finishRefused() {
	for _, s := range sc.refusedBy {
		sc.rep.RefusedByIdentity = append(sc.rep.RefusedByIdentity, *s)
	}
	slices.SortFunc(sc.rep.RefusedByIdentity, func(a, b IdentityRefused) int {
		return cmp.Or(cmp.Compare(b.Records, a.Records), cmp.Compare(a.CallerIdentity, b.CallerIdentity),
			cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Scope, b.Scope))
	})
}

// boolCompare orders false before true.
func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
