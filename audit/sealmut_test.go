//go:build unix

package audit_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

// Tests pinning sealstore.go's boundaries and branches that the other
// seal tests leave open (mutation testing).

// openLogged opens the fixture's sealed store with th's seams and the
// store's log going to logs; the error is returned, not failed on.
func (f *sealFixture) openLogged(logs *bytes.Buffer, th audit.TestHooks) (*audit.Store, error) {
	f.t.Helper()
	d := f.state()
	f.t.Cleanup(func() { d.Close() })
	key, err := audit.OpenSealKey(d)
	if err != nil || key == nil {
		f.t.Fatalf("OpenSealKey: %v, %v", key, err)
	}
	th.MinFileBytes = 4096
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	return audit.OpenWithHooks(audit.Options{Dir: f.dir, Seal: key, Now: f.clock.Now, MaxFileBytes: f.maxFile, MaxRetainedFiles: f.retained, Logger: logger}, th)
}

// keyFileEpoch is the epoch of the key the key file holds.
func (f *sealFixture) keyFileEpoch() uint64 {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.stateDir, audit.SealKeyFileName))
	if err != nil {
		f.t.Fatal(err)
	}
	e, _ := audit.ReadSealKeyFile(b)
	return e
}

// TestTheHeadNamesTheActiveFilesGenerationAtTheSequencesEnd: the head's
// generation is the last generation's number plus one, and wraps to 0
// after 999999 (as nextGeneration names it). Kills sealstore.go:207
// (the > bound, and the + turned -).
func TestTheHeadNamesTheActiveFilesGenerationAtTheSequencesEnd(t *testing.T) {
	for _, tc := range []struct {
		lastSeq, want int
	}{
		{999997, 999998},
		{999998, 999999},
		{999999, 0},
	} {
		t.Run(fmt.Sprint(tc.lastSeq), func(t *testing.T) {
			f := newSealFixture(t)
			if err := os.MkdirAll(f.dir, 0o700); err != nil {
				t.Fatal(err)
			}
			gen := fmt.Sprintf("registrar-audit-20260101T000000Z-%06d.jsonl", tc.lastSeq)
			if err := os.WriteFile(filepath.Join(f.dir, gen), mustMarshal(t, intent("old")), 0o600); err != nil {
				t.Fatal(err)
			}
			s := f.open()
			defer s.Close()
			h, ok := s.SealHead()
			if !ok || h.Generation != tc.want || h.Line != 1 {
				t.Fatalf("after the last generation %s the head is %+v (%v), want generation %d, line 1", gen, h, ok, tc.want)
			}
		})
	}
}

// TestTheStartSealRotatesOnlyAFileItWouldOverfill: a seal due is counted
// at its bound (the longest seal line) before it is written: a file with
// exactly that room left takes it, one with a byte less is rotated first,
// and the seal is then written at the new file's start. Kills
// sealstore.go:240 (> turned >=) and sealstore.go:241 (the rotation's
// success taken for a failure: the seal not written).
func TestTheStartSealRotatesOnlyAFileItWouldOverfill(t *testing.T) {
	// maxSealLineBytes, as seal.go computes it.
	bound, err := audit.Marshal(&audit.Record{Phase: audit.PhaseAdmin, TS: time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC), CallerIdentity: audit.DaemonIdentity,
		Admin: &audit.Admin{Action: audit.ActionSealed, Sealed: audit.Sealed{Epoch: ^uint64(0), Reason: audit.SealReasonRotation, KeyID: "0123456789abcdef"}}})
	if err != nil {
		t.Fatal(err)
	}
	maxSeal := uint64(len(bound) + audit.ChainSuffixBytes)
	f := newSealFixture(t)
	s := f.open()
	for i := 0; ; i++ {
		f.append(s, fmt.Sprintf("q%d", i), 5)
		if s.Size()+maxSeal >= 4096 {
			break
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	active := filepath.Join(f.dir, audit.ActiveFileName)
	before, err := os.ReadFile(active)
	if err != nil {
		t.Fatal(err)
	}
	size := uint64(len(before))
	dir, state := f.dir, f.stateDir
	for _, tc := range []struct {
		maxFile uint64
		rotated bool
	}{
		{size + maxSeal, false},
		{size + maxSeal - 1, true},
	} {
		t.Run(fmt.Sprintf("room=%d", tc.maxFile-size), func(t *testing.T) {
			f.t = t
			f.dir, f.stateDir, f.maxFile = snapshot(t, dir), snapshot(t, state), tc.maxFile
			s := f.open()
			defer s.Close()
			gens := generationsOf(t, f.dir)
			ls := fileLines(t, filepath.Join(f.dir, audit.ActiveFileName))
			if st := s.Stats().Seal; st.Epoch != 3 {
				t.Errorf("Stats().Seal = %+v, want epoch 3: the start seal written at Open", st)
			}
			if !tc.rotated {
				if len(gens) != 0 || len(ls) != bytes.Count(before, []byte("\n"))+1 {
					t.Fatalf("a file with room for the seal: %d generations, %d lines; want none, and the seal appended", len(gens), len(ls))
				}
				return
			}
			if len(gens) != 1 || len(ls) != 1 {
				t.Fatalf("a file a byte short of room for the seal: %d generations, %d lines in the new active file; want 1 and the seal", len(gens), len(ls))
			}
			if r, err := audit.Unmarshal(ls[0]); err != nil || r.Admin == nil || r.Admin.Action != audit.ActionSealed || r.Admin.Reason != audit.SealReasonRotation {
				t.Fatalf("the new active file opens with %s (%v), want a rotation seal", ls[0], err)
			}
		})
	}
}

// TestOpenLogsAKeyAheadOfTheStoreOnlyWhenItIs: Open says the store's
// seals were removed or the key file replaced when, and only when, the
// key's epoch does not follow the store's last seal (or the store holds no
// chain and the key is past its first epoch); a start seal written says
// nothing. Kills sealstore.go:333 (both), sealstore.go:355 (both) and
// sealstore.go:485 (the start seal's success logged as a failure).
func TestOpenLogsAKeyAheadOfTheStoreOnlyWhenItIs(t *testing.T) {
	const (
		noChain   = "holds no sealed line although the sealing key is past its first epoch"
		noFollow  = "does not follow the store's last seal"
		startFail = "writing the start seal failed"
	)
	check := func(t *testing.T, logs *bytes.Buffer, want ...string) {
		t.Helper()
		for _, m := range []string{noChain, noFollow, startFail} {
			wanted := false
			for _, w := range want {
				wanted = wanted || w == m
			}
			if got := strings.Contains(logs.String(), m); got != wanted {
				t.Errorf("log says %q: %v, want %v; log:\n%s", m, got, wanted, logs)
			}
		}
	}
	open := func(t *testing.T, f *sealFixture, th audit.TestHooks, want ...string) *audit.Store {
		t.Helper()
		var logs bytes.Buffer
		s, err := f.openLogged(&logs, th)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		check(t, &logs, want...)
		return s
	}
	// A store sealed, closed: seals of epochs 0 and 1, the key at 2.
	sealed := func(t *testing.T) *sealFixture {
		f := newSealFixture(t)
		s := open(t, f, audit.TestHooks{}) // a new key, a new store: nothing to say
		f.append(s, "q", 3)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if e := f.keyFileEpoch(); e != 2 {
			t.Fatalf("key file at epoch %d, want 2", e)
		}
		return f
	}
	t.Run("reopened", func(t *testing.T) {
		f := sealed(t)
		s := open(t, f, audit.TestHooks{})
		s.Close()
		f.mustVerify(nil)
	})
	t.Run("the store removed", func(t *testing.T) {
		f := sealed(t)
		f.dir = filepath.Join(t.TempDir(), "audit")
		s := open(t, f, audit.TestHooks{}, noChain)
		s.Close()
	})
	t.Run("the last seal removed", func(t *testing.T) {
		f := sealed(t)
		path := filepath.Join(f.dir, audit.ActiveFileName)
		ls := fileLines(t, path)
		rewrite(t, path, ls[:len(ls)-1])
		s := open(t, f, audit.TestHooks{}, noFollow)
		s.Close()
	})
	t.Run("the start seal's write fails", func(t *testing.T) {
		f := newSealFixture(t)
		fail := true
		s := open(t, f, audit.TestHooks{WrapFile: func(fl audit.File) audit.File { return &failOnce{File: fl, fail: &fail} }}, startFail)
		if st := s.Stats().Seal; st.Epoch != 0 {
			t.Errorf("Stats().Seal = %+v, want epoch 0: the start seal not written", st)
		}
		f.append(s, "q", 2) // the start seal goes first
		s.Close()
		f.mustVerify(nil)
	})
}

// failOnce fails its first Write.
type failOnce struct {
	audit.File
	fail *bool
}

func (w *failOnce) Write(b []byte) (int, error) {
	if *w.fail {
		*w.fail = false
		return 0, errors.New("injected write failure")
	}
	return w.File.Write(b)
}

// TestAReopenedStoresHeadCountsTheActiveFilesLines: the head's line
// number after a restart counts the lines the active file already held.
// Kills sealstore.go:422 (a read of the active file taken for a failure).
func TestAReopenedStoresHeadCountsTheActiveFilesLines(t *testing.T) {
	f := newSealFixture(t)
	s := f.open()
	f.append(s, "q", 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n := len(fileLines(t, filepath.Join(f.dir, audit.ActiveFileName)))
	s = f.open()
	h, ok := s.SealHead()
	if !ok || h.Line != uint64(n)+1 || h.Generation != 1 {
		t.Fatalf("after a restart the head is %+v (%v), want generation 1, line %d (the start seal after %d lines)", h, ok, n+1, n)
	}
	f.append(s, "r", 2)
	s.Close()
	f.mustVerify(f.heads())
}

// TestOpenFailsWhenTheNewestGenerationCannotBeRead: with no chained line
// in the active file Open reads the chain's end from the newest
// generation; a failure to read it fails Open rather than start a new
// chain unseen. The generation is made a symlink (opened without
// following) after Open listed it. Kills sealstore.go:427.
func TestOpenFailsWhenTheNewestGenerationCannotBeRead(t *testing.T) {
	f := newSealFixture(t)
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(f.dir, "registrar-audit-20260101T000000Z-000001.jsonl")
	if err := os.WriteFile(gen, mustMarshal(t, intent("old")), 0o600); err != nil {
		t.Fatal(err)
	}
	swapped := false
	th := audit.TestHooks{WrapFile: func(fl audit.File) audit.File {
		if !swapped { // Open's: after the listing, before the chain's end is read
			swapped = true
			other := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Rename(gen, other); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(other, gen); err != nil {
				t.Error(err)
			}
		}
		return fl
	}}
	s, err := f.openLogged(nil, th)
	if !swapped {
		t.Fatal("the hook did not run")
	}
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded though the newest generation could not be read")
	}
	if !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.EMLINK) { // O_NOFOLLOW's (EMLINK on FreeBSD)
		t.Fatalf("Open: %v, want the generation's open refused (O_NOFOLLOW)", err)
	}
}

// TestOpenDerivesTheKeyForwardAtMostMaxKeyLagEpochs: a key file lagging
// the store's last seal by exactly maxKeyLag (2^16) epochs is derived
// forward to it (the seal checked with the key derived), one more is
// refused. The key file starts at epoch 2, so that the lag is the
// difference of the epochs, not their sum, and a loop that counts down
// derives the wrong key. Kills sealstore.go:381 (> turned >=, - turned +
// by ARITHMETIC_BASE and INVERT_NEGATIVES) and sealstore.go:391 (e++
// turned e--).
func TestOpenDerivesTheKeyForwardAtMostMaxKeyLagEpochs(t *testing.T) {
	const maxKeyLag = 1 << 16 // sealstore.go's
	base := newSealFixture(t)
	s := base.open()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if e := base.keyFileEpoch(); e != 2 {
		t.Fatalf("key file at epoch %d, want 2", e)
	}
	keys := audit.DeriveKeys(base.vkey, 2+maxKeyLag+2)
	for _, tc := range []struct {
		lag       uint64
		wantEpoch uint64 // after Open (its start seal written)
	}{
		{maxKeyLag, 2 + maxKeyLag + 2},
		{maxKeyLag + 1, 3},
	} {
		t.Run(fmt.Sprint(tc.lag), func(t *testing.T) {
			f := *base
			f.t = t
			f.dir, f.stateDir = snapshot(t, base.dir), snapshot(t, base.stateDir)
			// A seal of epoch 2+lag, chained with that epoch's key after
			// the store's last line: what the store writes after lag
			// epochs whose key file writes failed.
			epoch := 2 + tc.lag
			path := filepath.Join(f.dir, audit.ActiveFileName)
			ls := fileLines(t, path)
			seal := mustMarshal(t, &audit.Record{Phase: audit.PhaseAdmin, TS: t0, CallerIdentity: audit.DaemonIdentity,
				Admin: &audit.Admin{Action: audit.ActionSealed, Sealed: audit.Sealed{Epoch: epoch, Reason: audit.SealReasonInterval, KeyID: audit.KeyID(&f.vkey)}}})
			chained, _ := audit.Rechain(keys[epoch], audit.ChainOf(ls[len(ls)-1]), seal)
			rewrite(t, path, append(ls, chained))
			s := f.open()
			defer s.Close()
			if st := s.Stats().Seal; st.Epoch != tc.wantEpoch {
				t.Fatalf("a key file %d epochs behind the last seal: Stats().Seal = %+v, want epoch %d", tc.lag, st, tc.wantEpoch)
			}
			if e := f.keyFileEpoch(); e != tc.wantEpoch {
				t.Fatalf("key file at epoch %d, want %d", e, tc.wantEpoch)
			}
		})
	}
}
