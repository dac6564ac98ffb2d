package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// unmarshalTokens is Unmarshal by encoding/json's tokenizer: every rule
// checked in the order the reader has always checked them, and the one
// that names a rejected line's rule.
func unmarshalTokens(line []byte) (*Record, error) {
	if len(line) > MaxRecordBytes {
		return nil, &DecodeError{Rule: RuleOversizedLine}
	}
	body := line
	if n := len(body); n > 0 && body[n-1] == '\n' {
		body = body[:n-1]
	}
	if !utf8.Valid(body) {
		return nil, &DecodeError{Rule: RuleInvalidUTF8}
	}
	d := &decoder{dec: json.NewDecoder(bytes.NewReader(body))}
	d.dec.UseNumber()
	r, present, err := d.record()
	if err != nil {
		return nil, err
	}
	if err := checkPresence(r, present); err != nil {
		return nil, err
	}
	if err := checkSubjectPresence(r, d.subjectSeen); err != nil {
		return nil, err
	}
	if err := r.validate(true); err != nil {
		return nil, fieldDecodeError(err)
	}
	// The canonical check: whitespace, escapes and number spellings are
	// fixed by the writer; a line it would not have produced is not its
	// line.
	if want := appendRecord(make([]byte, 0, len(body)+1), r); !bytes.Equal(want[:len(want)-1], body) {
		return nil, &DecodeError{Rule: RuleNonCanonicalEncoding}
	}
	return r, nil
}

// decoder walks one line's tokens. Every value is checked as it is read;
// the first broken rule ends the walk.
type decoder struct {
	dec *json.Decoder
	// subjectSeen is the subject keys an admin line carried, for
	// checkSubjectPresence.
	subjectSeen [numSubjectKeys]bool
}

// token returns the next token, mapping syntax errors to RuleInvalidJSON.
func (d *decoder) token() (json.Token, error) {
	tok, err := d.dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &DecodeError{Rule: RuleInvalidJSON, Err: err}
	}
	return tok, nil
}

// typeError classifies a token that is not the expected type.
func typeError(field string, tok json.Token) error {
	if tok == nil {
		return &DecodeError{Rule: RuleNullValue, Field: field}
	}
	return &DecodeError{Rule: RuleWrongType, Field: field}
}

// beginObject reads the '{' that opens field's value.
func (d *decoder) beginObject(field string) error {
	tok, err := d.token()
	if err != nil {
		return err
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return typeError(field, tok)
	}
	return nil
}

// nextKey reads the next key of an object whose keys are names (in order).
// It returns the key's index, or -1 at the closing '}'. seen and last track
// duplicates and order.
func (d *decoder) nextKey(parent string, names []string, seen []bool, last *int) (int, error) {
	tok, err := d.token()
	if err != nil {
		return 0, err
	}
	if delim, ok := tok.(json.Delim); ok && delim == '}' {
		return -1, nil
	}
	key, ok := tok.(string)
	if !ok {
		return 0, &DecodeError{Rule: RuleInvalidJSON, Field: parent}
	}
	idx := -1
	for i, n := range names {
		if n == key {
			idx = i
			break
		}
	}
	path := key
	if parent != "" {
		path = parent + "." + key
	}
	switch {
	case idx < 0:
		return 0, &DecodeError{Rule: RuleUnknownKey, Field: quoteBounded(path)}
	case seen[idx]:
		return 0, &DecodeError{Rule: RuleDuplicateKey, Field: path}
	case idx < *last:
		return 0, &DecodeError{Rule: RuleKeyOrder, Field: path}
	}
	seen[idx] = true
	*last = idx
	return idx, nil
}

// str reads a string value.
func (d *decoder) str(field string) (string, error) {
	tok, err := d.token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", typeError(field, tok)
	}
	return s, nil
}

// nonEmpty reads a string value that, being optional or an identifier, is
// never written empty.
func (d *decoder) nonEmpty(field string) (string, error) {
	s, err := d.str(field)
	if err == nil && s == "" {
		err = &DecodeError{Rule: RuleInvalidValue, Field: field, Err: errors.New("is empty (optional keys are omitted, never \"\")")}
	}
	return s, err
}

// uint reads a non-negative integer value.
func (d *decoder) uint(field string) (uint64, error) {
	tok, err := d.token()
	if err != nil {
		return 0, err
	}
	n, ok := tok.(json.Number)
	if !ok {
		return 0, typeError(field, tok)
	}
	v, perr := strconv.ParseUint(string(n), 10, 64)
	if perr != nil {
		return 0, &DecodeError{Rule: RuleInvalidValue, Field: field, Err: errors.New("is not an unsigned 64-bit integer")}
	}
	return v, nil
}

// trueOnly reads a boolean that is written only when true.
func (d *decoder) trueOnly(field string) (bool, error) {
	tok, err := d.token()
	if err != nil {
		return false, err
	}
	b, ok := tok.(bool)
	if !ok {
		return false, typeError(field, tok)
	}
	if !b {
		return false, &DecodeError{Rule: RuleInvalidValue, Field: field, Err: errors.New("is false (written only when true, omitted otherwise)")}
	}
	return true, nil
}

// time reads a timestamp in exactly TimeLayout.
func (d *decoder) time(field string) (time.Time, error) {
	s, err := d.str(field)
	if err != nil {
		return time.Time{}, err
	}
	t, err := parseTime(s)
	if err != nil {
		return time.Time{}, &DecodeError{Rule: RuleNonCanonicalTimestamp, Field: field, Err: err}
	}
	return t, nil
}

// record decodes the top-level object.
func (d *decoder) record() (*Record, [numKeys]bool, error) {
	var present [numKeys]bool
	r := &Record{}
	if err := d.beginObject(""); err != nil {
		var de *DecodeError
		if errors.As(err, &de) && de.Rule != RuleInvalidJSON {
			de.Rule = RuleInvalidJSON // not an object at all
		}
		return nil, present, err
	}
	last := -1
	for {
		k, err := d.nextKey("", topKeys[:], present[:], &last)
		if err != nil {
			return nil, present, err
		}
		if k < 0 {
			break
		}
		if err := d.topValue(r, k); err != nil {
			return nil, present, err
		}
	}
	// Exactly one value per line.
	if tok, err := d.dec.Token(); err != io.EOF {
		_ = tok
		return nil, present, &DecodeError{Rule: RuleInvalidJSON, Err: errors.New("trailing data after the object")}
	}
	return r, present, nil
}

// topValue decodes the value of top-level key k into r.
func (d *decoder) topValue(r *Record, k int) error {
	name := topKeys[k]
	var err error
	switch k {
	case keyRecordVersion:
		var tok json.Token
		if tok, err = d.token(); err != nil {
			return err
		}
		n, ok := tok.(json.Number)
		if !ok {
			return typeError(name, tok)
		}
		if string(n) != "1" {
			return &DecodeError{Rule: RuleWrongVersion, Field: name, Err: errors.New("is not 1")}
		}
	case keyPhase:
		r.Phase, err = enum(d, name, ParsePhase, "")
	case keyTS:
		r.TS, err = d.time(name)
	case keyRequestID:
		r.RequestID, err = d.nonEmpty(name)
	case keyVerb:
		r.Verb, err = enum(d, name, vocab.ParseVerb, "is not mint or deregister")
	case keyCallerIdentity:
		r.CallerIdentity, err = d.str(name)
	case keyCallerSubuid:
		var v uint64
		if v, err = d.uint(name); err == nil {
			if v < 1 || v > MaxCallerSubuid {
				err = &DecodeError{Rule: RuleInvalidValue, Field: name, Err: errors.New("is not 1 to 4294967295")}
			}
			r.CallerSubuid = uint32(min(v, MaxCallerSubuid))
		}
	case keyRequested:
		r.Requested, err = d.requested()
	case keyRegistrationID:
		r.RegistrationID, err = d.nonEmpty(name)
	case keyOutcome:
		r.Outcome, err = d.outcome()
	case keyLimitedBucket:
		r.LimitedBucket, err = enum(d, name, vocab.ParseBucket, "is not predecision_refusal or admission")
	case keyPolicy:
		r.Policy, err = d.nonEmpty(name)
	case keyShadow:
		r.Shadow, err = d.trueOnly(name)
	case keyCount:
		r.Count, err = d.uint(name)
	case keyWindowStart:
		r.WindowStart, err = d.time(name)
	case keyWindowEnd:
		r.WindowEnd, err = d.time(name)
	case keyAction:
		if r.Admin == nil {
			r.Admin = &Admin{}
		}
		r.Admin.Action, err = enum(d, name, ParseAction, "")
	case keySubject:
		if r.Admin == nil {
			r.Admin = &Admin{}
		}
		err = d.subject(r.Admin)
	case keyTruncated:
		r.Truncated, err = d.truncated()
	case keyChain:
		r.Chain, err = d.nonEmpty(name)
	}
	return err
}

// requested decodes the requested object.
func (d *decoder) requested() (*Requested, error) {
	const parent = "requested"
	q := &Requested{}
	var seen [numRequestedKeys]bool
	err := d.object(parent, requestedKeys[:], seen[:], func(k int) (err error) {
		switch k {
		case reqServiceName:
			q.ServiceName, err = d.str("requested.service_name")
		case reqHost:
			q.Host, err = d.str("requested.host")
		case reqInstance:
			var v uint64
			if v, err = d.uint("requested.instance"); err == nil {
				if v < 1 || v > MaxInstance {
					err = &DecodeError{Rule: RuleInvalidValue, Field: "requested.instance", Err: errors.New("is not 1 to 4294967295")}
				}
				q.Instance = uint32(min(v, MaxInstance))
			}
		case reqReload:
			q.Reload, err = d.nonEmpty("requested.reload")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := required(parent, requestedKeys[:reqInstance], seen[:]); err != nil { // instance and reload are optional
		return nil, err
	}
	return q, nil
}

// outcome decodes the outcome object.
func (d *decoder) outcome() (*Outcome, error) {
	const parent = "outcome"
	o := &Outcome{}
	var seen [numOutcomeKeys]bool
	err := d.object(parent, outcomeKeys[:], seen[:], func(k int) (err error) {
		switch k {
		case outClass:
			o.Class, err = enum(d, "outcome.class", vocab.ParseOutcomeClass, "")
		case outReason:
			o.Reason, err = enum(d, "outcome.reason", vocab.ParseReason, "")
		case outDetail:
			o.Detail, err = d.nonEmpty("outcome.detail")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := required(parent, outcomeKeys[:outReason], seen[:]); err != nil { // reason and detail are optional
		return nil, err
	}
	return o, nil
}

// subject decodes an admin record's subject object: every subject key any
// action defines, into a. Which keys the record's action requires is
// checked after the whole line (checkSubjectPresence), its values' rules by
// validate.
func (d *decoder) subject(a *Admin) error {
	const parent = "subject"
	return d.object(parent, subjectKeys[:], d.subjectSeen[:], func(k int) (err error) {
		switch k {
		case subjIdentity:
			a.Identity, err = d.nonEmpty("subject.identity")
		case subjVerbs:
			a.Verbs, err = list(d, "subject.verbs", vocab.ParseVerb)
		case subjBuckets:
			a.Buckets, err = list(d, "subject.buckets", vocab.ParseBucket)
		case subjFile:
			a.File, err = d.nonEmpty("subject.file")
		case subjNext:
			a.Next, err = d.nonEmpty("subject.next")
		case subjRotation:
			a.Rotation, err = d.uint("subject.rotation")
		case subjFolded:
			a.Folded, err = d.uint("subject.folded")
		case subjBytes:
			a.Bytes, err = d.uint("subject.bytes")
		case subjSHA256:
			a.SHA256, err = d.nonEmpty("subject.sha256")
		case subjLines:
			a.Lines, err = d.uint("subject.lines")
		case subjFirstTS:
			a.FirstTS, err = d.time("subject.first_ts")
		case subjLastTS:
			a.LastTS, err = d.time("subject.last_ts")
		case subjCounts:
			a.Counts, err = d.counts("subject.counts", true)
		case subjOthers:
			a.Others, err = d.counts("subject.others", false)
		case subjChain:
			a.Chain, err = d.nonEmpty("subject.chain")
		case subjEpoch:
			a.Epoch, err = d.uint("subject.epoch")
		case subjReason:
			a.Reason, err = enum(d, "subject.reason", ParseSealReason, "")
		case subjKeyID:
			a.KeyID, err = d.nonEmpty("subject.key_id")
		}
		return err
	})
}

// counts reads a rotated record's counts (named: each entry with its
// identity) or others: a non-empty JSON array of objects whose keys are
// countKeys in order, all required (others: without identity). Their
// values' rules are validate's.
func (d *decoder) counts(field string, named bool) ([]InvocationCount, error) {
	tok, err := d.token()
	if err != nil {
		return nil, err
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '[' {
		return nil, typeError(field, tok)
	}
	names := countKeys[:]
	if !named {
		names = countKeys[countVerb:]
	}
	out := []InvocationCount{}
	for {
		if !d.dec.More() {
			if _, err := d.token(); err != nil { // the closing ']'
				return nil, err
			}
			break
		}
		var c InvocationCount
		seen := make([]bool, len(names))
		err := d.object(field, names, seen, func(k int) (err error) {
			switch names[k] {
			case "identity":
				c.Identity, err = d.str(field + ".identity")
			case "verb":
				c.Verb, err = enum(d, field+".verb", vocab.ParseVerb, "is not mint or deregister")
			case "outcome":
				c.Result, err = enum(d, field+".outcome", ParseResult, "is not an outcome class or limited")
			case "invocations":
				c.Invocations, err = d.uint(field + ".invocations")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := required(field, names, seen); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, &DecodeError{Rule: RuleInvalidValue, Field: field, Err: errors.New("is empty (omitted when there is nothing to count)")}
	}
	return out, nil
}

// list reads a non-empty JSON array of enum spellings.
func list[T any](d *decoder, field string, parse func(string) (T, error)) ([]T, error) {
	tok, err := d.token()
	if err != nil {
		return nil, err
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '[' {
		return nil, typeError(field, tok)
	}
	out := []T{}
	for {
		tok, err := d.token()
		if err != nil {
			return nil, err
		}
		if delim, ok := tok.(json.Delim); ok && delim == ']' {
			break
		}
		s, ok := tok.(string)
		if !ok {
			return nil, typeError(field, tok)
		}
		v, err := parse(s)
		if err != nil {
			var unknown *vocab.UnknownError
			if errors.As(err, &unknown) {
				err = fmt.Errorf("audit: unknown %s %s", unknown.Kind, quoteBounded(unknown.Value))
			}
			return nil, &DecodeError{Rule: RuleInvalidValue, Field: field, Err: err}
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, &DecodeError{Rule: RuleInvalidValue, Field: field, Err: errors.New("is empty (it names at least one)")}
	}
	return out, nil
}

// checkSubjectPresence applies an admin record's per-action subject key
// rules: the keys its action requires are there, and no key it neither
// requires nor allows.
func checkSubjectPresence(r *Record, seen [numSubjectKeys]bool) error {
	if r.Phase != PhaseAdmin || r.Admin == nil {
		return nil
	}
	a := r.Admin.Action
	for k := range numSubjectKeys {
		field := "subject." + subjectKeys[k]
		switch {
		case seen[k] && !a.allows(k):
			return &DecodeError{Rule: RulePhaseInconsistency, Field: field, Err: &PhaseError{Phase: r.Phase, Field: field, Problem: "must be absent on a " + a.String() + " record"}}
		case !seen[k] && a.uses(k):
			return &DecodeError{Rule: RuleMissingField, Field: field, Err: &PhaseError{Phase: r.Phase, Field: field, Missing: true, Problem: "is required on a " + a.String() + " record"}}
		}
	}
	return nil
}

// truncated decodes the truncated object.
func (d *decoder) truncated() (map[string]Truncation, error) {
	const parent = "truncated"
	m := make(map[string]Truncation, 1)
	seen := make([]bool, len(truncPaths))
	err := d.object(parent, truncPaths[:], seen, func(k int) error {
		path := truncPaths[k]
		t, err := d.truncation(parent + "." + path)
		if err != nil {
			return err
		}
		m[path] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, &DecodeError{Rule: RuleInvalidValue, Field: parent, Err: errors.New("is empty (written only when a field was cut)")}
	}
	return m, nil
}

// truncation decodes one truncated entry.
func (d *decoder) truncation(parent string) (Truncation, error) {
	var t Truncation
	var seen [numTruncationKeys]bool
	err := d.object(parent, truncationKeys[:], seen[:], func(k int) (err error) {
		switch k {
		case truncFullSHA256:
			t.FullSHA256, err = d.str(parent + ".full_sha256")
		case truncFullBytes:
			t.FullBytes, err = d.uint(parent + ".full_bytes")
		}
		return err
	})
	if err != nil {
		return t, err
	}
	if err := required(parent, truncationKeys[:], seen[:]); err != nil {
		return t, err
	}
	return t, nil
}

// enum reads a string value naming one of an enum's values, as parse
// reads it; a name parse refuses breaks RuleInvalidValue, for parse's
// reason or, when not empty, for why.
func enum[T any](d *decoder, field string, parse func(string) (T, error), why string) (T, error) {
	s, err := d.str(field)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(s)
	if err != nil {
		var unknown *vocab.UnknownError
		switch {
		case why != "":
			err = errors.New(why)
		case errors.As(err, &unknown):
			// The store's own wording, without the list of every spelling.
			err = fmt.Errorf("audit: unknown %s %s", unknown.Kind, quoteBounded(unknown.Value))
		}
		return v, &DecodeError{Rule: RuleInvalidValue, Field: field, Err: err}
	}
	return v, nil
}

// object reads a nested object, field parent, whose keys are names (in
// order): the opening '{', then each member by calling member with its
// key's index, until the closing '}'. seen records the keys read.
func (d *decoder) object(parent string, names []string, seen []bool, member func(k int) error) error {
	if err := d.beginObject(parent); err != nil {
		return err
	}
	last := -1
	for {
		k, err := d.nextKey(parent, names, seen, &last)
		if err != nil {
			return err
		}
		if k < 0 {
			return nil
		}
		if err := member(k); err != nil {
			return err
		}
	}
}

// required reports the first of names (the object parent's required keys,
// the first of its keys) not seen.
func required(parent string, names []string, seen []bool) error {
	for i, k := range names {
		if !seen[i] {
			return &DecodeError{Rule: RuleMissingField, Field: parent + "." + k, Err: errors.New("is required")}
		}
	}
	return nil
}
