package coalesce

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// powerFS is a checkpointFS whose disk is a map, with a fault seam: when
// loseNext is set, the next WriteFile is cut by a power loss (the file
// keeps the first tornAt bytes of the new content, 0 meaning truncated
// empty, or, with keepOld, its old content: the write never reached the
// disk) and returns an error.
type powerFS struct {
	mu       sync.Mutex
	files    map[string][]byte
	writes   int // WriteFile calls that completed (one fdatasync each)
	dirSyncs int
	loseNext bool
	tornAt   int
	keepOld  bool
}

var errPowerLost = errors.New("power lost")

func newPowerFS() *powerFS { return &powerFS{files: map[string][]byte{}} }

func (p *powerFS) ReadFile(name string) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.files[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return bytes.Clone(b), nil
}

func (p *powerFS) WriteFile(name string, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loseNext {
		p.loseNext = false
		if !p.keepOld {
			p.files[name] = bytes.Clone(data[:min(p.tornAt, len(data))])
		}
		return errPowerLost
	}
	p.files[name] = bytes.Clone(data)
	p.writes++
	return nil
}

func (p *powerFS) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.files, name)
	return nil
}

func (p *powerFS) SyncDir() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dirSyncs++
	return nil
}

func (p *powerFS) snapshot() map[string][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.files)
}

var ckptT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a coalescing sink on a manual clock over a real audit store,
// with a checkpointer on a powerFS.
type fixture struct {
	t      *testing.T
	clock  time.Time
	store  *audit.Store
	dir    string
	sink   *Sink
	fs     *powerFS
	ckpt   *Checkpointer
	window time.Duration
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: ckptT0, dir: t.TempDir(), fs: newPowerFS(), window: 10 * time.Second}
	f.openStore()
	var err error
	f.sink, err = New(Options{Store: f.store, Window: f.window, Now: func() time.Time { return f.clock }})
	if err != nil {
		t.Fatal(err)
	}
	f.ckpt = &Checkpointer{fs: f.fs, sink: f.sink, started: ckptT0, now: func() time.Time { return f.clock }}
	if err := f.ckpt.start(0, ckptT0); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) openStore() {
	var err error
	f.store, err = audit.Open(audit.Options{Dir: filepath.Join(f.dir, "audit"), Now: func() time.Time { return f.clock }})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { f.store.Close() })
}

func (f *fixture) limited(id string, n int) {
	for range n {
		f.sink.Limited(context.Background(), limiter.Event{Identity: id, Verb: vocab.Mint, Bucket: vocab.Admission})
	}
}

// tick is the daemon's pass as far as evidence goes: close due windows,
// then checkpoint.
func (f *fixture) tick() error {
	f.sink.Tick(context.Background(), f.clock)
	return f.ckpt.Tick(context.Background(), f.clock)
}

// restart is a start after a crash: a new store on the same directory and
// recovery from what the disk holds.
func (f *fixture) restart() Recovery {
	f.t.Helper()
	f.store.Close()
	f.openStore()
	rec, err := recoverCheckpoint(context.Background(), f.fs, f.store, filepath.Join(f.dir, "audit"), f.window, f.clock)
	if err != nil {
		f.t.Fatalf("recovery refused: %v", err)
	}
	c := &Checkpointer{fs: f.fs, started: f.clock}
	if err := c.start(rec.seq, f.clock); err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// counted is Σ count over the store's limited records, and their number.
func (f *fixture) counted() (sum, records uint64) {
	f.t.Helper()
	recs, err := audit.LimitedSince(context.Background(), filepath.Join(f.dir, "audit"), ckptT0.Add(-time.Hour))
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range recs {
		sum += r.Count
	}
	return sum, uint64(len(recs))
}

func TestACheckpointRoundTripsAndEveryCutIsDetected(t *testing.T) {
	c := Checkpoint{Seq: 7, Instant: ckptT0.Add(time.Second), Started: ckptT0, Windows: []OpenWindow{
		{Identity: "uid:1000", Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 3},
		{Identity: strings.Repeat("é", 256), Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, Start: ckptT0.Add(time.Millisecond), Count: 1 << 40},
	}}
	b := AppendCheckpoint(nil, &c)
	got, err := DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 7 || !got.Instant.Equal(c.Instant) || !got.Started.Equal(ckptT0) || len(got.Windows) != 2 {
		t.Fatalf("got %+v, want %+v", got, c)
	}
	for i := range c.Windows {
		if g, w := got.Windows[i], c.Windows[i]; g.Identity != w.Identity || g.Verb != w.Verb || g.Bucket != w.Bucket || !g.Start.Equal(w.Start) || g.Count != w.Count {
			t.Errorf("window %d: got %+v, want %+v", i, g, w)
		}
	}
	assertEveryCutAndFlipIsTorn(t, b)
}

func TestTheCheckpointBoundIsTheStatedBytes(t *testing.T) {
	if MaxCheckpointBytes != 7_348_264 {
		t.Fatalf("MaxCheckpointBytes %d, the docs say 7,348,264", MaxCheckpointBytes)
	}
	ws := make([]OpenWindow, MaxCheckpointWindows)
	for i := range ws {
		ws[i] = OpenWindow{Identity: strings.Repeat("x", MaxCheckpointIdentityBytes+100), Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 1,
			Policy: strings.Repeat("p", MaxCheckpointPolicyBytes+10), Shadow: i%2 == 0}
	}
	full := AppendCheckpoint(nil, &Checkpoint{Windows: ws})
	if n := len(full); n != MaxCheckpointBytes {
		t.Fatalf("a full checkpoint is %d bytes, want %d", n, MaxCheckpointBytes)
	}
	// At the bound, in bytes and in windows, a checkpoint is read.
	if c, err := DecodeCheckpoint(full); err != nil || len(c.Windows) != MaxCheckpointWindows {
		t.Fatalf("a checkpoint of exactly %d bytes and %d windows: %v, want decoded", MaxCheckpointBytes, MaxCheckpointWindows, err)
	}
	if _, err := DecodeCheckpoint(append(bytes.Clone(full), 0)); !errors.Is(err, errTornCheckpoint) || !strings.Contains(err.Error(), "over the bound") {
		t.Fatalf("one byte over the bound: %v, want a torn checkpoint over the bound", err)
	}
	fleet := make([]OpenWindow, MaxOpenWindows)
	for i := range fleet {
		fleet[i] = OpenWindow{Identity: strings.Repeat("y", 64), Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 1}
	}
	if n := len(AppendCheckpoint(nil, &Checkpoint{Windows: fleet})); n != 344_104 {
		t.Fatalf("a fleet checkpoint is %d bytes, the docs say 344,104", n)
	}
	for i := range fleet {
		fleet[i].Policy = "control-plane1" // 14 bytes
	}
	if n := len(AppendCheckpoint(nil, &Checkpoint{Windows: fleet})); n != 344_104+16*MaxOpenWindows {
		t.Fatalf("a fleet checkpoint under a 14-byte policy is %d bytes, the docs say 16 more per window than 344,104", n)
	}
}

// TestAnOldCheckpointStillRecovers: a checkpoint file written by the
// version before caller policies (testdata/checkpoint_v1.bin, made by its
// AppendCheckpoint) decodes to the default policy's enforced windows and
// is recovered into their counted records; and a checkpoint of such
// windows is still written in that version, byte for byte, so a daemon
// without caller policies (or an older one after a downgrade) reads it.
func TestAnOldCheckpointStillRecovers(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "checkpoint_v1.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(old, []byte("RGOCKPT1")) {
		t.Fatalf("fixture is not a version-1 checkpoint: %q", old[:8])
	}
	c, err := DecodeCheckpoint(old)
	if err != nil {
		t.Fatalf("DecodeCheckpoint(version 1): %v", err)
	}
	at := time.Date(2026, 8, 23, 12, 34, 56, 789_000_000, time.UTC)
	want := []OpenWindow{
		{Identity: "unix-peer:uid=1000", Verb: vocab.Mint, Bucket: vocab.Admission, Start: at.Add(-30 * time.Second), Count: 42},
		{Identity: "registrar-client:uri:spiffe://example.org/agent/h7", Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, Start: at.Add(-10 * time.Second), Count: 3},
	}
	if c.Seq != 7 || !c.Instant.Equal(at) || len(c.Windows) != len(want) {
		t.Fatalf("decoded %+v", c)
	}
	for i, w := range want {
		if g := c.Windows[i]; g.Identity != w.Identity || g.Verb != w.Verb || g.Bucket != w.Bucket || !g.Start.Equal(w.Start) || g.Count != w.Count || g.Policy != "" || g.Shadow {
			t.Errorf("window %d: got %+v, want %+v of the default policy, not shadow", i, g, w)
		}
	}
	if again := AppendCheckpoint(nil, c); !bytes.Equal(again, old) {
		t.Errorf("the default policy's windows are no longer written as version 1:\n got % x\nwant % x", again, old)
	}

	// Recovery from it, as a start after an unclean stop of the old version.
	f := newFixture(t)
	f.fs.files[CheckpointFile(1)] = old
	f.clock = at.Add(time.Minute)
	rec := f.restart()
	if !rec.Unclean || rec.Checkpoint != checkpointOK || rec.Records != 2 || rec.Count != 45 {
		t.Fatalf("recovery %+v, want the two windows (45 invocations) recovered", rec)
	}
	recs, err := audit.LimitedSince(context.Background(), filepath.Join(f.dir, "audit"), at.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Policy != "" || r.Shadow {
			t.Errorf("recovered %+v, want the default policy's enforced record", r)
		}
	}
}

// TestPolicyAndShadowWindowsRoundTripAsVersion2: a window under a caller
// policy or a shadow window makes the file version 2, which round-trips
// both, and every cut and every flipped byte of it is detected.
func TestPolicyAndShadowWindowsRoundTripAsVersion2(t *testing.T) {
	c := Checkpoint{Seq: 9, Instant: ckptT0.Add(time.Second), Started: ckptT0, Windows: []OpenWindow{
		{Identity: "uid:1000", Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 3},
		{Identity: "uid:1000", Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 5, Policy: "agents", Shadow: true},
		{Identity: strings.Repeat("é", 256), Verb: vocab.Deregister, Bucket: vocab.PredecisionRefusal, Start: ckptT0.Add(time.Millisecond), Count: 1 << 40, Policy: strings.Repeat("p", MaxCheckpointPolicyBytes)},
		{Identity: "uid:7", Verb: vocab.Mint, Bucket: vocab.PredecisionRefusal, Start: ckptT0, Count: 1, Shadow: true},
	}}
	b := AppendCheckpoint(nil, &c)
	if !bytes.HasPrefix(b, []byte("RGOCKPT2")) {
		t.Fatalf("magic %q, want RGOCKPT2", b[:8])
	}
	got, err := DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Windows) != len(c.Windows) {
		t.Fatalf("got %d windows, want %d", len(got.Windows), len(c.Windows))
	}
	for i, w := range c.Windows {
		if g := got.Windows[i]; g.Identity != w.Identity || g.Verb != w.Verb || g.Bucket != w.Bucket || !g.Start.Equal(w.Start) || g.Count != w.Count || g.Policy != w.Policy || g.Shadow != w.Shadow {
			t.Errorf("window %d: got %+v, want %+v", i, g, w)
		}
	}
	assertEveryCutAndFlipIsTorn(t, b)
	// A flags byte with an unknown bit, its CRC recomputed: refused, not
	// read as a shadow window.
	d := bytes.Clone(b[:len(b)-checkpointCRCBytes])
	d[checkpointHeaderBytes+18] |= 0x80
	d = binary.LittleEndian.AppendUint32(d, crc32.Checksum(d, crc32c))
	if _, err := DecodeCheckpoint(d); !errors.Is(err, errTornCheckpoint) || !strings.Contains(err.Error(), "flags") {
		t.Fatalf("unknown flag: %v, want a torn checkpoint naming the flags", err)
	}
}

// reseal appends to body the CRC-32C that makes it a file whose damage
// the CRC does not show.
func reseal(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, crc32c))
}

// A file whose CRC matches but whose content does not add up (written by
// something else, or damaged where the CRC cannot tell) is torn, never a
// panic or a window read past the end: shorter than a header, or an
// entry whose identity or policy runs past the end of the file.
func TestACheckpointWhoseCRCMatchesButDoesNotAddUpIsTorn(t *testing.T) {
	v1 := AppendCheckpoint(nil, &Checkpoint{Seq: 1, Windows: []OpenWindow{
		{Identity: "ab", Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 1},
	}})
	v2 := AppendCheckpoint(nil, &Checkpoint{Seq: 1, Windows: []OpenWindow{
		{Identity: "ab", Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 1, Policy: "pol"},
	}})
	if !bytes.HasPrefix(v2, []byte("RGOCKPT2")) {
		t.Fatalf("magic %q, want RGOCKPT2", v2[:8])
	}
	body := func(b []byte) []byte { return bytes.Clone(b[:len(b)-checkpointCRCBytes]) }
	e := checkpointHeaderBytes // the first entry
	idTooLong := body(v1)
	binary.LittleEndian.PutUint16(idTooLong[e+checkpointEntryFixed-2:], 10) // 2 bytes follow
	policyTooLong := body(v2)
	policyTooLong[e+19] = 10 // 3 bytes follow
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"the header without its window count", reseal(body(v1)[:checkpointHeaderBytes-4])},
		{"an identity longer than the bytes left", reseal(idTooLong)},
		{"a policy longer than the bytes left", reseal(policyTooLong)},
	} {
		if _, err := DecodeCheckpoint(tc.b); !errors.Is(err, errTornCheckpoint) {
			t.Errorf("%s: %v, want a torn checkpoint", tc.name, err)
		}
	}
}

// A window whose identity (and policy) are empty round-trips last in the
// file too, where its entry is exactly the fixed part, in both versions.
func TestAWindowWithAnEmptyIdentityRoundTripsLast(t *testing.T) {
	for _, w := range []OpenWindow{
		{Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 2},
		{Verb: vocab.Mint, Bucket: vocab.Admission, Start: ckptT0, Count: 2, Shadow: true},
	} {
		c := Checkpoint{Seq: 3, Windows: []OpenWindow{{Identity: "uid:1", Verb: vocab.Deregister, Bucket: vocab.Admission, Start: ckptT0, Count: 1}, w}}
		got, err := DecodeCheckpoint(AppendCheckpoint(nil, &c))
		if err != nil || len(got.Windows) != 2 {
			t.Fatalf("shadow %v: %v, want two windows", w.Shadow, err)
		}
		if g := got.Windows[1]; g.Identity != "" || g.Policy != "" || g.Shadow != w.Shadow || g.Count != 2 {
			t.Errorf("shadow %v: the last window read as %+v", w.Shadow, g)
		}
	}
}

// TestACrashRecoversShadowWindowsApart: after an unclean stop, a caller's
// shadow window and its enforced window of the same verb and bucket are
// recovered as two records, each with its policy; and a shadow window's
// durable record never stands for the enforced one (the recovery key has
// the shadow mark and the policy).
func TestACrashRecoversShadowWindowsApart(t *testing.T) {
	f := newFixture(t)
	ev := limiter.Event{Identity: "uid:1", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "agents"}
	for range 4 {
		f.sink.Limited(context.Background(), ev)
	}
	sh := ev
	sh.Shadow = true
	for range 9 {
		f.sink.Limited(context.Background(), sh)
	}
	// The same shadow window's record is durable already (a previous
	// recovery wrote it and crashed before clearing, say): only the
	// enforced one may be written again.
	durable := OpenWindow{Identity: "uid:1", Verb: vocab.Mint, Bucket: vocab.Admission, Policy: "agents", Shadow: true, Start: ckptT0, Count: 9}
	f.clock = f.clock.Add(time.Second)
	if err := f.tick(); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Append(context.Background(), durable.Record(f.window, f.clock, f.clock)); err != nil {
		t.Fatal(err)
	}
	f.clock = f.clock.Add(time.Second)
	rec := f.restart()
	if rec.Records != 1 || rec.Count != 4 || rec.Durable != 1 {
		t.Fatalf("recovery %+v, want the enforced window's 4 recovered, the durable shadow one skipped", rec)
	}
	recs, err := audit.LimitedSince(context.Background(), filepath.Join(f.dir, "audit"), ckptT0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var enforced, shadow uint64
	for _, r := range recs {
		if r.Policy != "agents" {
			t.Errorf("record %+v: policy %q, want agents", r, r.Policy)
		}
		if r.Shadow {
			shadow += r.Count
		} else {
			enforced += r.Count
		}
	}
	if enforced != 4 || shadow != 9 || len(recs) != 2 {
		t.Fatalf("store holds %d records, %d enforced and %d shadow; want 2, 4 and 9", len(recs), enforced, shadow)
	}
}

func TestTheTickWritesOneFileOnlyWhenWindowsChanged(t *testing.T) {
	f := newFixture(t)
	base := f.fs.writes
	for range 3 {
		if err := f.tick(); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.fs.writes - base; got != 1 {
		t.Fatalf("three ticks with no window: %d checkpoint writes, want 1 (the first)", got)
	}
	for i := range 5 {
		f.limited("uid:1", 1000)
		f.limited("uid:2", 1)
		f.clock = f.clock.Add(time.Second)
		before := f.fs.writes
		if err := f.tick(); err != nil {
			t.Fatal(err)
		}
		if got := f.fs.writes - before; got != 1 {
			t.Fatalf("tick %d after 1,001 limited calls: %d writes (fdatasyncs), want 1", i, got)
		}
	}
	before := f.fs.writes
	f.tick()
	if f.fs.writes != before {
		t.Fatalf("a tick with nothing changed wrote the checkpoint")
	}
}

func TestDirFSReplacesTheFileAndNeverFollowsASymlink(t *testing.T) {
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cfs := dirFS{dir: d}
	if err := cfs.WriteFile("a", []byte("long content")); err != nil {
		t.Fatal(err)
	}
	if err := cfs.WriteFile("a", []byte("short")); err != nil {
		t.Fatal(err)
	}
	if b, _ := cfs.ReadFile("a"); string(b) != "short" {
		t.Fatalf("rewritten file holds %q, want %q (replaced, never appended)", b, "short")
	}
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep"), 0o600)
	os.Symlink(target, filepath.Join(dir, "link"))
	if err := cfs.WriteFile("link", []byte("x")); err == nil {
		t.Fatal("wrote through a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("symlink target changed to %q", b)
	}
	if err := cfs.Remove("missing"); err != nil {
		t.Fatalf("removing a missing file: %v", err)
	}
}

// dirFS reads a checkpoint file of the bound whole, and one byte more
// of a longer file, so that DecodeCheckpoint says it is over the bound;
// and Remove reports a name it cannot remove (a directory put there),
// where a missing file is no error.
func TestDirFSReadsUpToTheBoundAndReportsWhatItCannotRemove(t *testing.T) {
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cfs := dirFS{dir: d}
	for _, n := range []int{MaxCheckpointBytes, MaxCheckpointBytes + 100} {
		if err := cfs.WriteFile("big", bytes.Repeat([]byte{'x'}, n)); err != nil {
			t.Fatal(err)
		}
		b, err := cfs.ReadFile("big")
		if want := min(n, MaxCheckpointBytes+1); err != nil || len(b) != want {
			t.Fatalf("a file of %d bytes read as %d (%v), want %d", n, len(b), err, want)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := cfs.Remove("sub"); err == nil {
		t.Fatal("removing a directory at a checkpoint's name reported nothing")
	}
}

// faultFile is a checkpointFile that records its calls and fails the
// one named by fail.
type faultFile struct {
	calls []string
	fail  string
	data  []byte
}

var errFault = errors.New("injected fault")

func (f *faultFile) call(name string) error {
	f.calls = append(f.calls, name)
	if name == f.fail {
		return errFault
	}
	return nil
}

func (f *faultFile) Truncate(int64) error { return f.call("truncate") }
func (f *faultFile) Sync() error          { return f.call("sync") }
func (f *faultFile) Close() error         { return f.call("close") }
func (f *faultFile) Write(b []byte) (int, error) {
	if err := f.call("write"); err != nil {
		return 0, err
	}
	f.data = append(f.data, b...)
	return len(b), nil
}

// A checkpoint file's content is replaced in order (truncate, write,
// sync, close), and a failure at any step is returned, stops the steps
// after it but the close, and never passes for a write that is durable.
func TestReplaceContentSyncsBeforeClosingAndReturnsEveryFailure(t *testing.T) {
	for _, tc := range []struct {
		fail  string
		calls string
	}{
		{"", "truncate write sync close"},
		{"truncate", "truncate close"},
		{"write", "truncate write close"},
		{"sync", "truncate write sync close"},
		{"close", "truncate write sync close"},
	} {
		f := &faultFile{fail: tc.fail}
		err := replaceContent(f, []byte("content"))
		if got := strings.Join(f.calls, " "); got != tc.calls {
			t.Errorf("failing %q: calls %q, want %q", tc.fail, got, tc.calls)
		}
		if (tc.fail == "") != (err == nil) || (tc.fail != "" && !errors.Is(err, errFault)) {
			t.Errorf("failing %q: %v", tc.fail, err)
		}
		if tc.fail == "" && string(f.data) != "content" {
			t.Errorf("wrote %q", f.data)
		}
	}
}

// fillToTheCap opens MaxOpenWindows windows, window i counting i%7+1.
func (f *fixture) fillToTheCap() (sum uint64) {
	for i := range MaxOpenWindows {
		f.limited(fmt.Sprintf("uid:%d", i), i%7+1)
		sum += uint64(i%7 + 1)
	}
	return sum
}

func TestACrashAroundEarlyFlushesNeverLosesAWindowNorCountsOneTwice(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after the early flushes: checkpoint, then the tick's writes
		Checkpoint, write bool
		wantDurable       uint64
	}{
		{"before the checkpoint sees them", false, false, 0},
		{"checkpointed in the hand-off, not written", true, false, 0},
		{"written, before the next checkpoint", true, true, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			sum := f.fillToTheCap()
			f.clock = f.clock.Add(time.Second)
			if err := f.tick(); err != nil {
				t.Fatal(err)
			}
			// Ten new keys at the cap: the ten oldest windows are flushed
			// early into the hand-off.
			f.clock = f.clock.Add(100 * time.Millisecond)
			f.limited("new:a", 1)
			f.limited("new:b", 1)
			for i := range 8 {
				f.limited(fmt.Sprintf("new:%d", i), 1)
			}
			if st := f.sink.Stats(); st.EarlyFlushes != 10 || st.Pending != 10 {
				t.Fatalf("stats %+v, want 10 early flushes pending", st)
			}
			want := sum // the new windows' 10 are the last tick's
			if tc.Checkpoint {
				if err := f.ckpt.Tick(context.Background(), f.clock); err != nil {
					t.Fatal(err)
				}
				want += 10
			}
			if tc.write {
				f.sink.Tick(context.Background(), f.clock) // drains the hand-off
			}
			f.clock = f.clock.Add(10 * time.Millisecond)
			rec := f.restart()
			got, _ := f.counted()
			if got != want || rec.Durable != tc.wantDurable {
				t.Fatalf("Σ counted %d, %d skipped as durable; want %d, %d (recovery %+v)", got, rec.Durable, want, tc.wantDurable, rec)
			}
		})
	}
}

// blockingStore holds AppendBatch until released, so a test can look at
// the sink while Run is writing.
type blockingStore struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingStore) AppendBatch(_ context.Context, recs []*audit.Record) []error {
	b.entered <- struct{}{}
	<-b.release
	return make([]error, len(recs))
}

func TestASnapshotTakenWhileTheWriterWritesStillHoldsItsBatch(t *testing.T) {
	bs := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	sink, err := New(Options{Store: bs, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sink.Run(ctx); close(done) }()
	for i := range MaxOpenWindows + 1 { // one early flush
		sink.Limited(ctx, limiter.Event{Identity: fmt.Sprintf("uid:%d", i), Verb: vocab.Mint, Bucket: vocab.Admission})
	}
	<-bs.entered // Run took the hand-off and is writing
	ws, gen := sink.Snapshot(nil)
	if len(ws) != MaxOpenWindows+1 || ws[0].Identity != "uid:0" {
		t.Fatalf("snapshot during the write: %d windows, first %q; want %d with the one being written (uid:0) first", len(ws), ws[0].Identity, MaxOpenWindows+1)
	}
	close(bs.release)
	cancel()
	<-done
	ws, gen2 := sink.Snapshot(nil)
	if len(ws) != MaxOpenWindows || gen2 == gen {
		t.Fatalf("after the write: %d windows, generation %d → %d; want %d and a new generation", len(ws), gen, gen2, MaxOpenWindows)
	}
}

// BenchmarkCheckpointTick is the tick's added cost at the window cap: 4,096
// open windows of 64-byte identities (344,104 bytes a checkpoint), one of
// them counting between ticks, so each tick rewrites the checkpoint.
// /disk writes a file of the state directory (the real fdatasync, on
// whatever file system TMPDIR is); /memory writes to the fault seam, which
// is the snapshot and encoding alone. Both report fsyncs per tick.
func BenchmarkCheckpointTick(b *testing.B) {
	for _, where := range []string{"disk", "memory"} {
		b.Run(where, func(b *testing.B) {
			sink := storeSink(b, b.TempDir())
			ids := make([]string, MaxOpenWindows/4)
			for i := range ids {
				ids[i] = fmt.Sprintf("spiffe://fleet.example/host-%04d/%034d", i, i)[:64]
			}
			ctx := context.Background()
			for _, id := range ids {
				for _, v := range []vocab.Verb{vocab.Mint, vocab.Deregister} {
					for _, bk := range []vocab.Bucket{vocab.PredecisionRefusal, vocab.Admission} {
						sink.Limited(ctx, limiter.Event{Identity: id, Verb: v, Bucket: bk})
					}
				}
			}
			if st := sink.Stats(); st.OpenWindows != MaxOpenWindows {
				b.Fatalf("%d open windows, want %d", st.OpenWindows, MaxOpenWindows)
			}
			var cfs checkpointFS = newPowerFS()
			if where == "disk" {
				d, err := os.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				cfs = dirFS{dir: d}
			}
			c := &Checkpointer{fs: cfs, sink: sink, started: time.Now()}
			if err := c.start(0, time.Now()); err != nil {
				b.Fatal(err)
			}
			base := c.writes.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				sink.Limited(ctx, limiter.Event{Identity: ids[0], Verb: vocab.Mint, Bucket: vocab.Admission})
				if err := c.Tick(ctx, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.writes.Load()-base)/float64(b.N), "fsyncs/tick")
			b.ReportMetric(float64(c.bytes.Load()), "bytes/checkpoint")
		})
	}
}

// assertEveryCutAndFlipIsTorn checks that the encoded checkpoint b, cut at
// any length or with any one byte changed, decodes as torn.
func assertEveryCutAndFlipIsTorn(t *testing.T, b []byte) {
	t.Helper()
	for n := range len(b) {
		if _, err := DecodeCheckpoint(b[:n]); !errors.Is(err, errTornCheckpoint) {
			t.Fatalf("cut at %d of %d bytes: %v, want errTornCheckpoint", n, len(b), err)
		}
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x10
		if _, err := DecodeCheckpoint(d); !errors.Is(err, errTornCheckpoint) {
			t.Fatalf("byte %d flipped: %v, want errTornCheckpoint", i, err)
		}
	}
}
