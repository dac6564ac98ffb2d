package coalesce

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// The evidence checkpoint: the coalescer's windows whose counted records
// are not durable yet (Sink.Snapshot: key, start, count — nothing
// of the limiter's buckets), written by the tick to two files in
// registrar.state_dir, so that a SIGKILL, a crash or a power loss loses at
// most one tick of limited invocations per key instead of every open window.
//
// Why two files rewritten in turn, and not a bbolt bucket or a file renamed
// over: a bbolt commit costs two fdatasyncs (pages, then meta) and the db
// is the embedded backend's alone (the OpenBao backend opens none); a
// write-then-rename costs the file's fsync and the directory's. Rewriting
// the older of two files in place (truncate, write, fdatasync) costs one
// fdatasync per tick and needs no directory entry after start, and a write
// torn by a power loss leaves the other file, one tick older, intact: each
// file carries a sequence number and a CRC-32C over all of it, and recovery
// takes the valid file of the highest sequence. Nothing is appended: each
// write replaces its file's whole content.
//
// The files double as the clean-shutdown marker: they are created at
// start (after recovery) and removed, with a directory fsync, after the
// shutdown flush made every window durable. Finding one at start means the
// previous run stopped uncleanly.
//
// Two versions, told apart by the magic, both read: version 1 (RGOCKPT1),
// whose entry is start, count, verb, bucket, identity, and version 2
// (RGOCKPT2), which adds a flags byte (bit 0: a shadow window) and the
// caller policy's name (empty for the default policy) to each entry. The
// writer writes version 1 whenever every window is the default policy's
// and none is a shadow window, so a daemon without caller policies writes
// exactly the files it wrote before them, and an older daemon started on
// them (a downgrade) still recovers them; version 2 only when a window
// needs it. A version-1 file read by this version recovers as the default
// policy's enforced windows, which is all it can hold.
const (
	// CheckpointName is the checkpoint's file name in registrar.state_dir;
	// the two files are CheckpointName+".0" and CheckpointName+".1".
	CheckpointName = "coalesce-checkpoint"

	// MaxCheckpointIdentityBytes is the longest identity an entry holds:
	// the wire's identity bound (wire.MaxIdentityBytes) and the audit
	// store's field bound (audit.MaxFieldBytes), 512. Identities reach the
	// coalescer only through the wire, so none is longer.
	MaxCheckpointIdentityBytes = 512

	// MaxCheckpointPolicyBytes is the longest caller policy name an entry
	// holds: the audit record's bound (audit.MaxPolicyBytes), 64, to which
	// the configuration holds policy names.
	MaxCheckpointPolicyBytes = 64

	// checkpointHeaderBytes: magic, sequence, instant, run start, count.
	checkpointHeaderBytes = 8 + 8 + 8 + 8 + 4
	// checkpointEntryFixed: start, count, verb, bucket, identity length
	// (version 1).
	checkpointEntryFixed = 8 + 8 + 1 + 1 + 2
	// checkpointEntryFixedV2: version 1's, then flags and policy length.
	checkpointEntryFixedV2 = checkpointEntryFixed + 1 + 1
	checkpointCRCBytes     = 4

	// flagShadow marks a shadow window in a version-2 entry's flags.
	flagShadow = 1 << 0

	// MaxCheckpointWindows is the most windows Snapshot reports: the ring,
	// a full hand-off and a batch being written, each at most
	// MaxOpenWindows.
	MaxCheckpointWindows = 3 * MaxOpenWindows

	// MaxCheckpointBytes bounds one checkpoint file: 7,348,264 bytes with
	// every window's identity and policy name at their bounds (12,288
	// version-2 entries of 598 bytes, 40 bytes of header and CRC). A fleet
	// of 1,024 identities of 64 bytes at the 4,096-window cap writes
	// 344,104 bytes on the default policy (84 per window, version 1), and
	// 16 bytes more per window under a 14-byte policy name. Two files: at
	// most twice this on disk.
	MaxCheckpointBytes = checkpointHeaderBytes + MaxCheckpointWindows*(checkpointEntryFixedV2+MaxCheckpointIdentityBytes+MaxCheckpointPolicyBytes) + checkpointCRCBytes
)

var (
	checkpointMagic   = [8]byte{'R', 'G', 'O', 'C', 'K', 'P', 'T', '1'}
	checkpointMagicV2 = [8]byte{'R', 'G', 'O', 'C', 'K', 'P', 'T', '2'}
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// errTornCheckpoint matches every checkpoint file that does not decode: a
// write cut short by a crash or a power loss, or a file damaged since.
var errTornCheckpoint = errors.New("torn or damaged checkpoint")

// Checkpoint is one checkpoint file, decoded (DecodeCheckpoint) or to be
// encoded (AppendCheckpoint).
type Checkpoint struct {
	Seq     uint64
	Instant time.Time // when the snapshot was taken
	Started time.Time // when the run that wrote it started
	Windows []OpenWindow
}

// AppendCheckpoint encodes c after dst: version 1 when every window is the
// default policy's and none is a shadow window, else version 2. An
// identity longer than MaxCheckpointIdentityBytes (unreachable through the
// wire) or a policy name longer than MaxCheckpointPolicyBytes (refused by
// the configuration) is cut.
func AppendCheckpoint(dst []byte, c *Checkpoint) []byte {
	v2 := false
	for i := range c.Windows {
		if w := &c.Windows[i]; w.Shadow || (w.Policy != "" && w.Policy != audit.DefaultPolicy) {
			v2 = true
			break
		}
	}
	start := len(dst)
	if v2 {
		dst = append(dst, checkpointMagicV2[:]...)
	} else {
		dst = append(dst, checkpointMagic[:]...)
	}
	dst = binary.LittleEndian.AppendUint64(dst, c.Seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.Instant.UnixNano()))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.Started.UnixNano()))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(c.Windows)))
	for i := range c.Windows {
		w := &c.Windows[i]
		id := w.Identity
		if len(id) > MaxCheckpointIdentityBytes {
			id = id[:MaxCheckpointIdentityBytes]
		}
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.Start.UnixNano()))
		dst = binary.LittleEndian.AppendUint64(dst, w.Count)
		dst = append(dst, byte(w.Verb), byte(w.Bucket))
		if !v2 {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(id)))
			dst = append(dst, id...)
			continue
		}
		policy := w.Policy
		if policy == audit.DefaultPolicy {
			policy = ""
		}
		if len(policy) > MaxCheckpointPolicyBytes {
			policy = policy[:MaxCheckpointPolicyBytes]
		}
		var flags byte
		if w.Shadow {
			flags |= flagShadow
		}
		dst = append(dst, flags, byte(len(policy)))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(id)))
		dst = append(dst, id...)
		dst = append(dst, policy...)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crc32c))
}

// DecodeCheckpoint decodes one file; every failure matches
// errTornCheckpoint and says what is wrong.
func DecodeCheckpoint(b []byte) (*Checkpoint, error) {
	torn := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errTornCheckpoint}, a...)...)
	}
	if len(b) < checkpointHeaderBytes+checkpointCRCBytes {
		return nil, torn("%d bytes, shorter than a header", len(b))
	}
	if len(b) > MaxCheckpointBytes {
		return nil, torn("%d bytes, over the bound of %d", len(b), MaxCheckpointBytes)
	}
	body, sum := b[:len(b)-checkpointCRCBytes], binary.LittleEndian.Uint32(b[len(b)-checkpointCRCBytes:])
	var v2 bool
	switch [8]byte(body[:8]) {
	case checkpointMagic:
	case checkpointMagicV2:
		v2 = true
	default:
		return nil, torn("bad magic %q", body[:8])
	}
	if got := crc32.Checksum(body, crc32c); got != sum {
		return nil, torn("CRC-32C %08x, the file says %08x", got, sum)
	}
	c := &Checkpoint{
		Seq:     binary.LittleEndian.Uint64(body[8:]),
		Instant: time.Unix(0, int64(binary.LittleEndian.Uint64(body[16:]))),
		Started: time.Unix(0, int64(binary.LittleEndian.Uint64(body[24:]))),
	}
	n := binary.LittleEndian.Uint32(body[32:])
	if n > MaxCheckpointWindows {
		return nil, torn("%d windows, over the bound of %d", n, MaxCheckpointWindows)
	}
	p := body[checkpointHeaderBytes:]
	c.Windows = make([]OpenWindow, 0, n)
	fixed := checkpointEntryFixed
	if v2 {
		fixed = checkpointEntryFixedV2
	}
	for i := range n {
		if len(p) < fixed {
			return nil, torn("window %d cut short", i)
		}
		w := OpenWindow{
			Start:  time.Unix(0, int64(binary.LittleEndian.Uint64(p))),
			Count:  binary.LittleEndian.Uint64(p[8:]),
			Verb:   vocab.Verb(p[16]),
			Bucket: vocab.Bucket(p[17]),
		}
		if !w.Verb.Valid() || !w.Bucket.Valid() || w.Count == 0 {
			return nil, torn("window %d: verb %d, bucket %d, count %d", i, p[16], p[17], w.Count)
		}
		policyLen := 0
		if v2 {
			flags := p[18]
			if flags&^flagShadow != 0 {
				return nil, torn("window %d: unknown flags %#02x", i, flags)
			}
			w.Shadow = flags&flagShadow != 0
			policyLen = int(p[19])
		}
		idLen := int(binary.LittleEndian.Uint16(p[fixed-2:]))
		if idLen > MaxCheckpointIdentityBytes || policyLen > MaxCheckpointPolicyBytes || len(p) < fixed+idLen+policyLen {
			return nil, torn("window %d: identity of %d bytes, policy of %d", i, idLen, policyLen)
		}
		w.Identity = string(p[fixed : fixed+idLen])
		w.Policy = string(p[fixed+idLen : fixed+idLen+policyLen])
		c.Windows = append(c.Windows, w)
		p = p[fixed+idLen+policyLen:]
	}
	if len(p) != 0 {
		return nil, torn("%d bytes after the last window", len(p))
	}
	return c, nil
}

// checkpointFS is where checkpoint files live: the state directory, or a
// test's fault seam. WriteFile replaces a file's content with one
// fdatasync; it is the only write, and the only fsync, of a tick.
type checkpointFS interface {
	// ReadFile returns a file's content, or an error matching
	// fs.ErrNotExist.
	ReadFile(name string) ([]byte, error)
	// WriteFile truncates, writes and fdatasyncs name, creating it 0600.
	WriteFile(name string, data []byte) error
	// Remove removes name; a missing file is not an error.
	Remove(name string) error
	// SyncDir fsyncs the directory, making creations and removals durable.
	SyncDir() error
}

// dirFS is checkpointFS on an open private directory (privdir.Open),
// held open since start: every file is opened relative to it (openIn),
// never by path, and must be a regular file.
type dirFS struct {
	dir *os.File
}

// NotRegularError is a checkpoint file that is not a regular file (a
// FIFO, a device, a directory, a socket): it is refused, not opened for
// reading or writing, so that nothing put at the name can block the tick.
type NotRegularError struct {
	// Name is the file's name in the state directory.
	Name string
	// Mode is its type.
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("coalesce: checkpoint file %s is not a regular file (%s): remove it; the checkpoint is not written until then", e.Name, e.Mode.Type())
}

// regular returns f when it is a regular file; else it closes f and
// returns a *NotRegularError.
func regular(f *os.File, name string) (*os.File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Name: name, Mode: st.Mode()}
	}
	return f, nil
}

func (d dirFS) ReadFile(name string) ([]byte, error) {
	f, err := openIn(d.dir, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxCheckpointBytes+1))
}

func (d dirFS) WriteFile(name string, data []byte) error {
	// O_RDWR, not O_WRONLY: a FIFO opened write-only with no reader fails
	// (ENXIO, which names nothing), read-write it opens at once and is
	// refused as not regular. Not O_TRUNC at open: a file is truncated only
	// once it is known to be regular.
	f, err := openIn(d.dir, name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return replaceContent(f, data)
}

// checkpointFile is what replaceContent needs of an open checkpoint file:
// an *os.File, or a test's file that fails where it is told to.
type checkpointFile interface {
	Truncate(size int64) error
	Write(b []byte) (int, error)
	Sync() error
	Close() error
}

// replaceContent makes data f's whole content and syncs it (f.Sync), then
// closes f; on any failure f is closed and the failure returned.
func replaceContent(f checkpointFile, data []byte) error {
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (d dirFS) Remove(name string) error {
	if err := removeIn(d.dir, name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (d dirFS) SyncDir() error { return d.dir.Sync() }

// Checkpointer writes the checkpoint on the tick. It is used by the tick
// goroutine only (StartCheckpoint before the listeners, Tick on the tick,
// Clear after the shutdown flush); its counters (Writes, Failures) may be
// read from any goroutine.
type Checkpointer struct {
	fs      checkpointFS
	sink    *Sink
	started time.Time
	// now reads the clock at the snapshot; nil means time.Now. The
	// checkpoint's instant is the snapshot's, not the tick's (which may
	// have waited behind the tick's own writes): every count in it was
	// taken before it, and every window in it started before it.
	now func() time.Time

	seq     uint64 // the last sequence written
	gen     uint64 // the sink generation of the last checkpoint written
	wrote   bool   // a checkpoint of this run is on disk
	wins    []OpenWindow
	buf     []byte
	stopped bool // Clear ran: the marker is gone

	writes   atomic.Uint64 // checkpoint files written (one fdatasync each)
	failures atomic.Uint64 // checkpoint writes that failed
	bytes    atomic.Uint64 // size of the last checkpoint written
}

// CheckpointFile is the name, in the state directory, of the file that
// holds the checkpoint of sequence seq: the two files take turns.
func CheckpointFile(seq uint64) string { return fmt.Sprintf("%s.%d", CheckpointName, seq%2) }

// StartCheckpoint starts this run's checkpoint in the state directory dir
// (open, and checked private by the caller, who keeps it open), after
// rec, the recovery of the previous run's: both files are rewritten empty
// (start). The checkpointer is returned even when that fails, so the
// caller can Clear what was written. Until Track names the sink, it has
// nothing to write.
func StartCheckpoint(dir *os.File, rec Recovery, now time.Time) (*Checkpointer, error) {
	c := &Checkpointer{fs: dirFS{dir: dir}, started: now}
	return c, c.start(rec.seq, now)
}

// Track makes s the sink whose windows Tick writes.
func (c *Checkpointer) Track(s *Sink) { c.sink = s }

// Writes returns how many checkpoint files were written (one fdatasync
// each) and Failures how many writes failed, since start.
func (c *Checkpointer) Writes() uint64 { return c.writes.Load() }

// Failures: see Writes.
func (c *Checkpointer) Failures() uint64 { return c.failures.Load() }

// start writes an empty checkpoint to both files with sequences above every
// one recovery saw (after is the highest), clearing what recovery read and
// leaving the marker of a running daemon, then fsyncs the directory.
func (c *Checkpointer) start(after uint64, now time.Time) error {
	c.seq = after
	for range 2 {
		if err := c.write(nil, now); err != nil {
			return err
		}
	}
	c.wrote = false // the sink's first generation is still to be written
	return c.fs.SyncDir()
}

// Tick writes the sink's windows if they changed since the last write: one
// file, one fdatasync, whatever the flood; nothing when nothing changed.
// It returns the write's error as is: the caller names the directory.
// The tick's instant is not used: the checkpoint is stamped with the
// snapshot's (see now).
func (c *Checkpointer) Tick(_ context.Context, _ time.Time) error {
	var now time.Time
	if c.stopped {
		return nil
	}
	if c.wrote && c.sink.Generation() == c.gen {
		return nil
	}
	var gen uint64
	if c.now != nil {
		now = c.now()
	} else {
		now = time.Now()
	}
	c.wins, gen = c.sink.Snapshot(c.wins[:0])
	if err := c.write(c.wins, now); err != nil {
		c.failures.Add(1)
		return err
	}
	c.gen, c.wrote = gen, true
	return nil
}

func (c *Checkpointer) write(wins []OpenWindow, now time.Time) error {
	c.seq++
	cp := Checkpoint{Seq: c.seq, Instant: now, Started: c.started, Windows: wins}
	c.buf = AppendCheckpoint(c.buf[:0], &cp)
	if err := c.fs.WriteFile(CheckpointFile(c.seq), c.buf); err != nil {
		return err
	}
	c.writes.Add(1)
	c.bytes.Store(uint64(len(c.buf)))
	return nil
}

// Clear removes both files after the shutdown flush (the clean-shutdown
// marker) and fsyncs the directory.
func (c *Checkpointer) Clear() error {
	c.stopped = true
	return errors.Join(c.fs.Remove(CheckpointFile(0)), c.fs.Remove(CheckpointFile(1)), c.fs.SyncDir())
}
