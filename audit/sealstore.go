package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// The store's side of sealing (seal.go): the chain state the write-path
// holder owns, the chaining of every line in writeSync, the epoch's end,
// the recovery of the chain at Open, and the head it publishes.

// sealer is a sealed store's chain state. The write-path holder (the
// commit leader, Open, Close) owns it.
type sealer struct {
	file  *SealKey // the key file; its key is the current epoch's
	mk    macKey   // the current key's pads
	next  [SealKeyBytes]byte
	nmk   macKey // the next key's pads, while a seal is being written
	mac   *macer
	prev  chainValue // the last line's chain value
	epoch uint64     // the current epoch: the next line's key is its
	// lineEpoch is the epoch of the last line written (epoch, or the one
	// before right after a seal).
	lineEpoch  uint64
	lines      uint64    // lines in the active file
	epochStart time.Time // when the current epoch began
	due        SealReason
	keyStale   bool // the key file still holds an earlier epoch's key
	out        []byte
}

// chainStep is what chaining one buffer changes, applied once the buffer
// is durable.
type chainStep struct {
	prev      chainValue
	lines     uint64
	sealed    bool
	lineEpoch uint64
}

// SealHead is the chain's head: where the last line written is, and its
// chain value. The daemon logs it on the tick where it changed (the
// journal keeps it out of the daemon's reach); `audit verify --heads`
// checks the store against those lines.
type SealHead struct {
	// Generation is the number of the file holding the line: the active
	// file's is the one it will have once rotated (the last generation's
	// plus one).
	Generation int
	// Line is the line's number in that file, from 1.
	Line uint64
	// Epoch is the epoch whose key chained the line.
	Epoch uint64
	// Chain is the line's chain value, 32 lowercase hex digits.
	Chain string
	// KeyID is the sealing key's identifier.
	KeyID string
}

// sealState is what the store publishes for readers without the write
// path: the head, and the seal figures of Stats.
type sealState struct {
	head     SealHead
	epoch    uint64    // the current epoch
	lastSeal time.Time // the last sealed record's ts (zero before one)
	started  time.Time // when the current epoch began
}

// chainOverhead is what the store adds to each line it writes: a chain
// value when sealed.
func (s *Store) chainOverhead() uint64 {
	if s.seal == nil {
		return 0
	}
	return uint64(ChainSuffixBytes)
}

// lineCost is the bytes line takes in the file.
func (s *Store) lineCost(line []byte) uint64 { return uint64(len(line)) + s.chainOverhead() }

// sealPending is the bytes a seal due before the next write may take.
func (s *Store) sealPending() uint64 {
	if s.seal == nil || s.seal.due == 0 {
		return 0
	}
	return maxSealLineBytes
}

// sealIfOverdue makes a seal due when the epoch has lasted SealInterval:
// checked before every write, so an epoch never outlasts it by more than
// the time to the next write or tick.
func (s *Store) sealIfOverdue() {
	if sl := s.seal; sl != nil && sl.due == 0 && !s.now().Before(sl.epochStart.Add(SealInterval)) {
		sl.due = SealReasonInterval
	}
}

// chainBuf returns buf's lines chained, after a sealed record first if one
// is due, and the step to apply once they are durable.
func (s *Store) chainBuf(buf []byte) ([]byte, chainStep, error) {
	sl := s.seal
	st := chainStep{prev: sl.prev, lineEpoch: sl.lineEpoch}
	out := sl.out[:0]
	mk := &sl.mk
	if sl.due != 0 {
		line, err := Marshal(sealRecord(s.now(), sl.epoch, sl.due, sl.file.id))
		if err != nil {
			return nil, st, err
		}
		st.prev = sl.mac.chain(mk, &st.prev, line, nil)
		out = appendChained(out, line, &st.prev)
		st.lines++
		st.sealed, st.lineEpoch = true, sl.epoch
		sl.mac.nextKey(mk, &sl.next)
		sl.nmk.set(&sl.next)
		mk = &sl.nmk
	}
	for len(buf) > 0 {
		n := bytes.IndexByte(buf, '\n') + 1
		if n == 0 {
			n = len(buf) // unreachable: Marshal'd lines end in '\n'
		}
		line := buf[:n]
		buf = buf[n:]
		st.prev = sl.mac.chain(mk, &st.prev, line, nil)
		out = appendChained(out, line, &st.prev)
		st.lines++
		st.lineEpoch = sl.epoch
		if st.sealed {
			st.lineEpoch = sl.epoch + 1
		}
	}
	sl.out = out
	return out, st, nil
}

// abortChain drops a step whose write failed: nothing of it is on disk.
func (s *Store) abortChain(st chainStep) {
	if st.sealed {
		clear(s.seal.next[:])
		s.seal.nmk.clear()
	}
}

// applyChain makes a durable step the store's state; a seal in it ends the
// epoch: the next key replaces the current one, in memory and in the key
// file.
func (s *Store) applyChain(st chainStep) {
	sl := s.seal
	sl.prev, sl.lineEpoch = st.prev, st.lineEpoch
	sl.lines += st.lines
	pub := *s.sealPub.Load()
	if st.sealed {
		now := s.now()
		sl.mk = sl.nmk
		sl.nmk.clear()
		sl.epoch++
		sl.epochStart, sl.due = now, 0
		pub.lastSeal, pub.started, pub.epoch = now, now, sl.epoch
		s.storeKey()
	}
	pub.head = SealHead{Generation: s.activeGeneration(), Line: sl.lines, Epoch: sl.lineEpoch, Chain: sl.prev.hexString(), KeyID: sl.file.id}
	s.sealPub.Store(&pub)
}

// storeKey writes the current epoch's key (sl.next) to the key file and
// overwrites the previous key in memory. A failure is logged and retried
// on the tick (SealTick): the key file then still holds an earlier
// epoch's key, which a restart derives forward from.
func (s *Store) storeKey() {
	sl := s.seal
	err := sl.file.store(sl.epoch, &sl.next)
	if err == nil {
		clear(sl.next[:])
		sl.keyStale = false
		s.keyStale.Store(false)
		return
	}
	// Keep the new key in sl.file's memory (it is the current one), not
	// on disk.
	sl.file.key, sl.file.epoch = sl.next, sl.epoch
	clear(sl.next[:])
	sl.keyStale = true
	s.keyStale.Store(true)
	s.keyFailures.Add(1)
	s.errLog.Log(context.Background(), "seal key file", slog.LevelError,
		"audit sealing: writing the evolved key failed; the key file still holds an earlier epoch's key (retried on the tick)",
		slog.Uint64("epoch", sl.epoch), slog.Any("error", err))
}

// activeGeneration is the number the active file will have once rotated.
func (s *Store) activeGeneration() int {
	if s.lastSeq+1 > maxSequence {
		return 0
	}
	return s.lastSeq + 1
}

// sealRequest is a queued request to end the epoch now (SealTick, Close).
func (s *Store) sealNow(reason SealReason) error {
	sl := s.seal
	if sl == nil {
		return nil
	}
	if sl.keyStale {
		s.storeKeyAgain()
	}
	switch {
	case reason == SealReasonInterval:
		// The tick's request: a seal only if the epoch has lasted
		// SealInterval (by the store's clock), else it came to retry the
		// key file alone.
		s.sealIfOverdue()
		if sl.due == 0 {
			return nil
		}
	case sl.due == 0:
		sl.due = reason
	}
	if err := s.ensureActive(); err != nil {
		return err
	}
	if s.broken != nil {
		return s.broken
	}
	if s.size+s.sealPending() > s.maxFile {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	return s.writeSync(nil)
}

// storeKeyAgain retries writing the key file.
func (s *Store) storeKeyAgain() {
	sl := s.seal
	if err := sl.file.store(sl.file.epoch, &sl.file.key); err != nil {
		s.keyFailures.Add(1)
		s.errLog.Log(context.Background(), "seal key file", slog.LevelError,
			"audit sealing: writing the evolved key failed again", slog.Uint64("epoch", sl.epoch), slog.Any("error", err))
		return
	}
	sl.keyStale = false
	s.keyStale.Store(false)
}

// SealTick ends the sealing epoch when it has lasted SealInterval, and
// retries a key file write that failed (without sealing for it), in order
// with the appends queued before it. The daemon tick calls it; on a store that is not sealed it
// does nothing. After Close it returns ErrClosed. Safe for concurrent
// use.
func (s *Store) SealTick(now time.Time) error {
	p := s.sealPub.Load()
	if p == nil {
		return nil
	}
	if now.Before(p.started.Add(SealInterval)) && !s.keyStale.Load() || s.chainedWithoutKey {
		return nil
	}
	return s.enqueue(entry{seal: SealReasonInterval})
}

// SealHead returns the chain's head, and false when the store is not
// sealed or has written no chained line since Open. Safe for concurrent
// use; it takes no lock.
func (s *Store) SealHead() (SealHead, bool) {
	p := s.sealPub.Load()
	if p == nil || p.head.Chain == "" {
		return SealHead{}, false
	}
	return p.head, true
}

// SealStats are the sealing figures of StoreStats.
type SealStats struct {
	// Sealed reports that the store seals its lines (a key file was
	// given).
	Sealed bool
	// Chained reports that the store holds a chain: Sealed, or a store
	// that was sealed and was opened without its key (its lines are no
	// longer chained: `audit verify` reports them).
	Chained bool
	// Epoch is the current epoch (0 until the first seal of a new key).
	Epoch uint64
	// LastSeal is the ts of the last sealed record, written since Open or
	// found in the store at Open; zero if none.
	LastSeal time.Time
	// KeyFileFailures counts the writes of an evolved key to the key file
	// that failed, since Open.
	KeyFileFailures uint64
}

// openSeal installs the sealer at Open: it reads the chain's end from the
// store (the active file, else the newest generation), reconciles the key
// file's epoch with the store's last seal, and makes a start seal due
// (written by Open before it returns, or by the first write). key nil: the
// store is not sealed, but one found chained is reported.
func (s *Store) openSeal(key *SealKey, gens []string) error {
	tail, err := s.readChainTail(gens)
	if err != nil {
		return err
	}
	if key == nil {
		if tail.chained {
			s.chainedWithoutKey = true
			s.log.LogAttrs(context.Background(), slog.LevelError,
				"audit store holds a sealed chain but no sealing key was given: records are written unsealed from now on, and audit verify reports them",
				slog.String("key_file", SealKeyFileName))
			s.sealPub.Store(&sealState{lastSeal: tail.sealTS, epoch: tail.sealEpoch})
		}
		return nil
	}
	sl := &sealer{file: key, mac: newMacer(), lines: tail.activeLines}
	sl.mk.set(&key.key)
	sl.epoch = key.epoch
	ctx := context.Background()
	switch {
	case !tail.chained:
		if key.epoch > 0 {
			s.log.LogAttrs(ctx, slog.LevelError,
				"audit store holds no sealed line although the sealing key is past its first epoch: the store's sealed records were removed; a new chain starts",
				slog.Uint64("epoch", key.epoch))
		}
	case tail.seal && tail.sealKeyID != key.id:
		s.log.LogAttrs(ctx, slog.LevelWarn,
			"audit store's chain was sealed with another key; a new chain starts with this one (verify each part with its own key)",
			slog.String("store_key_id", tail.sealKeyID), slog.String("key_id", key.id))
	default:
		sl.prev = tail.prev
		if tail.seal && tail.sealEpoch >= key.epoch && s.catchUp(sl, &tail) {
			// The last seal is durable and the key file lags it (a crash
			// after the seal and before the key file's write, or writes of
			// the key file that failed): the key was derived forward to
			// the seal's epoch, the seal verifies with it, and the next
			// key is the current one now.
			if err := key.store(sl.epoch, &sl.next); err != nil {
				clear(sl.next[:])
				return err
			}
			clear(sl.next[:])
		} else if tail.seal && tail.sealEpoch+1 != key.epoch {
			s.log.LogAttrs(ctx, slog.LevelError,
				"audit sealing key's epoch does not follow the store's last seal: seals were removed from the store, or the key file replaced; the chain goes on with the key file's epoch and audit verify reports the break",
				slog.Uint64("key_epoch", key.epoch), slog.Uint64("store_last_seal_epoch", tail.sealEpoch))
		}
	}
	sl.lineEpoch = sl.epoch
	sl.epochStart = s.now()
	sl.due = SealReasonStart
	s.seal = sl
	s.sealPub.Store(&sealState{epoch: sl.epoch, lastSeal: tail.sealTS, started: sl.epochStart})
	return nil
}

// maxKeyLag bounds how many epochs Open derives the key file's key
// forward to meet the store's last seal: one for a crash between a seal
// and the key file's write, more when those writes failed for a while (a
// seal every SealInterval: 2^16 epochs are more than a year of them).
const maxKeyLag = 1 << 16

// catchUp derives the key file's key (sl.mk, epoch sl.epoch) forward to
// the epoch of the store's last seal and checks that seal with it: the
// seal is the key's own, not one planted. If it is, sl is at the epoch
// after it, sl.next holds that epoch's key and sl.mk its state; if not,
// sl is left as it was.
func (s *Store) catchUp(sl *sealer, tail *chainTail) bool {
	if tail.sealLine == nil || tail.sealEpoch-sl.epoch > maxKeyLag {
		return false
	}
	head, c, ok := splitChained(tail.sealLine)
	if !ok {
		return false
	}
	var k [SealKeyBytes]byte
	m := sl.mk
	defer func() { clear(k[:]); m.clear() }()
	for e := sl.epoch; e < tail.sealEpoch; e++ {
		sl.mac.nextKey(&m, &k)
		m.set(&k)
	}
	if sl.mac.chain(&m, &tail.sealPrev, head, unchainedTail) != c {
		return false
	}
	sl.mac.nextKey(&m, &sl.next)
	sl.mk.set(&sl.next)
	sl.epoch = tail.sealEpoch + 1
	return true
}

// chainTail is what Open reads of the chain's end.
type chainTail struct {
	activeLines uint64     // lines in the active file
	chained     bool       // a chained line was found
	prev        chainValue // the last chained line's value
	seal        bool       // a sealed record was found (in the file of prev)
	sealEpoch   uint64
	sealKeyID   string
	sealTS      time.Time
	sealLine    []byte     // the last sealed record's line
	sealPrev    chainValue // the chain value before it
}

// readChainTail reads the active file, and if it holds no chained line the
// newest generation, for the last chained line and the last sealed record.
func (s *Store) readChainTail(gens []string) (chainTail, error) {
	var t chainTail
	n, err := t.read(filepath.Join(s.dir, ActiveFileName))
	if err != nil {
		return t, err
	}
	t.activeLines = n
	if !t.chained && len(gens) > 0 {
		if _, err := t.read(filepath.Join(s.dir, gens[len(gens)-1])); err != nil {
			return t, err
		}
	}
	return t, nil
}

// read reads one file's lines, noting the chained ones, and returns how
// many lines it holds.
func (t *chainTail) read(path string) (uint64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, MaxRecordBytes)
	var lines uint64
	var last chainValue
	for {
		chunk, err := br.ReadSlice('\n')
		long := false
		for errors.Is(err, bufio.ErrBufferFull) {
			long = true // longer than any record: not one
			_, err = br.ReadSlice('\n')
		}
		if long || len(chunk) > 0 {
			lines++
		}
		if _, c, ok := splitChained(chunk); ok && !long {
			if bytes.HasPrefix(chunk, adminPrefix) && bytes.Contains(chunk, sealedMarker) {
				if r, derr := Unmarshal(chunk); derr == nil && r.Admin.Action == ActionSealed {
					t.seal, t.sealEpoch, t.sealKeyID, t.sealTS = true, r.Admin.Epoch, r.Admin.KeyID, r.TS
					t.sealLine = append(t.sealLine[:0], chunk...)
					t.sealPrev = last
				}
			}
			t.chained, t.prev, last = true, c, c
		}
		if err == io.EOF {
			return lines, nil
		}
		if err != nil {
			return lines, err
		}
	}
}

var sealedMarker = []byte(`"action":"sealed"`)

// sealAtOpen writes the start seal Open made due; a failure leaves it due
// for the first write (which writes it first) and is logged.
func (s *Store) sealAtOpen() {
	if s.seal == nil || s.seal.due == 0 {
		return
	}
	if err := s.sealNow(SealReasonStart); err != nil {
		s.log.LogAttrs(context.Background(), slog.LevelError,
			"audit sealing: writing the start seal failed; it is written before the next record", slog.Any("error", err))
	}
}

// sealStats is the sealing part of Stats.
func (s *Store) sealStats() SealStats {
	p := s.sealPub.Load()
	if p == nil {
		return SealStats{}
	}
	return SealStats{Sealed: !s.chainedWithoutKey, Chained: true, Epoch: p.epoch, LastSeal: p.lastSeal, KeyFileFailures: s.keyFailures.Load()}
}

// clearKeys overwrites the store's copies of the key at Close.
func (s *Store) clearKeys() {
	if sl := s.seal; sl != nil {
		sl.mk.clear()
		sl.nmk.clear()
		clear(sl.next[:])
		sl.file.clear()
	}
}

// countLines recounts the active file's lines after a reopen.
func (s *Store) countLines() {
	if s.seal == nil {
		return
	}
	var t chainTail
	n, err := t.read(filepath.Join(s.dir, ActiveFileName))
	if err != nil {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "audit sealing: counting the reopened active file's lines failed; the logged heads may be off", slog.Any("error", err))
	}
	s.seal.lines = n
}
