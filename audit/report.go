package audit

import (
	"math"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// IdentityLimited is one (caller identity, bucket)'s limited records.
type IdentityLimited struct {
	CallerIdentity string
	Bucket         vocab.Bucket
	LimitedSummary
}

// AuthorizationReasons are the refusal reasons of caller authorization,
// the ones Scan counts in Report.Refused, in the order it reports them.
// On the wire no_policy, out_of_scope and not_owner are answered
// CallerNotPermitted, instance_ceiling InstanceCeilingReached. A variable
// only because Go has no constant arrays: never assign to it.
var AuthorizationReasons = [...]vocab.Reason{vocab.ReasonNoPolicy, vocab.ReasonOutOfScope, vocab.ReasonNotOwner, vocab.ReasonInstanceCeiling}

// IdentityRefused is one (caller identity, reason, scope)'s authorization
// refusals: refused outcome records, one per refused invocation.
type IdentityRefused struct {
	CallerIdentity string
	// Reason is one of AuthorizationReasons.
	Reason vocab.Reason
	// Scope is, for vocab.ReasonOutOfScope, the scope the record's
	// outcome.detail names (0 when it names none of the four); 0 for the
	// other reasons.
	Scope vocab.Scope
	// Records is the number of refused outcome records.
	Records uint64
}

// Report is the result of Scan. Its counts are exact; its lists are the
// first MaxReportedLines entries in file order.
type Report struct {
	// Dir, Now, Window and Grace are the scan's effective parameters.
	Dir    string
	Now    time.Time
	Window time.Duration
	Grace  time.Duration

	// IntentWithoutOutcome counts request_ids with an intent in the window
	// older than the grace and no outcome (a crash mid-mint).
	IntentWithoutOutcome uint64
	// Unpaired lists those intents (the first intent of each request_id).
	Unpaired []UnpairedIntent

	// MalformedRecords counts malformed lines, duplicates of a request_id
	// included.
	MalformedRecords uint64
	// MalformedByRule counts them per rule.
	MalformedByRule map[Rule]uint64
	// Malformed lists them.
	Malformed []MalformedLine

	// Limited summarises the limited (counted) records in the window,
	// indexed by vocab.Bucket: invocations that were limited. Shadow
	// records are never in it.
	Limited [vocab.NumBuckets]LimitedSummary

	// ShadowLimited summarises the shadow counted records ("shadow": true)
	// in the window, indexed by vocab.Bucket: calls their caller policy's
	// shadow sizes would have limited, none of which was limited for that
	// reason.
	ShadowLimited [vocab.NumBuckets]LimitedSummary

	// ByPolicy is Limited and ShadowLimited per (caller policy, bucket,
	// shadow), the most invocations first (then the most records, then
	// policy, bucket and enforced before shadow). Keys past
	// MaxScanPolicyKeys are summed in OtherPolicies instead, indexed
	// [shadow][bucket] (0 enforced, 1 shadow).
	ByPolicy      []PolicyLimited
	OtherPolicies [2][vocab.NumBuckets]LimitedSummary

	// LimitedByIdentity (with ScanOptions.ByIdentity) is Limited per
	// (caller identity, bucket), the most limited invocations first (then
	// the most records, then identity and bucket order); shadow records are
	// not in it. Keys past MaxScanIdentities are summed in
	// LimitedOtherIdentities instead.
	LimitedByIdentity      []IdentityLimited
	LimitedOtherIdentities [vocab.NumBuckets]LimitedSummary

	// Refused counts the refused outcome records in the window whose
	// reason is one of AuthorizationReasons, indexed by vocab.Reason (the
	// other reasons' entries stay 0): the caller-authorization refusals
	// that were recorded. A pre-derivation refusal (no_policy,
	// out_of_scope) past the caller's predecision_refusal bucket writes no
	// outcome record, only a limited record's count (in Limited, with no
	// reason), so it is never in Refused: these are the recorded
	// refusals, not every refusal.
	Refused [vocab.ReasonInstanceCeiling + 1]uint64
	// RefusedOutOfScope splits Refused[vocab.ReasonOutOfScope] by the
	// scope each record's outcome.detail names, indexed by vocab.Scope;
	// index 0 counts a detail that names none of the four (absent, or
	// written by something other than the registrar).
	RefusedOutOfScope [vocab.ScopeHost + 1]uint64

	// RefusedByIdentity (with ScanOptions.ByIdentity) is Refused per
	// (caller identity, reason, scope), out_of_scope split by its scope:
	// the most records first (then identity, reason and scope order).
	// Keys past MaxScanIdentities are summed in RefusedOtherIdentities
	// instead, indexed by vocab.Reason.
	RefusedByIdentity      []IdentityRefused
	RefusedOtherIdentities [vocab.ReasonInstanceCeiling + 1]uint64

	// InvocationsByIdentity (with ScanOptions.ByIdentity) is every
	// invocation per (caller identity, verb, result): the outcome records
	// by class, the limited records' counts under limited, and the counts
	// the rotated records in the window carry for the files retention
	// deleted (Rotated). The identities with the most invocations come
	// first, each one's rows together. Keys past MaxScanIdentities, and
	// the rotated records' others, are summed in
	// InvocationsOtherIdentities, indexed [verb][result].
	InvocationsByIdentity      []IdentityInvocations
	InvocationsOtherIdentities [vocab.NumVerbs][NumResults + 1]InvocationTotals

	// Records counts the well-formed records in the window, by phase
	// (index Phase-1: intent, outcome, limited, admin).
	Records [NumPhases]uint64

	// Admin counts the admin records in the window by action (index
	// Action; 0 is unused), and AdminRecords lists them (the first
	// MaxReportedLines, in file order). They are evidence of what was done
	// to the daemon's state, not anomalies.
	Admin        [NumActions + 1]uint64
	AdminRecords []AdminEntry

	// Files lists the files read, oldest first; Skipped lists every other
	// entry of the directory, not read, and why.
	Files   []string
	Skipped []SkippedFile

	// StoreAnomalies are anomalies of the directory rather than of a line:
	// records that stop without an active file, a gap in the generation
	// numbers, a store file that could not be read, the directory or an
	// entry of it owned by another uid or group- or world-writable.
	StoreAnomalies []StoreAnomaly

	// LateLimitedRecords counts the limited records written more than
	// LateLimitedAfter after their window_end: recovered from the evidence
	// checkpoint after an unclean stop (or written by a stalled store).
	// They are evidence, not anomalies.
	LateLimitedRecords uint64
	// Gaps groups them by window_end (at most MaxReportedLines): each is an
	// interval in which limited invocations may have gone uncounted.
	Gaps []EvidenceGap
}

// PolicyLimited is one (caller policy, bucket, shadow)'s counted records.
type PolicyLimited struct {
	// Policy is the policy's name, DefaultPolicy for the [registrar]
	// sizes.
	Policy string
	Bucket vocab.Bucket
	// Shadow: the records count shadow charges, not limited invocations.
	Shadow bool
	LimitedSummary
}

// AdminEntry locates one admin record and says what it records.
type AdminEntry struct {
	File string
	Line uint64 // 1-based
	TS   time.Time
	// CallerIdentity is who acted.
	CallerIdentity string
	// Admin is the action and its subject, as the record carries them.
	Admin Admin
}

// StoreAnomalyKind names an anomaly of the record directory. Its string is
// the stable spelling of the scan report.
type StoreAnomalyKind string

// The directory anomalies.
const (
	// AnomalyMissingActiveFile: the directory holds files (generations or
	// others) but no active file: the records stop without the file the
	// daemon appends to (deleted, renamed away, or a symlink planted).
	AnomalyMissingActiveFile StoreAnomalyKind = "missing_active_file"
	// AnomalyGenerationGap: two consecutive retained generations whose
	// numbers (the six-digit sequence) are not consecutive: generations
	// between them were removed. Retention only ever removes the oldest.
	AnomalyGenerationGap StoreAnomalyKind = "generation_gap"
	// AnomalyUnreadableFile: a file with a store name that could not be
	// opened: its records were not checked.
	AnomalyUnreadableFile StoreAnomalyKind = "unreadable_file"
)

// StoreAnomaly is one anomaly of the record directory.
type StoreAnomaly struct {
	Kind StoreAnomalyKind
	// File is the file concerned (for a gap, the generation after it).
	File string
	// Detail says what is wrong in a sentence.
	Detail string
}

// Reasons of Report.Skipped, besides "rotated before the window" and
// "removed during the scan".
const (
	SkipUnrecognisedName = "unrecognised name (not an active file or a rotated generation)"
	SkipSymlink          = "symlink (never followed)"
	SkipNotRegular       = "not a regular file"
	skipUnreadablePrefix = "unreadable: "
)

// UnpairedIntent locates an intent that has no outcome.
type UnpairedIntent struct {
	File      string
	Line      uint64
	RequestID string
	TS        time.Time
}

// MalformedLine locates a malformed line and names the rule it broke.
type MalformedLine struct {
	File string
	Line uint64 // 1-based
	Rule Rule
	// Detail is a short explanation; it never contains raw line bytes.
	Detail string
}

// LimitedSummary aggregates one bucket's limited records.
type LimitedSummary struct {
	// Records is the number of limited records.
	Records uint64
	// Count is the sum of their counts (saturating at math.MaxUint64): how
	// many invocations were limited.
	Count uint64
}

// SkippedFile is a directory entry the scan did not read.
type SkippedFile struct {
	Name   string
	Reason string
}

// Anomalies reports whether the scan found anything an operator must look
// at: an intent without outcome, a malformed line, or an anomaly of the
// directory (StoreAnomalies). Limited records are evidence, not anomalies;
// skipped files are listed, not anomalies by themselves.
func (r *Report) Anomalies() bool {
	return r.IntentWithoutOutcome > 0 || r.MalformedRecords > 0 || len(r.StoreAnomalies) > 0
}

// add counts one limited record of count invocations, saturating.
func (s *LimitedSummary) add(count uint64) {
	s.Records++
	if s.Count > math.MaxUint64-count {
		s.Count = math.MaxUint64
	} else {
		s.Count += count
	}
}
