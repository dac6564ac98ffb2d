package audit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"slices"
)

// Test seams: fault injection and a small file cap, reachable only from
// this package's tests. Production code has no skip or fault mode.

// File is the write-path file interface, for test doubles.
type File = file

// TestHooks configures openWithHooks.
type TestHooks struct {
	WrapFile     func(File) File
	Rename       func(oldpath, newpath string) error
	Remove       func(name string) error
	MinFileBytes uint64
}

// OpenWithHooks opens a store with test seams installed.
func OpenWithHooks(opts Options, th TestHooks) (*Store, error) {
	return open(opts, hooks{wrapFile: th.WrapFile, rename: th.Rename, remove: th.Remove, minFileBytes: th.MinFileBytes})
}

// Size returns the store's notion of the active file's size.
func (s *Store) Size() uint64 {
	var size uint64
	s.group.Idle(func() { size = s.size })
	return size
}

// Encode serializes an already bounded, valid record without re-applying
// the bound (the reader's canonical form).
func Encode(r *Record) []byte { return appendRecord(nil, r) }

// ScanAsEUID is Scan judging ownership as if run by uid.
func ScanAsEUID(ctx context.Context, opts ScanOptions, uid int) (*Report, error) {
	return scan(ctx, opts, func(sc *scanner) { sc.euid = func() int { return uid } })
}

// SetStatfs replaces the probe's statfs (free bytes of the file system
// holding a path), for tests of the arithmetic at chosen sizes.
func SetStatfs(p *CapacityProbe, f func(path string) (uint64, error)) { p.statfs = f }

// IdentityCheck runs the write path's identity comparison alone (two lstat
// calls), for its benchmark; no append may run meanwhile.
func (s *Store) IdentityCheck() (changed bool, err error) {
	_, changed, err = s.identityChanged()
	return changed, err
}

// The scan's per-line decoding and per-request state as they were before
// the single-pass decoder (issue 13): the token decoder on every line and a
// map entry for every request_id ever seen. Kept as the reference the new
// scan must agree with (TestScanAgreesWithReference) and as the peer of
// BenchmarkScanMillionLines.

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
	case PhaseLimited:
		sc.policy(r)
		sc.noteLate(name, lineNo, r)
	case PhaseAdmin:
		sc.admin(name, lineNo, r)
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
	sc.finishPolicies()
}

// UnmarshalTokens exports the token decoder to the external tests.
var UnmarshalTokens = unmarshalTokens

// DecodeCanonical reports whether the single pass takes line, and its
// record if so.
func DecodeCanonical(line []byte) *Record {
	var ld lineDecoder
	return ld.canonical(line)
}

// TallyFile is retention's reading of a generation it is about to delete,
// for its benchmark.
func TallyFile(path string) (Rotated, error) { return tallyFile(path) }

// VerifyFile runs Verify's read of the one store file dir/name and returns
// the problems it found: the read's own faults (a file replaced after the
// listing) cannot be staged through Verify.
func VerifyFile(ctx context.Context, dir, name string) ([]VerifyProblem, error) {
	v := &verifier{rep: &VerifyReport{Dir: dir}, dir: dir, present: map[string]bool{}, order: map[string]int{}}
	err := v.file(ctx, name)
	return v.problems, err
}

// WithChain returns line (as Marshal writes it) with chain as its chain
// value, as a sealed store writes it.
func WithChain(line []byte, chain string) []byte {
	var c chainValue
	if _, err := hex.Decode(c[:], []byte(chain)); err != nil {
		panic(err)
	}
	return appendChained(nil, line, &c)
}

// DeriveKeys returns the keys of epochs 0 to n-1 from the verification
// key k0.
func DeriveKeys(k0 [SealKeyBytes]byte, n int) [][SealKeyBytes]byte {
	x := newMacer()
	var m macKey
	out := [][SealKeyBytes]byte{k0}
	for len(out) < n {
		m.set(&out[len(out)-1])
		var next [SealKeyBytes]byte
		x.nextKey(&m, &next)
		out = append(out, next)
	}
	return out
}

// ReadSealKeyFile decodes a sealing key file's bytes: what an intruder
// who reads it holds.
func ReadSealKeyFile(b []byte) (epoch uint64, key [SealKeyBytes]byte) {
	k, problem := decodeSealKey(b)
	if problem != "" {
		panic(problem)
	}
	return k.epoch, k.key
}

// Rechain returns line (chained or not) chained after prev (32 hex digits,
// or "" for a chain's first line) under key, and its chain value: a line
// as an intruder holding key would forge it.
func Rechain(key [SealKeyBytes]byte, prev string, line []byte) ([]byte, string) {
	var p chainValue
	if prev != "" {
		if _, err := hex.Decode(p[:], []byte(prev)); err != nil {
			panic(err)
		}
	}
	u := line
	if head, _, ok := splitChained(line); ok {
		u = append(bytes.Clone(head), unchainedTail...)
	}
	var m macKey
	m.set(&key)
	c := newMacer().chain(&m, &p, u, nil)
	return appendChained(nil, u, &c), c.hexString()
}

// ChainOf returns a chained line's chain value ("" for another line).
func ChainOf(line []byte) string {
	if _, c, ok := splitChained(line); ok {
		return c.hexString()
	}
	return ""
}

// SetMaxCrossAnswers lowers ScanStores's bound for a test and restores it
// at the test's end.
func SetMaxCrossAnswers(t interface{ Cleanup(func()) }, n int) {
	old := maxCrossAnswers
	maxCrossAnswers = n
	t.Cleanup(func() { maxCrossAnswers = old })
}
