package audit

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"time"
)

// The sealed store's verification: Verify with a key (VerifyOptions.Key)
// walks the chain over every line, in the order the store wrote them
// (generations oldest first, then the active file), with the key of each
// line's epoch derived from the verification key and the epoch counted
// from the seals before the line, never taken from a line's say-so.
//
// What a verifier must check is what systemd's Forward Secure Sealing
// learnt it had missed:
//
//   - a line chained with a key newer than its epoch's (CVE-2023-31439,
//     systemd #28885): every line is checked with the key of the epoch its
//     place gives it, and a sealed record claiming another epoch is
//     reported (seal_epoch_mismatch); an intruder holding epoch n's key
//     cannot chain a line anywhere before epoch n's first;
//   - epochs that are not continuous (CVE-2023-31438, #28886): each seal
//     ends exactly one epoch, every epoch is sealed (the store seals at
//     least every SealInterval, empty epochs too), so a seal removed or
//     added breaks the chain where it was;
//   - lines that are not sealed where they should be (#15425): a line
//     without a chain value once the chain began (unchained_line), a
//     store that holds no chain at all (not_sealed), and the last lines
//     after the last seal, which the key still on the host could rewrite,
//     are counted and reported apart (UnsealedTail), not as verified.
//
// A chain cannot see its own tail cut: with the heads (VerifyOptions.Heads,
// the daemon's log lines) the line each head names must be there with the
// chain value it had (truncated, head_mismatch, generation_missing).
//
// Retention's deletions are not tampering: the oldest file kept opens
// with a sealed record naming its epoch, and the rotated record of the
// file deleted before it carries that file's last chain value
// (subject.chain), against which the first line is checked.

// The sealing problems.
const (
	// VerifyChainMismatch: a line's chain value does not follow from the
	// line before it: the line was changed, or lines before it were
	// removed or reordered.
	VerifyChainMismatch VerifyProblemKind = "chain_mismatch"
	// VerifyRecordReplayed: a line repeats the line before it.
	VerifyRecordReplayed VerifyProblemKind = "record_replayed"
	// VerifySealMissing: a line is chained with the key of the epoch after
	// its place's: the seal that ended its epoch before it was removed.
	VerifySealMissing VerifyProblemKind = "seal_missing"
	// VerifyUnchainedLine: a line without a chain value after the chain
	// began (written around the store, or stripped of its value), other
	// than a torn write before a restart.
	VerifyUnchainedLine VerifyProblemKind = "unchained_line"
	// VerifySealEpochMismatch: a sealed record names an epoch other than
	// the one its place in the chain gives it.
	VerifySealEpochMismatch VerifyProblemKind = "seal_epoch_mismatch"
	// VerifyOtherKey: sealed records name another key than the one given.
	VerifyOtherKey VerifyProblemKind = "other_key"
	// VerifyChainStart: the chain does not start where a chain may start:
	// its first sealed line is neither the key's first (epoch 0, after
	// nothing) nor the first line of the oldest file kept, checked against
	// the rotated record of the file deleted before it.
	VerifyChainStart VerifyProblemKind = "chain_start_unverified"
	// VerifyNotSealed: a key was given and the store holds no chained
	// line.
	VerifyNotSealed VerifyProblemKind = "not_sealed"
	// VerifyTruncated: a head names a line past the end of its file.
	VerifyTruncated VerifyProblemKind = "truncated"
	// VerifyHeadMismatch: the line a head names has another chain value
	// (or epoch) than the head recorded.
	VerifyHeadMismatch VerifyProblemKind = "head_mismatch"
	// VerifyGenerationMissing: a head names a generation that is not in
	// the store, newer than the oldest kept.
	VerifyGenerationMissing VerifyProblemKind = "generation_missing"
)

// SealVerification is the sealed part of a VerifyReport.
type SealVerification struct {
	// KeyID is the given key's identifier.
	KeyID string
	// ChainStart says where the chain was found to start: "genesis" (the
	// key's first line) or "file:line" (the first line of the oldest file
	// kept, after retention), "" when none was found.
	ChainStart string
	// ChainedLines counts the lines checked in the chain, Seals the sealed
	// records among them, and Epoch is the epoch of the last line.
	ChainedLines, Seals, Epoch uint64
	// LastSeal is the ts of the last sealed record (zero without one).
	LastSeal time.Time
	// UnsealedBefore counts the lines before the chain began (written
	// before the store was sealed), TornLines the torn writes a restart
	// ended, and UnsealedTail the lines after the last seal: chained with
	// the key the host still holds, so not sealed yet.
	UnsealedBefore, TornLines, UnsealedTail uint64
	// HeadsRead counts the heads given, HeadsChecked those checked against
	// a line of the store (the newest of each generation kept).
	HeadsRead, HeadsChecked uint64
	// NewestHead is the newest head given (zero without one).
	NewestHead HeadLine
}

// chainVerifier is Verify's sealed state. It is not safe for concurrent
// use.
type chainVerifier struct {
	v   *verifier
	rep *SealVerification
	id  string
	mac *macer
	k0  [SealKeyBytes]byte
	key [SealKeyBytes]byte // the current epoch's
	mk  macKey
	// nmk is the next epoch's pads (nextMK), for nextEpoch.
	nmk       macKey
	nextEpoch uint64
	haveNext  bool
	epoch     uint64
	started   bool
	// stuck: the chain's start was reported and no seal to resume from
	// has come since.
	stuck        bool
	otherKey     bool // other_key reported
	prev, before chainValue
	havePrev     bool
	firstFile    string
	activeGen    int
	sinceSeal    uint64
	// torn is a line without a chain value not yet judged: a torn write
	// if a start seal or the store's end comes next.
	torn     bool
	tornFile string
	tornLine uint64
	// tornPartial: the torn line is the store's unterminated last line,
	// a write a crash cut short (a restart would end it and seal).
	tornPartial bool
	// first is the first line of the oldest file, when the chain resumed
	// there: checked against the rotated record naming the file as next.
	first *pendingFirst
	heads *headIndex
}

type pendingFirst struct {
	file  string
	head  []byte
	c     chainValue
	mk    macKey
	epoch uint64
	done  bool
	named bool // a rotated record named file as next
}

func newChainVerifier(v *verifier, k0 *[SealKeyBytes]byte, heads *Heads) *chainVerifier {
	cv := &chainVerifier{v: v, rep: &SealVerification{}, mac: newMacer(), k0: *k0, key: *k0}
	cv.id = keyID(k0)
	cv.rep.KeyID = cv.id
	cv.mk.set(&cv.key)
	cv.heads = newHeadIndex(heads)
	if heads != nil {
		cv.rep.HeadsRead, cv.rep.NewestHead = heads.Read, heads.Newest
	}
	return cv
}

// MaxVerifyEpoch bounds the epoch Verify derives a key for: deriving
// costs one HMAC per epoch, from the first. A store sealing every
// SealInterval and rotating every few seconds under a flood stays below it
// for years; a sealed record naming a later epoch is reported, not
// derived to.
const MaxVerifyEpoch = 1 << 28

// setEpoch derives the key of epoch e, from k0 when e is before the
// current epoch (keys are derived forward only). An e past MaxVerifyEpoch
// is refused: false.
func (cv *chainVerifier) setEpoch(e uint64) bool {
	if e > MaxVerifyEpoch {
		return false
	}
	if e < cv.epoch {
		cv.key, cv.epoch = cv.k0, 0
		cv.mk.set(&cv.key)
	}
	for cv.epoch < e {
		cv.mac.nextKey(&cv.mk, &cv.key)
		cv.mk.set(&cv.key)
		cv.epoch++
	}
	return true
}

// genOf is the generation number of a file: its name's, or for the active
// file the one it will have once rotated.
func (cv *chainVerifier) genOf(name string) int {
	if _, seq, ok := parseGeneration(name); ok {
		return seq
	}
	return cv.activeGen
}

// line checks one whole line ('\n' included) of file name.
func (cv *chainVerifier) line(name string, lineNo uint64, chunk []byte) {
	head, c, chained := splitChained(chunk)
	if !chained {
		cv.unchained(name, lineNo, chunk)
		return
	}
	var seal *Record
	if bytes.HasPrefix(chunk, adminPrefix) && bytes.Contains(chunk, sealedMarker) {
		if r, err := Unmarshal(chunk); err == nil && r.Admin.Action == ActionSealed {
			seal = r
		}
	}
	if cv.torn {
		if seal == nil || seal.Admin.Reason != SealReasonStart {
			cv.v.problem(VerifyUnchainedLine, cv.tornFile, cv.tornLine, "is not a record the store wrote (no chain value, and no restart after it): a line written around the store")
		} else {
			cv.rep.TornLines++
		}
		cv.torn = false
	}
	if !cv.started {
		cv.start(name, lineNo, head, c, seal)
		return
	}
	cv.rep.ChainedLines++
	cv.check(name, lineNo, head, c)
	epoch := cv.epoch
	if seal != nil {
		cv.sealed(name, lineNo, seal)
	} else {
		cv.sinceSeal++
	}
	cv.heads.at(cv, name, lineNo, epoch, c)
}

// check verifies one chained line against the chain, reporting and
// resynchronising on a break.
func (cv *chainVerifier) check(name string, lineNo uint64, head []byte, c chainValue) {
	if cv.mac.chain(&cv.mk, &cv.prev, head, unchainedTail) == c {
		cv.advance(c)
		return
	}
	switch {
	case c == cv.prev:
		cv.v.problem(VerifyRecordReplayed, name, lineNo, "repeats the line before it (its chain value is that line's): a record written twice")
		return // the chain goes on from the line before
	case cv.havePrev && cv.mac.chain(&cv.mk, &cv.before, head, unchainedTail) == c:
		// It follows the line before the previous one: the previous line
		// was the one out of place, and is reported already.
	case cv.mac.chain(cv.nextMK(), &cv.prev, head, unchainedTail) == c:
		// Chained with the next epoch's key: the seal between was
		// removed (the line after it is reported already). The chain goes
		// on in that epoch, so one removal is not every line after it.
		cv.v.problem(VerifySealMissing, name, lineNo, fmt.Sprintf(
			"is chained with epoch %d's key where the seals before it make epoch %d: the seal that ended epoch %d was removed", cv.epoch+1, cv.epoch, cv.epoch))
		cv.setEpoch(cv.epoch + 1)
	default:
		cv.v.problem(VerifyChainMismatch, name, lineNo, fmt.Sprintf(
			"its chain value is not the MAC, under epoch %d's key, of the line before it and its own bytes: the line was changed, or lines before it were removed, inserted or reordered", cv.epoch))
	}
	cv.advance(c)
}

// nextMK returns the pads of the key of the epoch after the current one,
// derived once per epoch.
func (cv *chainVerifier) nextMK() *macKey {
	if !cv.haveNext || cv.nextEpoch != cv.epoch+1 {
		var k [SealKeyBytes]byte
		cv.mac.nextKey(&cv.mk, &k)
		cv.nmk.set(&k)
		clear(k[:])
		cv.haveNext, cv.nextEpoch = true, cv.epoch+1
	}
	return &cv.nmk
}

func (cv *chainVerifier) advance(c chainValue) {
	cv.before, cv.prev, cv.havePrev = cv.prev, c, true
}

// sealed ends an epoch at a sealed record.
func (cv *chainVerifier) sealed(name string, lineNo uint64, r *Record) {
	s := r.Admin.Sealed
	cv.rep.Seals++
	cv.rep.LastSeal = r.TS
	cv.sinceSeal = 0
	if s.KeyID != cv.id {
		cv.v.problem(VerifyOtherKey, name, lineNo, "names key "+s.KeyID+", not the given key "+cv.id)
	} else if s.Epoch != cv.epoch {
		cv.v.problem(VerifySealEpochMismatch, name, lineNo, fmt.Sprintf(
			"says it closes epoch %d, but the seals before it make this epoch %d: a seal made with a later key, or seals removed or added", s.Epoch, cv.epoch))
	}
	cv.setEpoch(cv.epoch + 1)
}

// start finds where the chain starts: the key's genesis, or the first
// line of the oldest file kept (a sealed record naming its epoch).
func (cv *chainVerifier) start(name string, lineNo uint64, head []byte, c chainValue, seal *Record) {
	cv.rep.ChainedLines++
	switch {
	case seal == nil:
		if !cv.stuck {
			cv.stuck = true
			cv.v.problem(VerifyChainStart, name, lineNo, "is the first chained line and not a sealed record: the lines before it were removed, or stripped of their chain values")
		}
		return
	case seal.Admin.KeyID != cv.id:
		if !cv.otherKey {
			cv.otherKey = true
			cv.v.problem(VerifyOtherKey, name, lineNo, "is sealed with key "+seal.Admin.KeyID+", not the given key "+cv.id+": verify it with that key")
		}
		return
	}
	e := seal.Admin.Epoch
	if !cv.setEpoch(e) {
		if !cv.stuck {
			cv.stuck = true
			cv.v.problem(VerifySealEpochMismatch, name, lineNo, fmt.Sprintf("names epoch %d, past the %d a store reaches", e, uint64(MaxVerifyEpoch)))
		}
		return
	}
	var zero chainValue
	switch {
	case e == 0 && cv.mac.chain(&cv.mk, &zero, head, unchainedTail) == c:
		cv.rep.ChainStart = "genesis"
	case !cv.stuck && name == cv.firstFile && lineNo == 1:
		cv.rep.ChainStart = fmt.Sprintf("%s:%d", name, lineNo)
		cv.first = &pendingFirst{file: name, head: bytes.Clone(head), c: c, mk: cv.mk, epoch: e}
	default:
		if !cv.stuck {
			cv.v.problem(VerifyChainStart, name, lineNo, fmt.Sprintf(
				"starts the chain at epoch %d, but is neither the key's first line nor the first line of the oldest file: the chain before it was removed", e))
		}
		cv.rep.ChainStart = fmt.Sprintf("%s:%d", name, lineNo)
	}
	cv.started, cv.stuck = true, false
	cv.rep.Seals++
	cv.rep.LastSeal = seal.TS
	cv.prev, cv.havePrev = c, false
	cv.setEpoch(e + 1)
	cv.heads.at(cv, name, lineNo, e, c)
}

// unchained handles a line without a chain value.
func (cv *chainVerifier) unchained(name string, lineNo uint64, chunk []byte) {
	if !cv.started && !cv.stuck {
		cv.rep.UnsealedBefore++
		return
	}
	if _, err := Unmarshal(chunk); err == nil {
		cv.v.problem(VerifyUnchainedLine, name, lineNo, "is a record without a chain value after the store was sealed: written around the store, or its chain value removed")
		return
	}
	// Not a record: a torn write if a restart (or the end) follows.
	if cv.torn {
		cv.v.problem(VerifyUnchainedLine, cv.tornFile, cv.tornLine, "is not a record the store wrote (no chain value, and no restart after it): a line written around the store")
	}
	cv.torn, cv.tornFile, cv.tornLine, cv.tornPartial = true, name, lineNo, false
}

// partial handles a final line without '\n': an append in flight or a
// torn write, the store's end either way if nothing follows.
func (cv *chainVerifier) partial(name string, lineNo uint64) {
	if cv.started {
		if cv.torn { // a line without a chain value before it, and no restart
			cv.v.problem(VerifyUnchainedLine, cv.tornFile, cv.tornLine, "is not a record the store wrote (no chain value, and no restart after it): a line written around the store")
		}
		cv.torn, cv.tornFile, cv.tornLine, cv.tornPartial = true, name, lineNo, true
	}
}

// rotated checks the first line of the oldest file against the rotated
// record of the file deleted before it.
func (cv *chainVerifier) rotated(name string, lineNo uint64, s *Rotated) {
	f := cv.first
	if f == nil || f.done || s.Next != f.file {
		return
	}
	f.named = true
	if s.Chain == "" {
		return
	}
	f.done = true
	var prev chainValue
	if n, err := hex.Decode(prev[:], []byte(s.Chain)); err != nil || n != chainBytes {
		return
	}
	if cv.mac.chain(&f.mk, &prev, f.head, unchainedTail) != f.c {
		cv.v.problem(VerifyChainMismatch, f.file, 1, fmt.Sprintf(
			"does not continue from the chain value %s recorded for %s by the rotated record at %s:%d: the file's first lines were removed, or the file is not the one retention left", s.Chain, s.File, name, lineNo))
	}
}

// finish runs the checks of the store's end.
func (cv *chainVerifier) finish() {
	if f := cv.first; f != nil && !f.done {
		detail := "starts the chain (the file before it is gone) and no rotated record carries that file's last chain value to check it against: a deletion retention did not record"
		if f.named {
			detail = "starts the chain (the file before it is gone), and the rotated record of that file carries no chain value: the file was deleted before the store was sealed, so this file should hold the key's first line"
		}
		cv.v.problem(VerifyChainStart, f.file, 1, detail)
	}
	if !cv.started && !cv.stuck && !cv.otherKey {
		cv.v.problem(VerifyNotSealed, ActiveFileName, 0, "holds no sealed line: the store was never sealed with this key (registrar-otel audit seal init, then a daemon start), or every chain value was removed")
	}
	switch {
	case cv.torn && cv.tornPartial:
		cv.rep.TornLines++ // the store's unterminated last line: a write cut short
	case cv.torn:
		// Ended by a restart that then wrote no start seal, or written
		// around the store: only the former is a crash, and it is rare
		// enough (the start seal failing) to be looked at.
		cv.v.problem(VerifyUnchainedLine, cv.tornFile, cv.tornLine, "is the store's last line, not a record the store wrote, and no restart sealed after it: a line written around the store (or a torn write whose restart could not seal)")
	}
	cv.rep.UnsealedTail = cv.sinceSeal
	cv.rep.Epoch = cv.epoch
	cv.heads.finish(cv)
	clear(cv.key[:])
	clear(cv.k0[:])
	cv.mk.clear()
	cv.nmk.clear()
}
