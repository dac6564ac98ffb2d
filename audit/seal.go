package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"hash"
	"strconv"
	"time"

	"github.com/registrar-otel/registrar-otel/vocab"
)

// Sealing: a keyed chain over every line, with a key that evolves one way.
//
// A store opened with a sealing key (Options.Seal, the file `registrar-otel
// audit seal init` creates in registrar.state_dir) writes every line with
// one more key, last: "chain", 32 hex digits. A line's chain value is the
// first 16 bytes of HMAC-SHA256(k, c || u), where k is the current epoch's
// key, c the previous line's chain value (16 zero bytes before the first
// line of a chain) and u the line as an unsealed store would write it
// ('\n' included): the line's bytes with its chain value cut out. Every
// line of the store is chained where it is written (writeSync, the one
// write point): the verbs' intents and outcomes, counted records, counted
// records recovered from a crash checkpoint, admin records, retention's
// rotated records, and the seal records themselves. The chain runs on
// across generations: the first line of a new active file continues from
// the last line of the generation before it.
//
// The key evolves one way: k(n+1) = HMAC-SHA256(k(n), "registrar-otel
// audit seal: next epoch"). Before replacing k(n), the store writes a
// sealed record (ActionSealed) chained with k(n) and naming epoch n, the
// reason and the key's identifier; once that line is durable it derives
// k(n+1), writes it to the key file (replacing the old one, whose bytes
// are overwritten) and overwrites k(n) in memory. An epoch ends:
//
//   - when the store opens (reason start): a key that sat on disk while
//     the daemon was stopped can rewrite nothing written before;
//   - when the active file rotates (reason rotation): the seal is the
//     first line of the new active file, so every file of a sealed store
//     opens with one, and the generation just closed is sealed;
//   - at least every SealInterval (reason interval), on the daemon tick
//     (Store.SealTick) and before any write once it is due;
//   - when the store closes (reason stop).
//
// Whoever reads the key file (or the daemon's memory) at epoch n holds
// k(n) and every later key, never an earlier one: the lines of epochs
// before n cannot be rewritten, removed, reordered or added to without
// `audit verify`, which derives every epoch's key from the first one
// (the verification key `seal init` prints once) and the epoch from the
// line's place in the chain, finding it (Verify). The lines of the
// current epoch are not sealed yet: at most SealInterval of them.
//
// What a chain cannot see by itself is its own tail being cut (the last
// lines, or the newest generation, removed): the store therefore exposes
// its head (SealHead: generation, line, epoch, chain value), which the
// daemon logs on every tick where it changed, so that under systemd it
// lands in the journal, which the daemon's uid cannot rewrite; `audit
// verify --heads` checks the store against those lines.
//
// The key's bytes the store holds are overwritten when the key evolves;
// copies the Go runtime may have made (a moved stack) are not reachable
// from the store, but are not erased either: the erasure is of the file
// and of the store's own memory.

// SealInterval is the longest a sealing epoch lasts while the store is
// open: the daemon seals at least this often.
const SealInterval = 15 * time.Minute

// SealKeyBytes is the size of a sealing key.
const SealKeyBytes = 32

// chainBytes is a chain value's size: the first half of an HMAC-SHA256.
const chainBytes = 16

// keyIDBytes is a key identifier's size (KeyID is twice as many hex
// digits).
const keyIDBytes = 8

// The derivation labels. A line's MAC input starts with a chain value
// and then '{', so it never equals either label.
const (
	labelNext  = "registrar-otel audit seal: next epoch"
	labelKeyID = "registrar-otel audit seal: key id"
)

// SealReason is why a sealed record closed its epoch. The zero value is
// not a reason.
type SealReason uint8

// The four reasons.
const (
	// SealReasonStart: the store opened.
	SealReasonStart SealReason = iota + 1
	// SealReasonRotation: the active file rotated; the record is the first
	// line of the new active file.
	SealReasonRotation
	// SealReasonInterval: the epoch reached SealInterval.
	SealReasonInterval
	// SealReasonStop: the store closed.
	SealReasonStop
)

var sealReasons = vocab.NewEnum[SealReason]("SealReason", "seal reason", []string{
	SealReasonStart:    "start",
	SealReasonRotation: "rotation",
	SealReasonInterval: "interval",
	SealReasonStop:     "stop",
})

// Valid reports whether r is one of the four reasons.
func (r SealReason) Valid() bool { return sealReasons.Valid(r) }

// String returns the on-disk spelling: "start", "rotation", "interval" or
// "stop".
func (r SealReason) String() string { return sealReasons.String(r) }

// MarshalText implements encoding.TextMarshaler.
func (r SealReason) MarshalText() ([]byte, error) { return sealReasons.MarshalText(r) }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *SealReason) UnmarshalText(b []byte) error { return sealReasons.UnmarshalText(r, b) }

// ParseSealReason parses a reason's spelling (exact).
func ParseSealReason(s string) (SealReason, error) { return sealReasons.Parse(s) }

// Sealed is a sealed record's subject (Admin embeds it; zero on every
// other action):
//
//	{"record_version":1,"phase":"admin","ts":"2026-12-01T09:15:00.002Z",
//	 "caller_identity":"registrar-otel:daemon","action":"sealed",
//	 "subject":{"epoch":41,"reason":"interval","key_id":"5f0c2a9e11d3b7a4"},
//	 "chain":"…"}
type Sealed struct {
	// Epoch is the epoch the record closes: its key chained the record
	// and every line since the previous seal. 0 for a key's first.
	Epoch uint64
	// Reason is why the epoch closed.
	Reason SealReason
	// KeyID identifies the key (16 lowercase hex digits, from the first
	// key: the same for every epoch of it), so that a verifier given
	// another key says so.
	KeyID string
}

func (s *Sealed) validate() error {
	if !s.Reason.Valid() {
		return &FieldError{Field: "subject.reason", Problem: "is not start, rotation, interval or stop"}
	}
	if !isLowerHex(s.KeyID, 2*keyIDBytes) {
		return &FieldError{Field: "subject.key_id", Problem: "is not 16 lowercase hex digits"}
	}
	return nil
}

// appendKey appends the value of sealed subject key k.
func (s *Sealed) appendKey(dst []byte, k int) []byte {
	switch k {
	case subjEpoch:
		return strconv.AppendUint(dst, s.Epoch, 10)
	case subjReason:
		dst = append(dst, '"')
		dst = append(dst, s.Reason.String()...)
		return append(dst, '"')
	case subjKeyID:
		return appendString(dst, s.KeyID)
	}
	return dst
}

// chainValue is one line's chain value.
type chainValue [chainBytes]byte

// hexString is c in lowercase hex.
func (c *chainValue) hexString() string { return hex.EncodeToString(c[:]) }

// macKey is a key's HMAC state: the SHA-256 states after the inner and
// the outer pad, so that a line's MAC does not hash them again (two of
// the nine SHA-256 blocks of a 300-byte line); clear overwrites them.
// BenchmarkChainLine, a 304-byte outcome line on a shared, loaded 2-core
// machine (SHA-NI): 750 to 1300 ns per line with the pads hashed each
// time, as crypto/hmac does after Reset, 456 to 640 ns with these states
// (and 0 allocations), where the peer, sha256.Sum256 of the same 384
// bytes the inner hash covers, takes 317 to 361 ns.
type macKey struct {
	inner, outer [sha256StateBytes]byte
	n            int // the states' length
}

// sha256StateBytes bounds crypto/sha256's marshalled state (108 bytes).
const sha256StateBytes = 128

func (m *macKey) set(k *[SealKeyBytes]byte) {
	var ipad, opad [sha256.BlockSize]byte
	for i := range ipad {
		ipad[i], opad[i] = 0x36, 0x5c
	}
	for i, b := range k {
		ipad[i] ^= b
		opad[i] ^= b
	}
	h := sha256.New()
	m.n = len(m.state(h, ipad[:], m.inner[:0]))
	m.state(h, opad[:], m.outer[:0])
	h.Reset()
	clear(ipad[:])
	clear(opad[:])
}

// state appends to dst the state of h after pad.
func (m *macKey) state(h hash.Hash, pad, dst []byte) []byte {
	h.Reset()
	h.Write(pad)
	b, err := h.(encoding.BinaryAppender).AppendBinary(dst)
	if err != nil || len(b) > sha256StateBytes {
		panic("audit: crypto/sha256's state does not marshal") // the tests cover it
	}
	return b
}

func (m *macKey) clear() {
	clear(m.inner[:])
	clear(m.outer[:])
}

// macer computes HMAC-SHA256 with a macKey. It is not safe for concurrent
// use. HMAC-SHA256 written out (two SHA-256 passes over the pads) rather
// than crypto/hmac, whose pads live in the hash it returns, out of reach
// when the key evolves: here they are a macKey the store overwrites.
// TestMACIsHMACSHA256 keeps it equal to crypto/hmac.
type macer struct {
	h     hash.Hash
	inner [sha256.Size]byte
	full  [sha256.Size]byte // a chain value's whole MAC: not on the stack, which h.Sum would move to the heap
}

func newMacer() *macer { return &macer{h: sha256.New()} }

// sum sets out to HMAC-SHA256(m; a || b || c) and leaves no key-derived
// state in the hash.
func (x *macer) sum(m *macKey, out *[sha256.Size]byte, a, b, c []byte) {
	h, u := x.h, x.h.(encoding.BinaryUnmarshaler)
	if u.UnmarshalBinary(m.inner[:m.n]) != nil {
		panic("audit: crypto/sha256's state does not unmarshal")
	}
	h.Write(a)
	h.Write(b)
	h.Write(c)
	h.Sum(x.inner[:0])
	if u.UnmarshalBinary(m.outer[:m.n]) != nil {
		panic("audit: crypto/sha256's state does not unmarshal")
	}
	h.Write(x.inner[:])
	h.Sum(out[:0])
	h.Reset()
	clear(x.inner[:])
}

// chain returns the chain value of line u (unchained, '\n' included, or
// its head with tail the rest) after prev.
func (x *macer) chain(m *macKey, prev *chainValue, u, tail []byte) chainValue {
	x.sum(m, &x.full, prev[:], u, tail)
	c := chainValue(x.full[:chainBytes])
	clear(x.full[:])
	return c
}

// nextKey sets next to the key of the epoch after m's.
func (x *macer) nextKey(m *macKey, next *[SealKeyBytes]byte) {
	x.sum(m, next, []byte(labelNext), nil, nil)
}

// keyID is the identifier of the key whose first epoch's key is k0.
func keyID(k0 *[SealKeyBytes]byte) string {
	mac := hmac.New(sha256.New, k0[:])
	mac.Write([]byte(labelKeyID))
	return hex.EncodeToString(mac.Sum(nil)[:keyIDBytes])
}

// chainSuffixHead is what a chained line holds before its chain value.
var chainSuffixHead = []byte(`,"chain":"`)

// appendChained appends u (an unchained line, '\n' included) with its
// chain value c.
func appendChained(dst, u []byte, c *chainValue) []byte {
	dst = append(dst, u[:len(u)-2]...) // without "}\n"
	dst = append(dst, chainSuffixHead...)
	dst = hex.AppendEncode(dst, c[:])
	return append(dst, "\"}\n"...)
}

// splitChained returns, for a line in the chained form (its last key a
// chain value of 32 lowercase hex digits, '\n' included), the line's head
// (the unchained line without its "}\n") and its chain value. ok is false
// for any other line.
func splitChained(line []byte) (head []byte, c chainValue, ok bool) {
	n := len(line)
	if n < ChainSuffixBytes+len("{}\n") || line[n-1] != '\n' || line[n-2] != '}' || line[n-3] != '"' {
		return nil, c, false
	}
	start := n - 3 - ChainHexLen
	if !bytes.Equal(line[start-len(chainSuffixHead):start], chainSuffixHead) {
		return nil, c, false
	}
	digits := line[start : n-3]
	for _, d := range digits {
		if (d < '0' || d > '9') && (d < 'a' || d > 'f') {
			return nil, c, false
		}
	}
	if _, err := hex.Decode(c[:], digits); err != nil {
		return nil, c, false
	}
	return line[:start-len(chainSuffixHead)], c, true
}

// unchainedTail is what follows a chained line's head in its unchained
// form.
var unchainedTail = []byte("}\n")

// sealRecord is the sealed record closing epoch with reason.
func sealRecord(ts time.Time, epoch uint64, reason SealReason, id string) *Record {
	return &Record{Phase: PhaseAdmin, TS: ts, CallerIdentity: DaemonIdentity,
		Admin: &Admin{Action: ActionSealed, Sealed: Sealed{Epoch: epoch, Reason: reason, KeyID: id}}}
}

// maxSealLineBytes bounds a chained sealed record's line, so that a seal
// due is counted before the write that carries it.
var maxSealLineBytes = func() uint64 {
	line, err := Marshal(sealRecord(time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC), ^uint64(0), SealReasonRotation, "0123456789abcdef"))
	if err != nil {
		panic(err) // a constant record: the tests build it too
	}
	return uint64(len(line) + ChainSuffixBytes)
}()
