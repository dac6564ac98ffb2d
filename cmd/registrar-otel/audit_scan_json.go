package main

// `audit scan --json`: the stable shape (docs/en/operations.md, --json
// schemas).

import (
	"encoding/json"
	"io"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// scanJSON is the stable --json shape. Lists are always arrays, never
// null; durations are whole seconds; times use the audit TimeLayout.
type scanJSON struct {
	Dir                  string                 `json:"dir"`
	Now                  string                 `json:"now"`
	WindowSeconds        int64                  `json:"window_seconds"`
	GraceSeconds         int64                  `json:"grace_seconds"`
	Anomalies            bool                   `json:"anomalies"`
	IntentWithoutOutcome uint64                 `json:"intent_without_outcome"`
	MalformedRecords     uint64                 `json:"malformed_records"`
	MalformedByRule      map[audit.Rule]uint64  `json:"malformed_by_rule"`
	Malformed            []scanMalformedJSON    `json:"malformed"`
	UnpairedIntents      []scanUnpairedJSON     `json:"unpaired_intents"`
	Limited              map[string]scanLimJSON `json:"limited"`
	// ShadowLimited is apart from Limited: calls a policy's shadow sizes
	// would have limited, none of which was.
	ShadowLimited map[string]scanLimJSON `json:"shadow_limited"`
	ByPolicy      []scanPolicyJSON       `json:"by_policy"`
	// ByPolicyOther sums the keys past the scan's bound, as
	// {"limited": per bucket, "shadow": per bucket}.
	ByPolicyOther      map[string]map[string]scanLimJSON `json:"by_policy_other"`
	Admin              scanAdminJSON                     `json:"admin"`
	Records            map[string]uint64                 `json:"records"`
	Files              []string                          `json:"files"`
	Skipped            []scanSkippedJSON                 `json:"skipped"`
	StoreAnomalies     []scanStoreAnomalyJSON            `json:"store_anomalies"`
	LateLimitedRecords uint64                            `json:"late_limited_records"`
	EvidenceGaps       []scanGapJSON                     `json:"evidence_gaps"`
	// Refused counts the recorded caller-authorization refusals per
	// reason (every audit.AuthorizationReasons member, 0 included), and
	// RefusedOutOfScope splits out_of_scope by scope (the four and
	// "unnamed").
	Refused           map[string]uint64 `json:"refused"`
	RefusedOutOfScope map[string]uint64 `json:"refused_out_of_scope"`
	// With --by identity only.
	LimitedByIdentity        []scanIdentityJSON     `json:"limited_by_identity,omitempty"`
	LimitedByIdentityOmitted *int                   `json:"limited_by_identity_omitted,omitempty"`
	LimitedOtherIdentities   map[string]scanLimJSON `json:"limited_other_identities,omitempty"`
	// omitzero, not omitempty: with --by identity an empty list is [],
	// as every list of the shape.
	RefusedByIdentity        []scanRefusedJSON `json:"refused_by_identity,omitzero"`
	RefusedByIdentityOmitted *int              `json:"refused_by_identity_omitted,omitzero"`
	RefusedOtherIdentities   map[string]uint64 `json:"refused_other_identities,omitzero"`
	// InvocationsByIdentity: every invocation per (caller identity, verb,
	// outcome or "limited"), rotated the part counted by rotated records
	// of deleted files; InvocationsOtherIdentities sums the keys past the
	// scan's bound and the rotated records' others, per (verb, outcome),
	// non-zero only.
	InvocationsByIdentity      []scanInvocationsJSON `json:"invocations_by_identity,omitzero"`
	InvocationsByIdentityOmit  *int                  `json:"invocations_by_identity_omitted,omitzero"`
	InvocationsOtherIdentities []scanInvocationsJSON `json:"invocations_other_identities,omitzero"`
	// With --fail-on-limited only.
	FailOnLimited *failOnLimited `json:"fail_on_limited,omitempty"`
}

type scanGapJSON struct {
	File    string `json:"file"`
	Line    uint64 `json:"line"`
	From    string `json:"from"`
	To      string `json:"to"`
	Records uint64 `json:"records"`
	Count   uint64 `json:"count"`
}

type scanPolicyJSON struct {
	Policy  string `json:"policy"`
	Bucket  string `json:"bucket"`
	Shadow  bool   `json:"shadow"`
	Records uint64 `json:"records"`
	Count   uint64 `json:"count"`
}

type scanAdminJSON struct {
	ByAction map[string]uint64     `json:"by_action"`
	Records  []scanAdminRecordJSON `json:"records"`
	// Omitted is how many admin records the list leaves out (it holds the
	// first audit.MaxReportedLines).
	Omitted uint64 `json:"omitted"`
}

type scanAdminRecordJSON struct {
	File           string          `json:"file"`
	Line           uint64          `json:"line"`
	TS             string          `json:"ts"`
	CallerIdentity string          `json:"caller_identity"`
	Action         string          `json:"action"`
	Subject        scanSubjectJSON `json:"subject"`
}

// scanSubjectJSON is an admin record's subject: the keys its action uses
// (limits_reset: identity, verbs, buckets; rotated: file to others and,
// sealed, chain; sealed: epoch, reason, key_id), with the record's own
// spelling.
type scanSubjectJSON struct {
	Identity string   `json:"identity,omitempty"`
	Verbs    []string `json:"verbs,omitempty"`
	Buckets  []string `json:"buckets,omitempty"`
	File     string   `json:"file,omitempty"`
	Next     string   `json:"next,omitempty"`
	Rotation uint64   `json:"rotation,omitempty"`
	// Folded, Bytes and Lines are on every rotated subject, 0 included.
	Folded  *uint64         `json:"folded,omitempty"`
	Bytes   *uint64         `json:"bytes,omitempty"`
	SHA256  string          `json:"sha256,omitempty"`
	Lines   *uint64         `json:"lines,omitempty"`
	FirstTS string          `json:"first_ts,omitempty"`
	LastTS  string          `json:"last_ts,omitempty"`
	Counts  []scanCountJSON `json:"counts,omitempty"`
	Others  []scanCountJSON `json:"others,omitempty"`
	// Chain is a sealed store's rotated subject's chain value.
	Chain string `json:"chain,omitempty"`
	// Epoch is on every sealed subject, 0 included; Reason and KeyID too.
	Epoch  *uint64 `json:"epoch,omitempty"`
	Reason string  `json:"reason,omitempty"`
	KeyID  string  `json:"key_id,omitempty"`
}

// scanCountJSON is one entry of a rotated record's counts (with its
// identity) or others (without).
type scanCountJSON struct {
	Identity    *string `json:"identity,omitempty"`
	Verb        string  `json:"verb"`
	Outcome     string  `json:"outcome"`
	Invocations uint64  `json:"invocations"`
}

type scanIdentityJSON struct {
	CallerIdentity string `json:"caller_identity"`
	Bucket         string `json:"bucket"`
	Records        uint64 `json:"records"`
	Count          uint64 `json:"count"`
}

// scanInvocationsJSON is one (caller identity, verb, outcome)'s
// invocations; CallerIdentity is absent in the remainder.
type scanInvocationsJSON struct {
	CallerIdentity *string `json:"caller_identity,omitempty"`
	Verb           string  `json:"verb"`
	Outcome        string  `json:"outcome"`
	Invocations    uint64  `json:"invocations"`
	Rotated        uint64  `json:"rotated"`
}

// scanRefusedJSON is one (caller identity, reason, scope)'s refusals.
// Scope is the scope of an out_of_scope row (or "unnamed"), "" for the
// other reasons.
type scanRefusedJSON struct {
	CallerIdentity string `json:"caller_identity"`
	Reason         string `json:"reason"`
	Scope          string `json:"scope"`
	Records        uint64 `json:"records"`
}

type scanStoreAnomalyJSON struct {
	Kind   audit.StoreAnomalyKind `json:"kind"`
	File   string                 `json:"file"`
	Detail string                 `json:"detail"`
}

type scanMalformedJSON struct {
	File   string     `json:"file"`
	Line   uint64     `json:"line"`
	Rule   audit.Rule `json:"rule"`
	Detail string     `json:"detail"`
}

type scanUnpairedJSON struct {
	File      string `json:"file"`
	Line      uint64 `json:"line"`
	RequestID string `json:"request_id"`
	TS        string `json:"ts"`
}

type scanLimJSON struct {
	Records uint64 `json:"records"`
	Count   uint64 `json:"count"`
}

type scanSkippedJSON struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

func writeScanJSON(w io.Writer, v scanView) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(scanJSONOf(v))
}

// scanJSONOf is v's --json shape.
func scanJSONOf(v scanView) scanJSON {
	rep := v.rep
	out := scanJSON{
		Dir:                  rep.Dir,
		Now:                  rep.Now.UTC().Format(audit.TimeLayout),
		WindowSeconds:        int64(rep.Window / time.Second),
		GraceSeconds:         int64(rep.Grace / time.Second),
		Anomalies:            rep.Anomalies(),
		IntentWithoutOutcome: rep.IntentWithoutOutcome,
		MalformedRecords:     rep.MalformedRecords,
		MalformedByRule:      rep.MalformedByRule,
		Malformed:            []scanMalformedJSON{},
		UnpairedIntents:      []scanUnpairedJSON{},
		Limited:              map[string]scanLimJSON{},
		ShadowLimited:        map[string]scanLimJSON{},
		ByPolicy:             []scanPolicyJSON{},
		ByPolicyOther:        map[string]map[string]scanLimJSON{"limited": {}, "shadow": {}},
		Admin:                scanAdminJSON{ByAction: map[string]uint64{}, Records: []scanAdminRecordJSON{}},
		Records:              map[string]uint64{},
		Files:                append([]string{}, rep.Files...),
		Skipped:              []scanSkippedJSON{},
		StoreAnomalies:       []scanStoreAnomalyJSON{},
		LateLimitedRecords:   rep.LateLimitedRecords,
		EvidenceGaps:         []scanGapJSON{},
		Refused:              map[string]uint64{},
		RefusedOutOfScope:    map[string]uint64{scopeUnnamed: rep.RefusedOutOfScope[0]},
	}
	for _, r := range audit.AuthorizationReasons {
		out.Refused[r.String()] = rep.Refused[r]
	}
	for sc := vocab.ScopeVerb; sc.Valid(); sc++ {
		out.RefusedOutOfScope[sc.String()] = rep.RefusedOutOfScope[sc]
	}
	for _, g := range rep.Gaps {
		out.EvidenceGaps = append(out.EvidenceGaps, scanGapJSON{g.File, g.Line, g.From.UTC().Format(audit.TimeLayout), g.To.UTC().Format(audit.TimeLayout), g.Records, g.Count})
	}
	for _, a := range rep.StoreAnomalies {
		out.StoreAnomalies = append(out.StoreAnomalies, scanStoreAnomalyJSON(a))
	}
	if out.MalformedByRule == nil {
		out.MalformedByRule = map[audit.Rule]uint64{}
	}
	for _, m := range rep.Malformed {
		out.Malformed = append(out.Malformed, scanMalformedJSON(m))
	}
	for _, u := range rep.Unpaired {
		out.UnpairedIntents = append(out.UnpairedIntents, scanUnpairedJSON{u.File, u.Line, u.RequestID, u.TS.UTC().Format(audit.TimeLayout)})
	}
	for b := range vocab.Bucket(vocab.NumBuckets) {
		out.Limited[b.String()] = scanLimJSON(rep.Limited[b])
		out.ShadowLimited[b.String()] = scanLimJSON(rep.ShadowLimited[b])
		out.ByPolicyOther["limited"][b.String()] = scanLimJSON(rep.OtherPolicies[0][b])
		out.ByPolicyOther["shadow"][b.String()] = scanLimJSON(rep.OtherPolicies[1][b])
	}
	for _, r := range rep.ByPolicy {
		out.ByPolicy = append(out.ByPolicy, scanPolicyJSON{r.Policy, r.Bucket.String(), r.Shadow, r.Records, r.Count})
	}
	var admins uint64
	for a := audit.Action(1); int(a) <= audit.NumActions; a++ {
		out.Admin.ByAction[a.String()] = rep.Admin[a]
		admins += rep.Admin[a]
	}
	for _, e := range rep.AdminRecords {
		out.Admin.Records = append(out.Admin.Records, scanAdminRecordJSON{
			File: e.File, Line: e.Line, TS: e.TS.UTC().Format(audit.TimeLayout), CallerIdentity: e.CallerIdentity,
			Action: e.Admin.Action.String(), Subject: subjectJSON(e.Admin),
		})
	}
	out.Admin.Omitted = admins - uint64(len(rep.AdminRecords))
	for p := audit.PhaseIntent; int(p) <= audit.NumPhases; p++ {
		out.Records[p.String()] = rep.Records[p-1]
	}
	for _, s := range rep.Skipped {
		out.Skipped = append(out.Skipped, scanSkippedJSON(s))
	}
	if v.byIdentity {
		rows, omitted := v.shown()
		out.LimitedByIdentity = []scanIdentityJSON{}
		for _, r := range rows {
			out.LimitedByIdentity = append(out.LimitedByIdentity, scanIdentityJSON{r.CallerIdentity, r.Bucket.String(), r.Records, r.Count})
		}
		out.LimitedByIdentityOmitted = &omitted
		out.LimitedOtherIdentities = map[string]scanLimJSON{}
		for b := range vocab.Bucket(vocab.NumBuckets) {
			out.LimitedOtherIdentities[b.String()] = scanLimJSON(rep.LimitedOtherIdentities[b])
		}
		refused, refusedOmitted := v.shownRefused()
		out.RefusedByIdentity = []scanRefusedJSON{}
		for _, r := range refused {
			out.RefusedByIdentity = append(out.RefusedByIdentity, scanRefusedJSON{r.CallerIdentity, r.Reason.String(), scopeName(r.Reason, r.Scope), r.Records})
		}
		out.RefusedByIdentityOmitted = &refusedOmitted
		out.RefusedOtherIdentities = map[string]uint64{}
		for _, r := range audit.AuthorizationReasons {
			out.RefusedOtherIdentities[r.String()] = rep.RefusedOtherIdentities[r]
		}
		invRows, invOmitted := v.shownInvocations()
		out.InvocationsByIdentity = []scanInvocationsJSON{}
		for _, r := range invRows {
			out.InvocationsByIdentity = append(out.InvocationsByIdentity, scanInvocationsJSON{&r.CallerIdentity, r.Verb.String(), r.Result.String(), r.Invocations, r.Rotated})
		}
		out.InvocationsByIdentityOmit = &invOmitted
		out.InvocationsOtherIdentities = []scanInvocationsJSON{}
		forOtherInvocations(rep, func(verb vocab.Verb, res audit.Result, t audit.InvocationTotals) {
			out.InvocationsOtherIdentities = append(out.InvocationsOtherIdentities, scanInvocationsJSON{nil, verb.String(), res.String(), t.Invocations, t.Rotated})
		})
	}
	out.FailOnLimited = v.failOn
	return out
}

// subjectJSON is a's subject as --json shows it.
func subjectJSON(a audit.Admin) scanSubjectJSON {
	s := scanSubjectJSON{Identity: a.Identity}
	for _, v := range a.Verbs {
		s.Verbs = append(s.Verbs, v.String())
	}
	for _, b := range a.Buckets {
		s.Buckets = append(s.Buckets, b.String())
	}
	if a.Action == audit.ActionSealed {
		s.Epoch, s.Reason, s.KeyID = &a.Epoch, a.Reason.String(), a.KeyID
		return s
	}
	if a.Action != audit.ActionRotated {
		return s
	}
	r := a.Rotated
	s.File, s.Next, s.Rotation, s.SHA256, s.Chain = r.File, r.Next, r.Rotation, r.SHA256, r.Chain
	s.Folded, s.Bytes, s.Lines = &r.Folded, &r.Bytes, &r.Lines
	if !r.FirstTS.IsZero() {
		s.FirstTS, s.LastTS = r.FirstTS.UTC().Format(audit.TimeLayout), r.LastTS.UTC().Format(audit.TimeLayout)
	}
	for _, c := range r.Counts {
		s.Counts = append(s.Counts, scanCountJSON{&c.Identity, c.Verb.String(), c.Result.String(), c.Invocations})
	}
	for _, c := range r.Others {
		s.Others = append(s.Others, scanCountJSON{nil, c.Verb.String(), c.Result.String(), c.Invocations})
	}
	return s
}

// forOtherInvocations calls f for each non-zero remainder of the
// per-identity invocations, in verb and outcome order.
func forOtherInvocations(rep *audit.Report, f func(vocab.Verb, audit.Result, audit.InvocationTotals)) {
	for verb := range vocab.Verb(vocab.NumVerbs) {
		for res := audit.Result(1); res.Valid(); res++ {
			if t := rep.InvocationsOtherIdentities[verb][res]; t.Invocations > 0 {
				f(verb, res, t)
			}
		}
	}
}
