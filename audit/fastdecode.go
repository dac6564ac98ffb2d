package audit

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// The single-pass decoder. The store writes exactly one spelling of each
// record (appendRecord): no white space, keys in order, no escapes in most
// lines. decodeCanonical reads that spelling in one pass over the line's
// bytes, with no tokenizer and no reflection, and hands every value to the
// same checks as the token decoder (checkPresence, validate, and the
// byte-for-byte canonical comparison). It answers only "this is the
// record" or "not mine": a line it does not take (an escape, a truncated
// object, any deviation, any broken rule) goes to the token decoder, which
// names the rule exactly as it always has. So the rules and the findings
// are one set, and the cost of the common line is a fraction of a
// tokenizer's (TestGoldenDecodeVerdicts and FuzzDecodeAgreesWithTokens
// keep the verdicts one set).
//
// The figure that justifies writing it by hand: the peer is encoding/json,
// whose Decoder.Token tokenizer the token decoder (tokendecode.go) is built on,
// as the scan used it on every line before this decoder (ScanReference in
// export_test.go, which also keeps every request id: the figures are of
// the whole scan, decoder and per-request state together).
// BenchmarkScanMillionLines scans a 1,000,001-line, 255 MB store in a
// child process with each and reports lines/s and peak RSS:
//
//   - commit b3e2c40, one contended pass: 14.5x the reference's lines/s,
//     peak RSS 11 MiB against 204 MiB;
//   - docs/en/audit.md#scan-speed (commit 93772df), medians of three
//     interleaved passes: 577,000 against 61,000 lines/s (per-pass
//     8.0x, 9.9x and 10.7x), 10.4 MiB against 185 MiB;
//   - re-run for issue 23 (one pass, -benchtime=1x, on a shared 2-core
//     machine): 381,776 against 23,999 lines/s (15.9x), 20.6 MiB against
//     190.2 MiB.
//
// Those figures are of the decoder and the per-request state changed
// together. Measured on its own for issue 34 (the scan's state the same
// on both sides), twelve interleaved rounds on a shared, loaded 2-core
// machine, medians of the per-round ratios (spread in brackets):
//
//   - BenchmarkScanDecoder (fastdecode_test.go's mix, a 10,000-line store
//     scanned in process, -short -benchtime=3x): the scan reads 6.4x the
//     lines/s with the single pass than with the token decoder on every
//     line (3.0x to 24x), 102,900 against 17,200 lines/s, and allocates
//     12x less (3.5 MB against 43.6 MB a scan). Above the 2x that keeps a
//     hand-written decoder, so it stays.
//   - BenchmarkDecodeLine (the store's own lines, all three phases, the
//     flood mix, -benchtime=20000x): per line, 4.6x the token decoder
//     (2.0x to 14x; 2 allocations against 162), and 1.3x json.Unmarshal
//     into tagged fields (0.7x to 3.9x; 2 allocations against 15), which
//     checks none of the reader's rules (key order, presence, canonical
//     spelling) and so could not replace either decoder.
//
// Re-measure with go test -run '^$' -bench 'ScanMillionLines|ScanDecoder|DecodeLine'
// ./audit/ (repeated, so the decoders interleave; make bench interleaves
// passes) before changing either decoder.

// lineDecoder decodes lines into storage it reuses; it is not safe for
// concurrent use. Strings of a decoded record are slices of one copy of
// the line, so a record costs one allocation, and the record stays valid
// until the next decode.
type lineDecoder struct {
	rec Record
	req Requested
	out Outcome
	enc []byte // the canonical re-encoding, reused
}

// decode is Unmarshal with reused storage: the returned record is valid
// until the next call. A line the single pass does not take is decoded by
// the token decoder (a fresh record, or its error).
func (ld *lineDecoder) decode(line []byte) (*Record, error) {
	if r := ld.canonical(line); r != nil {
		return r, nil
	}
	return unmarshalTokens(line)
}

// canonical returns the record of a line in the store's exact spelling
// that breaks no rule, or nil.
func (ld *lineDecoder) canonical(line []byte) *Record {
	if len(line) > MaxRecordBytes {
		return nil
	}
	body := line
	if n := len(body); n > 0 && body[n-1] == '\n' {
		body = body[:n-1]
	}
	// Strings without escapes are taken as their bytes, so the line must
	// be valid UTF-8 and free of backslashes (any escape: not mine).
	if bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) {
		return nil
	}
	ld.rec, ld.req, ld.out = Record{}, Requested{}, Outcome{}
	p := canonicalParser{s: string(body)}
	present, ok := p.record(&ld.rec, &ld.req, &ld.out)
	if !ok {
		return nil
	}
	r := &ld.rec
	if checkPresence(r, present) != nil || r.validate(true) != nil {
		return nil
	}
	ld.enc = appendRecord(ld.enc[:0], r)
	if !bytes.Equal(ld.enc[:len(ld.enc)-1], body) {
		return nil
	}
	return r
}

// canonicalParser reads the writer's spelling; every method reports false
// at the first byte that is not it.
type canonicalParser struct {
	s string
	i int
}

func (p *canonicalParser) lit(l string) bool {
	if strings.HasPrefix(p.s[p.i:], l) {
		p.i += len(l)
		return true
	}
	return false
}

// str reads a string without escapes (the line has no backslash).
func (p *canonicalParser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	j := strings.IndexByte(p.s[p.i:], '"')
	if j < 0 {
		return "", false
	}
	s := p.s[p.i : p.i+j]
	p.i += j + 1
	return s, true
}

// uint reads a decimal without sign, fraction, exponent or leading zero.
func (p *canonicalParser) uint() (uint64, bool) {
	start := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	d := p.s[start:p.i]
	if d == "" || len(d) > 1 && d[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(d, 10, 64)
	return n, err == nil
}

// key reads `"name":` (after a ',' unless first) and returns the index of
// name in names at or after from, or -1.
func (p *canonicalParser) key(names []string, from int, first bool) int {
	if !first && !p.lit(",") {
		return -1
	}
	name, ok := p.str()
	if !ok || !p.lit(":") {
		return -1
	}
	for i := from; i < len(names); i++ {
		if names[i] == name {
			return i
		}
	}
	return -1
}

func (p *canonicalParser) record(r *Record, q *Requested, o *Outcome) (present [numKeys]bool, ok bool) {
	if !p.lit("{") {
		return present, false
	}
	next := 0
	for first := true; ; first = false {
		if p.lit("}") {
			return present, !first && p.i == len(p.s)
		}
		k := p.key(topKeys[:], next, first)
		if k < 0 || k == keyTruncated || k == keyAction || k == keySubject {
			// A truncated record, or an admin one (rare, and its subject
			// has arrays): the token decoder's.
			return present, false
		}
		present[k], next = true, k+1
		if !p.topValue(r, q, o, k) {
			return present, false
		}
	}
}

func (p *canonicalParser) topValue(r *Record, q *Requested, o *Outcome, k int) bool {
	var (
		s   string
		ok  bool
		err error
	)
	switch k {
	case keyRecordVersion:
		return p.lit("1")
	case keyCount:
		r.Count, ok = p.uint()
		return ok
	case keyCallerSubuid:
		var v uint64
		v, ok = p.uint()
		r.CallerSubuid = uint32(min(v, MaxCallerSubuid))
		return ok && v >= 1 && v <= MaxCallerSubuid
	case keyShadow:
		r.Shadow = p.lit("true")
		return r.Shadow
	case keyRequested:
		r.Requested = q
		return p.requested(q)
	case keyOutcome:
		r.Outcome = o
		return p.outcome(o)
	}
	if s, ok = p.str(); !ok {
		return false
	}
	switch k {
	case keyPhase:
		r.Phase, err = ParsePhase(s)
	case keyTS:
		r.TS, err = parseTime(s)
	case keyRequestID:
		r.RequestID, ok = s, s != ""
	case keyVerb:
		r.Verb, err = vocab.ParseVerb(s)
	case keyCallerIdentity:
		r.CallerIdentity = s
	case keyRegistrationID:
		r.RegistrationID, ok = s, s != ""
	case keyLimitedBucket:
		r.LimitedBucket, err = vocab.ParseBucket(s)
	case keyPolicy:
		r.Policy, ok = s, s != ""
	case keyWindowStart:
		r.WindowStart, err = parseTime(s)
	case keyWindowEnd:
		r.WindowEnd, err = parseTime(s)
	case keyChain:
		r.Chain, ok = s, s != ""
	}
	return ok && err == nil
}

func (p *canonicalParser) requested(q *Requested) bool {
	if !p.lit("{") {
		return false
	}
	next := 0
	var seen [numRequestedKeys]bool
	for first := true; ; first = false {
		if p.lit("}") {
			return seen[reqServiceName] && seen[reqHost]
		}
		k := p.key(requestedKeys[:], next, first)
		if k < 0 {
			return false
		}
		seen[k], next = true, k+1
		var ok bool
		switch k {
		case reqServiceName:
			q.ServiceName, ok = p.str()
		case reqHost:
			q.Host, ok = p.str()
		case reqInstance:
			var v uint64
			v, ok = p.uint()
			ok = ok && v >= 1 && v <= MaxInstance
			q.Instance = uint32(min(v, MaxInstance))
		case reqReload:
			q.Reload, ok = p.str()
			ok = ok && q.Reload != ""
		}
		if !ok {
			return false
		}
	}
}

func (p *canonicalParser) outcome(o *Outcome) bool {
	if !p.lit("{") {
		return false
	}
	next := 0
	seenClass := false
	for first := true; ; first = false {
		if p.lit("}") {
			return seenClass
		}
		k := p.key(outcomeKeys[:], next, first)
		if k < 0 {
			return false
		}
		next = k + 1
		s, ok := p.str()
		if !ok {
			return false
		}
		var err error
		switch k {
		case outClass:
			seenClass = true
			o.Class, err = vocab.ParseOutcomeClass(s)
		case outReason:
			o.Reason, err = vocab.ParseReason(s)
		case outDetail:
			o.Detail, ok = s, s != ""
		}
		if !ok || err != nil {
			return false
		}
	}
}
