package audit

// The scan's per-line decoding and per-request state as they were before
// the single-pass decoder (issue 13): the token decoder on every line and a
// map entry for every request_id ever seen. Kept as the reference the new
// scan must agree with (TestScanAgreesWithReference) and as the peer of
// BenchmarkScanMillionLines.

import (
	"cmp"
	"context"
	"slices"
)

type refReqState struct {
	intents, outcomes uint32
	first             UnpairedIntent
	order             uint64
}

type refScanState struct {
	sc   *scanner
	reqs map[string]*refReqState
}

// ScanTokens is Scan with the token decoder on every line and the scan's
// own per-request state: the scan as it would be without the single pass.
func ScanTokens(ctx context.Context, opts ScanOptions) (*Report, error) {
	return scan(ctx, opts, func(sc *scanner) { sc.decode = unmarshalTokens })
}

// ScanReference is Scan with the reference per-line decoding and state.
func ScanReference(ctx context.Context, opts ScanOptions) (*Report, error) {
	return scan(ctx, opts, func(sc *scanner) {
		st := &refScanState{sc: sc, reqs: make(map[string]*refReqState)}
		sc.refLine, sc.refFinish, sc.decode = st.line, st.finish, unmarshalTokens
	})
}

func (rs *refScanState) line(name string, lineNo uint64, chunk []byte) {
	sc := rs.sc
	r := sc.counted(name, lineNo, chunk)
	if r == nil {
		return
	}
	switch r.Phase {
	case PhaseIntent:
		st := rs.req(r.RequestID)
		st.intents++
		if st.intents == 1 {
			st.first = UnpairedIntent{File: name, Line: lineNo, RequestID: r.RequestID, TS: r.TS}
			st.order = sc.order
		} else {
			sc.malformed(name, lineNo, RuleDuplicateRequestID, "second intent for request_id "+r.RequestID)
		}
	case PhaseOutcome:
		st := rs.req(r.RequestID)
		st.outcomes++
		if st.outcomes > 1 {
			sc.malformed(name, lineNo, RuleDuplicateRequestID, "second outcome for request_id "+r.RequestID)
		}
	}
}

func (rs *refScanState) req(id string) *refReqState {
	st, ok := rs.reqs[id]
	if !ok {
		st = &refReqState{}
		rs.reqs[id] = st
	}
	return st
}

func (rs *refScanState) finish() {
	sc := rs.sc
	var unpaired []*refReqState
	for _, st := range rs.reqs {
		if st.intents > 0 && st.outcomes == 0 && st.first.TS.Before(sc.settled) {
			sc.rep.IntentWithoutOutcome++
			unpaired = append(unpaired, st)
		}
	}
	slices.SortFunc(unpaired, func(a, b *refReqState) int { return cmp.Compare(a.order, b.order) })
	for _, st := range unpaired[:min(len(unpaired), MaxReportedLines)] {
		sc.rep.Unpaired = append(sc.rep.Unpaired, st.first)
	}
}

// UnmarshalTokens exports the token decoder to the external tests.
var UnmarshalTokens = unmarshalTokens

// DecodeCanonical reports whether the single pass takes line, and its
// record if so.
func DecodeCanonical(line []byte) *Record {
	var ld lineDecoder
	return ld.canonical(line)
}
