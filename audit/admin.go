package audit

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The admin record: one phase for every action taken on the daemon's own
// state.
//
// An admin line names who acted, what was done and to what:
//
//	{"record_version":1,"phase":"admin","ts":"2026-08-23T12:40:00.000Z",
//	 "caller_identity":"unix-peer:uid=0","action":"limits_reset",
//	 "subject":{"identity":"unix-peer:uid=1000","verbs":["mint","deregister"],
//	            "buckets":["predecision_refusal","admission"]}}
//
// (one line in the store). caller_identity is who acted: the operator's
// identity as the admin socket derived it, or the daemon's own
// (DaemonIdentity) when it acted by itself. action is a closed enum
// (Action). subject is an object whose keys the action fixes, as a
// record's phase fixes its top-level keys: each action requires its own
// subject keys, may carry its optional ones, and forbids every other, and
// the reader checks all three, so a line is still exactly what the writer
// produces for some valid record.
//
// Adding an action (issue 41's rotated, written by retention before it
// deletes a generation; issue 40's sealed, closing a sealing epoch) needs no new phase and
// no new record_version: append its spelling to actions, its subject keys
// (if new) to subjectKeys, in the order they are written, and to Admin as
// fields, list which keys it requires in subjectKeysOf and which it may
// carry in subjectOptionalOf, and write the subject's encoding
// (appendAdmin), its decoding (tokendecode.go's subject) and its rules
// (validateSubject) beside the others. A bounded string of a subject gets
// a path in truncPaths (as subject.identity has). Readers of an older
// version reject the new action's lines as invalid_value (an unknown
// action), never misread them; this version's reader keeps accepting every
// line it accepted before. An optional key added to an existing action
// later (a sealed store's chain value on rotated: subject.chain) is
// likewise refused by an older reader as an unknown key, and the lines
// without it are unchanged.
//
// Admin records are written with the store's ordinary commit path (Append,
// or, for rotated, retention inside the commit), are never paired, and are
// never counted as limited; Scan lists them apart.

// Action is an admin record's action. It is a closed enum: the zero value
// is not an action, and every switch over it names each one.
type Action uint8

// The admin actions.
const (
	// ActionLimitsReset: an operator refilled one identity's buckets
	// (`registrar-otel limits reset`). Its subject names the identity and
	// the verbs and buckets refilled: identity, verbs, buckets.
	ActionLimitsReset Action = iota + 1
	// ActionRotated: retention deleted a rotated generation, and this
	// record, appended and fsynced before the deletion, is what is left
	// of it (rotated.go): the file's name, its size, lines, first and
	// last timestamps and SHA-256, the per (caller identity, verb,
	// result) counts of the invocations it held, the generation that was
	// next, and the rotation number that chains these records. Taken by
	// the daemon itself: caller_identity is DaemonIdentity. Its subject:
	// file, next, rotation, folded, bytes, sha256, lines, and when they
	// have a value first_ts, last_ts, counts, others.
	ActionRotated
	// ActionSealed: a sealed store closed a sealing epoch (seal.go): the
	// record is chained with the epoch's key, which the store then
	// replaces by the next one and erases. Taken by the daemon itself:
	// caller_identity is DaemonIdentity. Its subject: epoch (the epoch it
	// closes), reason (start, rotation, interval or stop) and key_id (the
	// sealing key's identifier, the same for every epoch of one key).
	ActionSealed
)

// NumActions is the number of actions; an action's value is 1 to
// NumActions, so per-action arrays of NumActions+1 are indexed by Action.
const NumActions = int(ActionSealed)

var actions = vocab.NewEnum[Action]("Action", "admin action", []string{
	ActionLimitsReset: "limits_reset",
	ActionRotated:     "rotated",
	ActionSealed:      "sealed",
})

// DaemonIdentity is the caller_identity of an admin record of an action
// the daemon took by itself (rotated, sealed). No transport derives it: a unix
// peer is "unix-peer:uid=N", a certificate "registrar-client:...".
const DaemonIdentity = "registrar-otel:daemon"

// Valid reports whether a is a known action.
func (a Action) Valid() bool { return actions.Valid(a) }

// String returns the on-disk spelling, e.g. "limits_reset" (Action(N) for
// an invalid value).
func (a Action) String() string { return actions.String(a) }

// MarshalText implements encoding.TextMarshaler; an invalid action is an
// error.
func (a Action) MarshalText() ([]byte, error) { return actions.MarshalText(a) }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// spellings of the known actions.
func (a *Action) UnmarshalText(b []byte) error { return actions.UnmarshalText(a, b) }

// ParseAction parses an action's spelling (exact, no case folding).
func ParseAction(s string) (Action, error) { return actions.Parse(s) }

// Admin is an admin record's action and its subject. Which subject fields
// an action uses is fixed by the action (see each Action's doc); the
// others must be left at their zero values. An Admin is a plain value; the
// store never mutates one passed to it.
type Admin struct {
	// Action is required.
	Action Action
	// Identity is the caller identity the action was taken on, as the
	// limiter keys it (limits_reset). Required and non-empty when used;
	// bounded to MaxFieldBytes by the store like caller_identity (path
	// subject.identity).
	Identity string
	// Verbs are the verbs the action covered (limits_reset): at least one,
	// no duplicates. The store writes them in vocab order (mint,
	// deregister) whatever order they are given in.
	Verbs []vocab.Verb
	// Buckets are the buckets the action covered (limits_reset): at least
	// one, no duplicates, written in vocab order (predecision_refusal,
	// admission).
	Buckets []vocab.Bucket

	// The rotated action's subject (see Rotated in rotated.go for each
	// field's rule).
	Rotated
	// The sealed action's subject (see Sealed in seal.go).
	Sealed
}

// The subject's keys in serialization order; a key's index is its order.
const (
	subjIdentity = iota
	subjVerbs
	subjBuckets
	subjFile
	subjNext
	subjRotation
	subjFolded
	subjBytes
	subjSHA256
	subjLines
	subjFirstTS
	subjLastTS
	subjCounts
	subjOthers
	subjChain
	subjEpoch
	subjReason
	subjKeyID
	numSubjectKeys
)

var subjectKeys = [numSubjectKeys]string{
	subjIdentity: "identity", subjVerbs: "verbs", subjBuckets: "buckets",
	subjFile: "file", subjNext: "next", subjRotation: "rotation", subjFolded: "folded", subjBytes: "bytes",
	subjSHA256: "sha256", subjLines: "lines", subjFirstTS: "first_ts", subjLastTS: "last_ts",
	subjCounts: "counts", subjOthers: "others", subjChain: "chain",
	subjEpoch: "epoch", subjReason: "reason", subjKeyID: "key_id",
}

// subjectKeysOf lists, per action, the subject keys it requires, and
// subjectOptionalOf those it may carry (omitted when they have no value,
// never written empty); every other subject key is forbidden on it.
var (
	subjectKeysOf = [NumActions + 1][]int{
		ActionLimitsReset: {subjIdentity, subjVerbs, subjBuckets},
		ActionRotated:     {subjFile, subjNext, subjRotation, subjFolded, subjBytes, subjSHA256, subjLines},
		ActionSealed:      {subjEpoch, subjReason, subjKeyID},
	}
	subjectOptionalOf = [NumActions + 1][]int{
		ActionRotated: {subjFirstTS, subjLastTS, subjCounts, subjOthers, subjChain},
	}
)

// uses reports whether action a's subject requires key k.
func (a Action) uses(k int) bool {
	return a.Valid() && slices.Contains(subjectKeysOf[a], k)
}

// allows reports whether action a's subject may carry key k: a required
// or an optional key.
func (a Action) allows(k int) bool {
	return a.uses(k) || a.Valid() && slices.Contains(subjectOptionalOf[a], k)
}

// set reports which subject fields of a hold a value. A number that may be
// 0 (folded, bytes, lines) holds one whenever a's action requires it: 0
// is then its value, written like any other.
func (a *Admin) set() (s [numSubjectKeys]bool) {
	s[subjIdentity] = a.Identity != ""
	s[subjVerbs] = a.Verbs != nil
	s[subjBuckets] = a.Buckets != nil
	s[subjFile] = a.File != ""
	s[subjNext] = a.Next != ""
	s[subjRotation] = a.Rotation != 0
	s[subjFolded] = a.Folded != 0 || a.Action.uses(subjFolded)
	s[subjBytes] = a.Bytes != 0 || a.Action.uses(subjBytes)
	s[subjSHA256] = a.SHA256 != ""
	s[subjLines] = a.Lines != 0 || a.Action.uses(subjLines)
	s[subjFirstTS] = !a.FirstTS.IsZero()
	s[subjLastTS] = !a.LastTS.IsZero()
	s[subjCounts] = a.Counts != nil
	s[subjOthers] = a.Others != nil
	s[subjChain] = a.Chain != ""
	s[subjEpoch] = a.Epoch != 0 || a.Action.uses(subjEpoch)
	s[subjReason] = a.Reason != 0
	s[subjKeyID] = a.KeyID != ""
	return s
}

// validateAdmin checks the admin phase: no invocation fields, an Admin with
// a known action, and the action's subject.
func (r *Record) validateAdmin(stored bool) error {
	switch {
	case r.RequestID != "":
		return &PhaseError{Phase: r.Phase, Field: "request_id", Problem: "must be absent"}
	case r.Verb != 0:
		return &PhaseError{Phase: r.Phase, Field: "verb", Problem: "must be absent"}
	case r.Requested != nil:
		return &PhaseError{Phase: r.Phase, Field: "requested", Problem: "must be absent"}
	case r.RegistrationID != "":
		return &PhaseError{Phase: r.Phase, Field: "registration_id", Problem: "must be absent"}
	case r.Outcome != nil:
		return &PhaseError{Phase: r.Phase, Field: "outcome", Problem: "must be absent"}
	}
	if err := r.noLimitedFields(); err != nil {
		return err
	}
	a := r.Admin
	if a == nil {
		return &PhaseError{Phase: r.Phase, Field: "action", Missing: true, Problem: "is required"}
	}
	if !a.Action.Valid() {
		return &FieldError{Field: "action", Problem: "is not a known admin action"}
	}
	return r.validateSubject(stored)
}

// validateSubject checks an admin record's subject against its action:
// every key the action uses holds a valid value, no other key is set.
func (r *Record) validateSubject(stored bool) error {
	a := r.Admin
	set := a.set()
	for k := range numSubjectKeys {
		if set[k] && !a.Action.allows(k) {
			return &PhaseError{Phase: r.Phase, Field: "subject." + subjectKeys[k], Problem: "must be absent on a " + a.Action.String() + " record"}
		}
		if !set[k] && a.Action.uses(k) {
			return &PhaseError{Phase: r.Phase, Field: "subject." + subjectKeys[k], Missing: true, Problem: "is required on a " + a.Action.String() + " record"}
		}
	}
	if a.Action.uses(subjIdentity) && stored {
		if err := checkBounded(PathSubjectIdentity, a.Identity); err != nil {
			return err
		}
	}
	if a.Action.uses(subjVerbs) {
		if err := checkList("subject.verbs", a.Verbs, vocab.Verb.Valid, "mint, deregister", stored); err != nil {
			return err
		}
	}
	if a.Action.uses(subjBuckets) {
		if err := checkList("subject.buckets", a.Buckets, vocab.Bucket.Valid, "predecision_refusal, admission", stored); err != nil {
			return err
		}
	}
	switch a.Action {
	case ActionRotated:
		return a.Rotated.validate(stored)
	case ActionSealed:
		return a.Sealed.validate()
	case ActionLimitsReset:
	}
	return nil
}

// checkList checks a subject list: not empty, every value valid, no value
// twice, and, stored (as the writer writes it), in the enum's order.
func checkList[T cmp.Ordered](field string, vs []T, valid func(T) bool, order string, stored bool) error {
	if len(vs) == 0 {
		return &FieldError{Field: field, Problem: "is empty (it names at least one)"}
	}
	for i, v := range vs {
		if !valid(v) {
			return &FieldError{Field: field, Problem: "has a value that is not one of " + order}
		}
		for _, w := range vs[:i] {
			if w == v {
				return &FieldError{Field: field, Problem: "names a value twice"}
			}
		}
		if stored && i > 0 && vs[i-1] > v {
			return &FieldError{Field: field, Problem: "is not in the order " + order}
		}
	}
	return nil
}

// boundedAdmin returns a copy of a with the field bound applied to its
// bounded strings (recorded in c.Truncated) and its lists in vocab order.
func (c *Record) boundedAdmin(a *Admin) *Admin {
	b := *a
	if a.Action.uses(subjIdentity) {
		b.Identity = c.cut(PathSubjectIdentity, a.Identity)
	}
	if a.Verbs != nil {
		b.Verbs = slices.Sorted(slices.Values(a.Verbs))
	}
	if a.Buckets != nil {
		b.Buckets = slices.Sorted(slices.Values(a.Buckets))
	}
	if a.Action == ActionRotated {
		b.Rotated = a.Rotated.bounded()
	}
	return &b
}

// appendAdmin appends an admin record's action and subject keys. a is
// bounded and valid.
func appendAdmin(dst []byte, a *Admin) []byte {
	dst = append(dst, `,"action":"`...)
	dst = append(dst, a.Action.String()...)
	dst = append(dst, `","subject":{`...)
	first := true
	key := func(k int) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, subjectKeys[k]...)
		dst = append(dst, `":`...)
	}
	set := a.set()
	for k := range numSubjectKeys {
		if !a.Action.uses(k) && !(set[k] && a.Action.allows(k)) {
			continue
		}
		key(k)
		switch k {
		case subjIdentity:
			dst = appendString(dst, a.Identity)
		case subjVerbs:
			dst = appendNames(dst, a.Verbs)
		case subjBuckets:
			dst = appendNames(dst, a.Buckets)
		case subjEpoch, subjReason, subjKeyID:
			dst = a.Sealed.appendKey(dst, k)
		default:
			dst = a.Rotated.appendKey(dst, k)
		}
	}
	return append(dst, '}')
}

// appendNames appends a JSON array of enum spellings (which need no
// escaping).
func appendNames[T interface{ String() string }](dst []byte, vs []T) []byte {
	dst = append(dst, '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, v.String())
	}
	return append(dst, ']')
}
