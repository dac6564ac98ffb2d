package audit

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The rotated record: what is left of a generation retention deleted.
//
// Before the store deletes a rotated generation (audit_max_retained_files
// reached, and the file older than audit_min_retention_seconds), it
// appends to the active file, and fsyncs, one admin record of action
// rotated naming it; only then does it unlink the file. One line:
//
//	{"record_version":1,"phase":"admin","ts":"2026-12-01T09:30:00.120Z",
//	 "caller_identity":"registrar-otel:daemon","action":"rotated",
//	 "subject":{"file":"registrar-audit-20261201T080000Z-000001.jsonl",
//	   "next":"registrar-audit-20261201T090000Z-000002.jsonl",
//	   "rotation":1,"folded":0,"bytes":65490,"sha256":"9f86…","lines":212,
//	   "first_ts":"2026-12-01T07:00:00.001Z","last_ts":"2026-12-01T07:59:59.870Z",
//	   "counts":[{"identity":"unix-peer:uid=1000","verb":"mint","outcome":"first_mint","invocations":104}],
//	   "others":[{"verb":"mint","outcome":"limited","invocations":12}]}}
//
// A record's position in the store is its file and line: file names the
// deleted generation, whose lines were 1 to lines, first_ts and last_ts
// the timestamps of its first and last well-formed records (omitted when
// it held none), bytes and sha256 its size and digest when it was deleted.
//
// counts is what the callers did, so that an audit scan still counts it
// once the file is gone: per (caller identity, verb, outcome) the
// invocations the file recorded, an outcome record counting one under its
// class and a limited (counted, not shadow) record its count under
// "limited". A rotated record the deleted file itself held is folded in:
// its counts and others are added to this one's, so a count is carried on
// from file to file for as long as the store keeps any, and is never
// counted twice (the folded record was in the deleted file). The counts
// are bounded twice: the first MaxRotatedKeys keys met in the file are
// tallied, a later new key goes to others; and the record is kept within
// MaxRecordBytes by listing the keys with the most invocations first and
// moving the rest, smallest first, into others, which sums them per
// (verb, outcome) with no identity. So with very many identities the
// busiest are named and every invocation is still counted.
//
// rotation numbers the store's deletions, 1 for its first, and folded is
// how many rotated records this one carries on (those the file held, and
// what they carried, transitively). Together with next (the generation
// that was the oldest once this one was gone) they let `audit verify`
// prove that the rotated records the store keeps account for every
// deletion: the rotation numbers are distinct, each present record plus
// what it folded sums to the newest rotation number, the record after a
// present one names the file it said was next, and the newest names as
// next the oldest generation still present (Verify).

// Result is what an invocation came to, as a rotated record counts it:
// one of the five outcome classes (the same values as vocab.OutcomeClass),
// or ResultLimited for an invocation the limiter suppressed and a counted
// record counts. The zero value is not a result.
type Result uint8

// The six results.
const (
	ResultFirstMint               = Result(vocab.ClassFirstMint)
	ResultIdempotentRemint        = Result(vocab.ClassIdempotentRemint)
	ResultIdentityRemoved         = Result(vocab.ClassIdentityRemoved)
	ResultIdempotentAlreadyAbsent = Result(vocab.ClassIdempotentAlreadyAbsent)
	ResultRefused                 = Result(vocab.ClassRefused)
	ResultLimited                 = ResultRefused + 1
)

// NumResults is the number of results; a result's value is 1 to
// NumResults, so per-result arrays of NumResults+1 are indexed by Result.
const NumResults = int(ResultLimited)

var results = vocab.NewEnum[Result]("Result", "outcome", []string{
	ResultFirstMint:               "first_mint",
	ResultIdempotentRemint:        "idempotent_remint",
	ResultIdentityRemoved:         "identity_removed",
	ResultIdempotentAlreadyAbsent: "idempotent_already_absent",
	ResultRefused:                 "refused",
	ResultLimited:                 "limited",
})

// ResultOf is an outcome class as a Result.
func ResultOf(c vocab.OutcomeClass) Result { return Result(c) }

// Valid reports whether r is one of the six results.
func (r Result) Valid() bool { return results.Valid(r) }

// String returns the spelling: an outcome class's, or "limited".
func (r Result) String() string { return results.String(r) }

// MarshalText implements encoding.TextMarshaler; an invalid result is an
// error.
func (r Result) MarshalText() ([]byte, error) { return results.MarshalText(r) }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Result) UnmarshalText(b []byte) error { return results.UnmarshalText(r, b) }

// ParseResult parses a result's spelling (exact).
func ParseResult(s string) (Result, error) { return results.Parse(s) }

// InvocationCount is one entry of a rotated record's counts (Identity set)
// or others (Identity ""): how many invocations of Verb by Identity came
// to Result.
type InvocationCount struct {
	// Identity is the caller identity as the records carried it (already
	// within MaxFieldBytes); "" in others. An entry of counts may carry
	// "", the identity of a caller the transport named so.
	Identity    string
	Verb        vocab.Verb
	Result      Result
	Invocations uint64
}

// MaxRotatedKeys bounds the (identity, verb, outcome) keys the store
// tallies while reading a file it is about to delete: past it, a new key's
// invocations go to others. The same bound as a scan's per-identity
// breakdowns (MaxScanIdentities).
const MaxRotatedKeys = MaxScanIdentities

// Rotated is a rotated record's subject (Admin embeds it; zero on every
// other action).
type Rotated struct {
	// File is the deleted generation's name
	// (registrar-audit-<YYYYMMDDTHHMMSSZ>-<NNNNNN>.jsonl).
	File string
	// Next is the generation that was the oldest once File was deleted; a
	// name that sorts after File.
	Next string
	// Rotation numbers the store's deletions: 1 for its first, one more
	// for each. At least 1.
	Rotation uint64
	// Folded is how many rotated records this one carries on: those File
	// held and, transitively, what they carried. Less than Rotation.
	Folded uint64
	// Bytes, SHA256 (64 lowercase hex digits) and Lines are File's size,
	// digest and line count when it was deleted.
	Bytes  uint64
	SHA256 string
	Lines  uint64
	// FirstTS and LastTS are the ts of File's first and last well-formed
	// records; both zero (the keys omitted) when it held none.
	FirstTS, LastTS time.Time
	// Counts are the invocations per (identity, verb, result), at least 1
	// each, no key twice, written the most invocations first (then
	// identity, verb and result order); nil when there are none (the key
	// is omitted).
	Counts []InvocationCount
	// Others sums, per (verb, result), the invocations not in Counts;
	// Identity "" in each; nil when there are none. Written in verb, then
	// result order.
	Others []InvocationCount
	// Chain is, when File's last line was chained (a sealed store), that
	// line's chain value (32 lowercase hex digits): the value the first
	// line of Next continues from, so that `audit verify` can check the
	// first line of the oldest file kept. "" (the key omitted) otherwise.
	Chain string
}

// compareCounts is counts' written order.
func compareCounts(a, b InvocationCount) int {
	return cmp.Or(cmp.Compare(b.Invocations, a.Invocations), cmp.Compare(a.Identity, b.Identity),
		cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Result, b.Result))
}

// compareOthers is others' written order.
func compareOthers(a, b InvocationCount) int {
	return cmp.Or(cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Result, b.Result))
}

// validate checks the rotated subject's values (presence is checked by
// validateSubject). stored: as the writer writes it (lists in order).
func (s *Rotated) validate(stored bool) error {
	if _, _, ok := parseGeneration(s.File); !ok {
		return &FieldError{Field: "subject.file", Problem: "is not a rotated generation's name (registrar-audit-YYYYMMDDTHHMMSSZ-NNNNNN.jsonl)"}
	}
	if _, _, ok := parseGeneration(s.Next); !ok {
		return &FieldError{Field: "subject.next", Problem: "is not a rotated generation's name (registrar-audit-YYYYMMDDTHHMMSSZ-NNNNNN.jsonl)"}
	}
	if s.Next <= s.File {
		return &FieldError{Field: "subject.next", Problem: "does not sort after subject.file (retention deletes the oldest generation first)"}
	}
	if s.Folded >= s.Rotation {
		return &FieldError{Field: "subject.folded", Problem: "is not below subject.rotation (a record folds only records written before it)"}
	}
	if !isLowerHex(s.SHA256, 64) {
		return &FieldError{Field: "subject.sha256", Problem: "is not 64 lowercase hex digits"}
	}
	switch {
	case s.FirstTS.IsZero() != s.LastTS.IsZero():
		return &PhaseError{Phase: PhaseAdmin, Field: "subject.last_ts", Missing: s.LastTS.IsZero(), Problem: "and subject.first_ts are written together or not at all"}
	case !s.FirstTS.IsZero() && s.Lines == 0:
		return &FieldError{Field: "subject.first_ts", Problem: "is given for a file of 0 lines"}
	}
	if !s.FirstTS.IsZero() {
		if err := checkTime("subject.first_ts", s.FirstTS); err != nil {
			return err
		}
		if err := checkTime("subject.last_ts", s.LastTS); err != nil {
			return err
		}
	}
	if err := checkCounts("subject.counts", s.Counts, true, stored); err != nil {
		return err
	}
	if s.Chain != "" && !isLowerHex(s.Chain, ChainHexLen) {
		return &FieldError{Field: "subject.chain", Problem: "is not 32 lowercase hex digits"}
	}
	return checkCounts("subject.others", s.Others, false, stored)
}

// checkCounts checks counts (named, with an identity each) or others (no
// identity): not empty when present, every verb and result valid, at
// least one invocation, no key twice, and, stored, in the written order.
func checkCounts(field string, cs []InvocationCount, named, stored bool) error {
	if cs == nil {
		return nil
	}
	if len(cs) == 0 {
		return &FieldError{Field: field, Problem: "is empty (omitted when there is nothing to count)"}
	}
	order := compareOthers
	if named {
		order = compareCounts
	}
	for i, c := range cs {
		switch {
		case !c.Verb.Valid():
			return &FieldError{Field: field + ".verb", Problem: "is not mint or deregister"}
		case !c.Result.Valid():
			return &FieldError{Field: field + ".outcome", Problem: "is not an outcome class or limited"}
		case c.Invocations == 0:
			return &FieldError{Field: field + ".invocations", Problem: "must be at least 1"}
		case !named && c.Identity != "":
			return &FieldError{Field: field + ".identity", Problem: "must be absent (others sums what counts does not name)"}
		}
		if named { // never cut: a record's identity, already within the bound
			if err := checkBounded(field+".identity", c.Identity); err != nil {
				return err
			}
		}
		for _, d := range cs[:i] {
			if d.Identity == c.Identity && d.Verb == c.Verb && d.Result == c.Result {
				return &FieldError{Field: field, Problem: "names a key twice"}
			}
		}
		if stored && i > 0 && order(cs[i-1], c) > 0 {
			return &FieldError{Field: field, Problem: "is not in the written order"}
		}
	}
	return nil
}

// bounded returns s with its timestamps canonical and its lists in the
// written order, on copies of the caller's slices.
func (s Rotated) bounded() Rotated {
	s.FirstTS, s.LastTS = canonicalTime(s.FirstTS), canonicalTime(s.LastTS)
	if s.Counts != nil { // a clone of an empty list is still a (refused) list
		s.Counts = slices.Clone(s.Counts)
		slices.SortFunc(s.Counts, compareCounts)
	}
	if s.Others != nil {
		s.Others = slices.Clone(s.Others)
		slices.SortFunc(s.Others, compareOthers)
	}
	return s
}

// fit keeps a rotated record's line within MaxRecordBytes, a sealed
// store's chain value included (maxUnchainedBytes): while line is
// longer, the counts with the fewest invocations move into others (summed
// per verb and result), and the line is written again. A line that fits
// is returned as it is. c is bounded and valid; its Admin is its own copy.
func fit(c *Record, line []byte) []byte {
	for len(line) > maxUnchainedBytes && len(c.Admin.Counts) > 0 {
		s := &c.Admin.Rotated
		excess := len(line) - maxUnchainedBytes
		n := len(s.Counts)
		for n > 0 && excess > 0 {
			n--
			excess -= len(appendCount(nil, s.Counts[n], true)) + 1 // its comma
		}
		others := map[[2]uint8]uint64{}
		for _, o := range s.Others {
			others[[2]uint8{uint8(o.Verb), uint8(o.Result)}] += o.Invocations
		}
		for _, m := range s.Counts[n:] {
			k := [2]uint8{uint8(m.Verb), uint8(m.Result)}
			others[k] = addSat(others[k], m.Invocations)
		}
		s.Others = s.Others[:0]
		for k, v := range others {
			s.Others = append(s.Others, InvocationCount{Verb: vocab.Verb(k[0]), Result: Result(k[1]), Invocations: v})
		}
		slices.SortFunc(s.Others, compareOthers)
		s.Counts = s.Counts[:n:n]
		if n == 0 {
			s.Counts = nil
		}
		line = appendRecord(line[:0], c)
	}
	return line
}

// appendKey appends the value of rotated subject key k.
func (s *Rotated) appendKey(dst []byte, k int) []byte {
	switch k {
	case subjFile:
		return appendString(dst, s.File)
	case subjNext:
		return appendString(dst, s.Next)
	case subjRotation:
		return strconv.AppendUint(dst, s.Rotation, 10)
	case subjFolded:
		return strconv.AppendUint(dst, s.Folded, 10)
	case subjBytes:
		return strconv.AppendUint(dst, s.Bytes, 10)
	case subjSHA256:
		return appendString(dst, s.SHA256)
	case subjLines:
		return strconv.AppendUint(dst, s.Lines, 10)
	case subjFirstTS:
		return appendTime(dst, s.FirstTS)
	case subjLastTS:
		return appendTime(dst, s.LastTS)
	case subjChain:
		return appendString(dst, s.Chain)
	case subjCounts, subjOthers:
		cs, named := s.Counts, true
		if k == subjOthers {
			cs, named = s.Others, false
		}
		dst = append(dst, '[')
		for i, c := range cs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCount(dst, c, named)
		}
		return append(dst, ']')
	}
	return dst
}

// The keys of an entry of counts (others has no identity), in written
// order.
const (
	countIdentity = iota
	countVerb
	countOutcome
	countInvocations
	numCountKeys
)

var countKeys = [numCountKeys]string{countIdentity: "identity", countVerb: "verb", countOutcome: "outcome", countInvocations: "invocations"}

// appendCount appends one entry of counts (named) or others.
func appendCount(dst []byte, c InvocationCount, named bool) []byte {
	dst = append(dst, '{')
	if named {
		dst = append(dst, `"identity":`...)
		dst = appendString(dst, c.Identity)
		dst = append(dst, ',')
	}
	dst = append(dst, `"verb":"`...)
	dst = append(dst, c.Verb.String()...)
	dst = append(dst, `","outcome":"`...)
	dst = append(dst, c.Result.String()...)
	dst = append(dst, `","invocations":`...)
	dst = strconv.AppendUint(dst, c.Invocations, 10)
	return append(dst, '}')
}
