//go:build unix

package audit_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// sealFixture is a sealed store's setting: a state directory holding a
// fresh sealing key, a record directory, a settable clock, and the heads
// the store published, logged as the daemon logs them.
type sealFixture struct {
	t        *testing.T
	dir      string // the record directory
	stateDir string
	vkey     [audit.SealKeyBytes]byte
	clock    *fixedClock
	maxFile  uint64 // 0: the default
	retained uint32
	logs     bytes.Buffer // the head lines
	lastHead audit.SealHead
}

func newSealFixture(t *testing.T) *sealFixture {
	t.Helper()
	root := t.TempDir()
	f := &sealFixture{t: t, dir: filepath.Join(root, "audit"), stateDir: filepath.Join(root, "state"), clock: &fixedClock{t: t0}}
	if err := os.Mkdir(f.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	d := f.state()
	defer d.Close()
	v, id, err := audit.CreateSealKey(d, rand.Reader)
	if err != nil {
		t.Fatalf("CreateSealKey: %v", err)
	}
	if f.vkey, err = audit.ParseVerificationKey(v); err != nil {
		t.Fatal(err)
	}
	if got := audit.KeyID(&f.vkey); got != id {
		t.Fatalf("KeyID of the verification key = %s, CreateSealKey said %s", got, id)
	}
	return f
}

// state opens the state directory.
func (f *sealFixture) state() *os.File {
	f.t.Helper()
	d, err := os.Open(f.stateDir)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// open opens the sealed store (the caller closes it; the state directory
// is closed with the test).
func (f *sealFixture) open() *audit.Store {
	f.t.Helper()
	d := f.state()
	f.t.Cleanup(func() { d.Close() })
	key, err := audit.OpenSealKey(d)
	if err != nil || key == nil {
		f.t.Fatalf("OpenSealKey: %v, %v", key, err)
	}
	s, err := audit.OpenWithHooks(audit.Options{Dir: f.dir, Seal: key, Now: f.clock.Now, MaxFileBytes: f.maxFile, MaxRetainedFiles: f.retained},
		audit.TestHooks{MinFileBytes: 4096})
	if err != nil {
		f.t.Fatalf("Open: %v", err)
	}
	f.head(s)
	return s
}

// head logs the store's head if it changed, as the daemon's tick does.
func (f *sealFixture) head(s *audit.Store) {
	h, ok := s.SealHead()
	if !ok || h == f.lastHead {
		return
	}
	f.lastHead = h
	slog.New(slog.NewTextHandler(&f.logs, nil)).LogAttrs(context.Background(), slog.LevelInfo, audit.HeadMessage, h.HeadAttrs()...)
}

// append writes n records (intents and outcomes, a counted record every
// tenth), logging the head after each.
func (f *sealFixture) append(s *audit.Store, prefix string, n int) {
	f.t.Helper()
	for i := range n {
		var r *audit.Record
		switch {
		case i%5 == 4:
			r = limited(vocab.Admission, uint64(i))
		case i%5%2 == 0:
			r = intent(fmt.Sprintf("%s.%d", prefix, i))
		default:
			r = outcome(fmt.Sprintf("%s.%d", prefix, i-1), audit.Outcome{Class: vocab.ClassFirstMint})
		}
		if err := s.Append(context.Background(), r); err != nil {
			f.t.Fatalf("Append: %v", err)
		}
		f.head(s)
	}
}

// heads reads back the head lines logged.
func (f *sealFixture) heads() *audit.Heads {
	f.t.Helper()
	hs, err := audit.ReadHeads(bytes.NewReader(f.logs.Bytes()))
	if err != nil {
		f.t.Fatalf("ReadHeads: %v", err)
	}
	return hs
}

func (f *sealFixture) verify(heads *audit.Heads) *audit.VerifyReport {
	f.t.Helper()
	rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: f.dir, Key: &f.vkey, Heads: heads})
	if err != nil {
		f.t.Fatalf("Verify: %v", err)
	}
	return rep
}

// mustVerify fails the test on any problem.
func (f *sealFixture) mustVerify(heads *audit.Heads) *audit.VerifyReport {
	f.t.Helper()
	rep := f.verify(heads)
	if !rep.OK() {
		f.t.Fatalf("Verify found %d problems: %+v", rep.ProblemCount, rep.Problems)
	}
	return rep
}

// fileLines returns a file's lines, '\n' included.
func fileLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimSuffix(b, nil), []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

func TestASealedStoreChainsEveryLineAndVerifies(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	f.append(s, "q", 25)
	if err := s.Append(context.Background(), adminReset("unix-peer:uid=0", "unix-peer:uid=1000", []vocab.Verb{vocab.Mint}, []vocab.Bucket{vocab.Admission})); err != nil {
		t.Fatal(err)
	}
	f.head(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ls := fileLines(t, filepath.Join(f.dir, audit.ActiveFileName))
	if len(ls) != 28 {
		t.Fatalf("got %d lines, want 28: a start seal, 26 records, a stop seal", len(ls))
	}
	for i, l := range ls {
		r, err := audit.Unmarshal(l)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !isChain(r.Chain) {
			t.Fatalf("line %d has no chain value: %s", i+1, l)
		}
	}
	for i, want := range map[int]audit.SealReason{0: audit.SealReasonStart, 27: audit.SealReasonStop} {
		r, _ := audit.Unmarshal(ls[i])
		if r.Phase != audit.PhaseAdmin || r.Admin.Action != audit.ActionSealed || r.Admin.Reason != want || r.CallerIdentity != audit.DaemonIdentity {
			t.Errorf("line %d = %s, want a sealed record of reason %s", i+1, ls[i], want)
		}
	}
	rep := f.mustVerify(f.heads())
	sv := rep.Seal
	if sv.ChainStart != "genesis" || sv.ChainedLines != 28 || sv.Seals != 2 || sv.Epoch != 2 || sv.UnsealedTail != 0 || sv.HeadsChecked != 1 {
		t.Errorf("got %+v, want a chain from genesis of 28 lines, 2 seals, epoch 2, no unsealed tail, one head checked", sv)
	}
	// The store's records are what audit scan reads.
	scan, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: f.dir, Now: t0.Add(time.Hour)})
	if err != nil || scan.MalformedRecords != 0 || scan.IntentWithoutOutcome != 0 {
		t.Fatalf("scan of a sealed store: %v, %+v", err, scan)
	}
}

func isChain(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 16 && strings.ToLower(s) == s
}

// TestAStoreWithoutAKeyWritesNoChain: sealing is opt-in; without a key
// the lines are what they always were.
func TestAStoreWithoutAKeyWritesNoChain(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	if err := s.Append(context.Background(), intent("q1")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, _ := os.ReadFile(filepath.Join(dir, audit.ActiveFileName))
	if want := mustMarshal(t, intent("q1")); !bytes.Equal(b, want) {
		t.Fatalf("got %s, want exactly %s", b, want)
	}
	if st := s.Stats().Seal; st.Sealed || st.Chained {
		t.Errorf("Stats().Seal = %+v for a store without a key", st)
	}
}

// TestTheKeyEvolvesOneWayAndTheOldOneIsErased: after each seal the key
// file holds the next epoch's key, derived from the previous, and no
// earlier key's bytes.
func TestTheKeyEvolvesOneWayAndTheOldOneIsErased(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	f.append(s, "q", 4)
	for range 3 {
		f.clock.Set(f.clock.Now().Add(audit.SealInterval))
		if err := s.SealTick(f.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats().Seal
	if !st.Sealed || st.Epoch != 4 || !st.LastSeal.Equal(f.clock.Now()) {
		t.Fatalf("Stats().Seal = %+v, want sealed at epoch 4 (start and three intervals), last sealed now", st)
	}
	b, err := os.ReadFile(filepath.Join(f.stateDir, audit.SealKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	keys := audit.DeriveKeys(f.vkey, 5)
	for e, k := range keys[:4] {
		if bytes.Contains(b, k[:]) {
			t.Errorf("the key file still holds epoch %d's key", e)
		}
	}
	if !bytes.Contains(b, keys[4][:]) {
		t.Errorf("the key file does not hold epoch 4's key, derived from the verification key")
	}
	if entries, _ := os.ReadDir(f.stateDir); len(entries) != 1 {
		t.Errorf("the state directory holds %d entries, want the key file alone", len(entries))
	}
	if fi, _ := os.Stat(filepath.Join(f.stateDir, audit.SealKeyFileName)); fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file's mode is %v, want 0600", fi.Mode().Perm())
	}
	s.Close()
	f.mustVerify(f.heads())
}

// TestAnEpochEndsAtTheIntervalOnTheTickOrTheNextWrite: SealTick seals
// once the epoch has lasted SealInterval, and not before; a write after
// it seals first if the tick did not.
func TestAnEpochEndsAtTheIntervalOnTheTickOrTheNextWrite(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	defer s.Close()
	start := s.Stats().Seal.Epoch
	f.clock.Set(f.clock.Now().Add(audit.SealInterval - time.Millisecond))
	if err := s.SealTick(f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if e := s.Stats().Seal.Epoch; e != start {
		t.Fatalf("sealed before the interval: epoch %d, was %d", e, start)
	}
	f.clock.Set(f.clock.Now().Add(time.Millisecond))
	if err := s.SealTick(f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if e := s.Stats().Seal.Epoch; e != start+1 {
		t.Fatalf("not sealed at the interval: epoch %d, was %d", e, start)
	}
	// No tick: the next write seals first.
	f.clock.Set(f.clock.Now().Add(audit.SealInterval))
	f.append(s, "w", 1)
	if e := s.Stats().Seal.Epoch; e != start+2 {
		t.Fatalf("a write past the interval did not seal first: epoch %d, was %d", e, start)
	}
	ls := fileLines(t, filepath.Join(f.dir, audit.ActiveFileName))
	r, _ := audit.Unmarshal(ls[len(ls)-2])
	if r.Admin == nil || r.Admin.Action != audit.ActionSealed || r.Admin.Reason != audit.SealReasonInterval {
		t.Fatalf("the line before the write is %s, want an interval seal", ls[len(ls)-2])
	}
}

// TestRotationSealsAndRetentionIsNotTampering: every file opens with a
// seal; after retention deleted the oldest generations the chain is
// checked from the first line of the oldest kept, against the rotated
// record of the file before it.
func TestRotationSealsAndRetentionIsNotTampering(t *testing.T) {
	f := newSealFixture(t)
	f.maxFile, f.retained = 4096, 2
	s := f.open()
	f.append(s, "q", 120)
	if st := s.Stats(); st.RotatedRecords == 0 {
		t.Fatalf("no deletion: %+v", st)
	}
	s.Close()
	gens := generationsOf(t, f.dir)
	for _, g := range append(gens, audit.ActiveFileName) {
		r, err := audit.Unmarshal(fileLines(t, filepath.Join(f.dir, g))[0])
		if err != nil || r.Admin == nil || r.Admin.Action != audit.ActionSealed || r.Admin.Reason != audit.SealReasonRotation {
			t.Errorf("%s's first line is %+v (%v), want a rotation seal", g, r, err)
		}
	}
	rep := f.mustVerify(f.heads())
	if rep.Seal.ChainStart != gens[0]+":1" {
		t.Errorf("chain start %q, want the first line of the oldest file kept, %s:1", rep.Seal.ChainStart, gens[0])
	}
	if rep.Seal.HeadsChecked < 3 {
		t.Errorf("%d heads checked, want one per file kept", rep.Seal.HeadsChecked)
	}
}

func generationsOf(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var gens []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "registrar-audit-") {
			gens = append(gens, e.Name())
		}
	}
	return gens
}

// snapshot copies dir to a new directory, as a crash leaves it.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(to, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(to)
	for _, e := range entries {
		os.Chmod(filepath.Join(to, e.Name()), 0o600)
	}
	os.Chmod(to, 0o700)
	return to
}

// TestACrashBetweenTheSealAndTheKeyFileResumes: the seal is durable and
// the key file still holds its epoch's key (the evolved key's write
// failed, then the process died): the next start derives the key forward
// and the chain verifies.
func TestACrashBetweenTheSealAndTheKeyFileResumes(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	f.append(s, "q", 6)
	// The evolved key cannot be written: its temporary name is taken by
	// a directory holding a file.
	tmp := filepath.Join(f.stateDir, audit.SealKeyFileName+".new")
	if err := os.MkdirAll(filepath.Join(tmp, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	f.clock.Set(f.clock.Now().Add(audit.SealInterval))
	if err := s.SealTick(f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats().Seal; st.KeyFileFailures != 1 || st.Epoch != 2 {
		t.Fatalf("Stats().Seal = %+v, want one key file failure at epoch 2", st)
	}
	// The crash: what is on disk now, without the stop seal.
	crashed := snapshot(t, f.dir)
	crashedState := snapshot(t, f.stateDir)
	s.Close()
	os.RemoveAll(filepath.Join(crashedState, filepath.Base(tmp)))
	f.dir, f.stateDir = crashed, crashedState
	s = f.open()
	if st := s.Stats().Seal; st.Epoch != 3 {
		t.Fatalf("after the restart Stats().Seal = %+v, want epoch 3 (derived forward, then the start seal)", st)
	}
	f.append(s, "r", 6)
	s.Close()
	f.mustVerify(nil)
}

// TestATornWriteIsNotTampering: a power loss tore the last write; the
// store ends it at the next start and seals: verify counts a torn line,
// and finds nothing.
func TestATornWriteIsNotTampering(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	f.append(s, "q", 5)
	crashed, crashedState := snapshot(t, f.dir), snapshot(t, f.stateDir)
	s.Close()
	f.stateDir = crashedState
	active := filepath.Join(crashed, audit.ActiveFileName)
	line := audit.WithChain(mustMarshal(t, intent("torn")), strings.Repeat("ab", 16))
	af, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	af.Write(line[:len(line)/2])
	af.Close()
	f.dir = crashed
	// Offline, before the restart: the torn line is the store's end.
	if rep := f.mustVerify(nil); rep.Seal.TornLines != 1 {
		t.Errorf("torn lines %d before the restart, want 1", rep.Seal.TornLines)
	}
	s = f.open()
	f.append(s, "r", 3)
	s.Close()
	if rep := f.mustVerify(f.heads()); rep.Seal.TornLines != 1 {
		t.Errorf("torn lines %d after the restart, want 1", rep.Seal.TornLines)
	}
}

// TestAStoreOpenedWithoutItsKeySaysSo: the key file removed, the store
// still finds its chain, reports it, and verify flags every line written
// since.
func TestAStoreOpenedWithoutItsKeySaysSo(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	f.append(s, "q", 3)
	s.Close()
	u, err := audit.Open(audit.Options{Dir: f.dir, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if st := u.Stats().Seal; !st.Chained || st.Sealed || st.LastSeal.IsZero() {
		t.Errorf("Stats().Seal = %+v, want chained, not sealed, with the last seal's time", st)
	}
	if err := u.Append(context.Background(), intent("unsealed")); err != nil {
		t.Fatal(err)
	}
	u.Close()
	rep := f.verify(nil)
	if rep.OK() || rep.Problems[0].Kind != audit.VerifyUnchainedLine || rep.Problems[0].Line != 6 {
		t.Fatalf("got %+v, want unchained_line at line 6", rep.Problems)
	}
}

func TestSealKeyFileRules(t *testing.T) {
	f := newSealFixture(t)
	d := f.state()
	defer d.Close()
	if _, _, err := audit.CreateSealKey(d, rand.Reader); !errors.Is(err, audit.ErrSealKeyExists) {
		t.Errorf("a second CreateSealKey: %v, want ErrSealKeyExists", err)
	}
	path := filepath.Join(f.stateDir, audit.SealKeyFileName)
	good, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name  string
		setup func()
		want  string
	}{
		{"damaged", func() { b := bytes.Clone(good); b[30] ^= 1; os.WriteFile(path, b, 0o600) }, "fails its CRC-32C"},
		{"short", func() { os.WriteFile(path, good[:20], 0o600) }, "holds 20 bytes"},
		{"readable by others", func() { os.WriteFile(path, good, 0o600); os.Chmod(path, 0o644) }, "has mode 0644"},
		{"a symlink", func() { os.Remove(path); os.WriteFile(path+".real", good, 0o600); os.Symlink(path+".real", path) }, "is a symbolic link"},
		{"a directory", func() { os.Remove(path); os.Mkdir(path, 0o700) }, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			tc.setup()
			_, err := audit.OpenSealKey(d)
			if !errors.Is(err, audit.ErrSealKey) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenSealKey: %v, want an ErrSealKey saying %q", err, tc.want)
			}
			os.Remove(path)
		})
	}
	if k, err := audit.OpenSealKey(d); k != nil || err != nil {
		t.Errorf("without a key file: %v, %v; want nil, nil (sealing off)", k, err)
	}
}

func TestParseVerificationKey(t *testing.T) {
	k := strings.Repeat("0123456789ABCDEF", 4)
	for _, in := range []string{k, strings.ToLower(k), k[:16] + "-" + k[16:32] + " " + k[32:] + "\n"} {
		if _, err := audit.ParseVerificationKey(in); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	for _, in := range []string{"", k[:62], k + "00", strings.Replace(k, "0", "g", 1)} {
		if _, err := audit.ParseVerificationKey(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestReadHeadsReadsEveryFormat(t *testing.T) {
	h := audit.SealHead{Generation: 3, Line: 17, Epoch: 4, Chain: strings.Repeat("0a", 16), KeyID: "5f0c2a9e11d3b7a4"}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).LogAttrs(context.Background(), slog.LevelInfo, audit.HeadMessage, h.HeadAttrs()...)
	slog.New(slog.NewJSONHandler(&js, nil)).With("component", "audit").LogAttrs(context.Background(), slog.LevelInfo, audit.HeadMessage, h.HeadAttrs()...)
	journal := fmt.Sprintf(`{"__REALTIME_TIMESTAMP":"1","MESSAGE":%q}`, strings.TrimSpace(text.String()))
	for name, in := range map[string]string{
		"text":               text.String(),
		"json":               js.String(),
		"journalctl -o cat":  "<6>" + text.String(),
		"journalctl -o json": journal + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			hs, err := audit.ReadHeads(strings.NewReader("time=x level=INFO msg=\"serving\"\n" + in + "not a log line\n"))
			if err != nil {
				t.Fatal(err)
			}
			got := hs.Newest
			if hs.Read != 1 || hs.Skipped != 2 || got.Generation != 3 || got.Line != 17 || got.Epoch != 4 || got.Chain != h.Chain || got.KeyID != h.KeyID {
				t.Errorf("got %+v (read %d, skipped %d), want %+v", got, hs.Read, hs.Skipped, h)
			}
		})
	}
	if _, err := audit.ReadHeads(strings.NewReader(`time=x level=INFO msg="audit seal head" audit_seal_generation=3 audit_seal_line=0 audit_seal_epoch=1 audit_seal_chain=` + h.Chain + "\n")); err == nil {
		t.Errorf("a head of line 0 was read")
	}
}

// TestTheReplacedKeyFilesBytesAreOverwritten: the file an evolved key
// replaces is overwritten before it is let go, so its old key is not left
// in the file system's free blocks: a descriptor held on it from before
// reads zeros after.
func TestTheReplacedKeyFilesBytesAreOverwritten(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	defer s.Close()
	old, err := os.Open(filepath.Join(f.stateDir, audit.SealKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	before, _ := io.ReadAll(old)
	f.clock.Set(f.clock.Now().Add(audit.SealInterval))
	if err := s.SealTick(f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	after := make([]byte, len(before))
	if _, err := old.ReadAt(after, 0); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, make([]byte, len(before))) || !bytes.Equal(after, make([]byte, len(before))) {
		t.Fatalf("the replaced key file held %x and now %x, want its bytes zeroed", before, after)
	}
}

// TestTheOldestFileKeptIsCheckedAgainstItsRotatedRecord: after retention,
// the chain resumes at the oldest file's opening seal; cutting that
// file's first lines up to a later seal (so that it still opens with one)
// is found at its first line, against the chain value the rotated record
// of the file before it recorded.
func TestTheOldestFileKeptIsCheckedAgainstItsRotatedRecord(t *testing.T) {
	f := newSealFixture(t)
	f.maxFile, f.retained = 4096, 2
	s := f.open()
	for i := range 12 {
		f.append(s, fmt.Sprintf("r%d", i), 4)
		f.clock.Set(f.clock.Now().Add(audit.SealInterval))
		if err := s.SealTick(f.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	f.mustVerify(nil)
	gens := generationsOf(t, f.dir)
	path := filepath.Join(f.dir, gens[0])
	ls := fileLines(t, path)
	i := sealLineIndex(t, ls)
	rewrite(t, path, ls[i:])
	rep := f.verify(nil)
	if rep.OK() || rep.Problems[0].Kind != audit.VerifyChainMismatch || rep.Problems[0].File != gens[0] || rep.Problems[0].Line != 1 {
		t.Fatalf("the oldest file's first %d lines cut: %+v", i, rep.Problems)
	}
}

// TestALineWrittenAroundTheStoreIsFound: a line that is no record, put
// between two chained lines, is not a torn write (no restart follows it).
func TestALineWrittenAroundTheStoreIsFound(t *testing.T) {
	f, files, _ := tamperStore(t)
	path := filepath.Join(f.dir, files[1])
	ls := fileLines(t, path)
	rewrite(t, path, append(ls[:5], append([][]byte{[]byte("{\"not\":\"a record\"\n")}, ls[5:]...)...))
	rep := f.verify(nil)
	if rep.OK() || rep.Problems[0].Kind != audit.VerifyUnchainedLine || rep.Problems[0].Line != 6 {
		t.Fatalf("a garbage line at %s:6: %+v", files[1], rep.Problems)
	}
}

// TestAKeyFileThatCannotBeWrittenIsRetriedOnTheTickWithoutSealing: the
// tick retries the evolved key's write on its own, not by sealing again;
// a store that stops after several failed writes and restarts derives
// the key file's key forward to its last seal.
func TestAKeyFileThatCannotBeWrittenIsRetriedOnTheTickWithoutSealing(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	f.append(s, "q", 3)
	tmp := filepath.Join(f.stateDir, audit.SealKeyFileName+".new")
	if err := os.MkdirAll(filepath.Join(tmp, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	for range 3 { // three epochs whose key is not written
		f.clock.Set(f.clock.Now().Add(audit.SealInterval))
		if err := s.SealTick(f.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	before := s.Stats().Seal
	if err := s.SealTick(f.clock.Now()); err != nil { // not due: a retry only
		t.Fatal(err)
	}
	after := s.Stats().Seal
	if before.Epoch != 4 || after.Epoch != 4 || after.KeyFileFailures <= before.KeyFileFailures {
		t.Fatalf("before the retry %+v, after %+v: want epoch 4 both times and one more failure", before, after)
	}
	f.append(s, "r", 2)
	// The crash, with the key file three epochs behind.
	crashed, crashedState := snapshot(t, f.dir), snapshot(t, f.stateDir)
	s.Close()
	os.RemoveAll(filepath.Join(crashedState, filepath.Base(tmp)))
	f.dir, f.stateDir = crashed, crashedState
	s = f.open()
	if st := s.Stats().Seal; st.Epoch != 5 {
		t.Fatalf("after the restart Stats().Seal = %+v, want epoch 5 (derived forward past the last seal, then the start seal)", st)
	}
	f.append(s, "s", 3)
	s.Close()
	f.mustVerify(nil)
}
