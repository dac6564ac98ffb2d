//go:build unix

package audit_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

// tamperStore builds a sealed store of three generations and the active
// file, with interval seals inside the files, closes it (a stop seal),
// and returns its fixture, the files oldest first (the active file last)
// and the heads it logged.
func tamperStore(t *testing.T) (*sealFixture, []string, *audit.Heads) {
	t.Helper()
	f := newSealFixture(t)
	f.maxFile, f.retained = 4096, 10
	s := f.open()
	for i := range 8 {
		f.append(s, "q"+string(rune('a'+i)), 8)
		f.clock.Set(f.clock.Now().Add(audit.SealInterval))
		if err := s.SealTick(f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		f.head(s)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.head(s) // the stop seal's, as the daemon logs it at shutdown
	files := append(generationsOf(t, f.dir), audit.ActiveFileName)
	if len(files) < 4 {
		t.Fatalf("want three generations and the active file, got %v", files)
	}
	return f, files, f.heads()
}

// rewrite replaces a file's lines.
func rewrite(t *testing.T, path string, ls [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(ls, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sealLineIndex returns the index of the first interval seal of a file
// after its first line.
func sealLineIndex(t *testing.T, ls [][]byte) int {
	t.Helper()
	for i, l := range ls[1:] {
		if bytes.Contains(l, []byte(`"reason":"interval"`)) {
			return i + 1
		}
	}
	t.Fatal("no interval seal in the file")
	return 0
}

// rechainFrom rewrites the store's lines from file files[fi], line index li
// on, chained with key after the chain value of the line before (an
// intruder's rewrite with the key he read); insert, if not nil, is put
// before that line first.
func rechainFrom(t *testing.T, dir string, files []string, fi, li int, key [audit.SealKeyBytes]byte, insert []byte) {
	t.Helper()
	prev := ""
	if li > 0 {
		prev = audit.ChainOf(fileLines(t, filepath.Join(dir, files[fi]))[li-1])
	} else if fi > 0 {
		ls := fileLines(t, filepath.Join(dir, files[fi-1]))
		prev = audit.ChainOf(ls[len(ls)-1])
	}
	for ; fi < len(files); fi++ {
		path := filepath.Join(dir, files[fi])
		ls := fileLines(t, path)
		if insert != nil {
			ls = append(ls[:li], append([][]byte{insert}, ls[li:]...)...)
			insert = nil
		}
		for i := li; i < len(ls); i++ {
			ls[i], prev = audit.Rechain(key, prev, ls[i])
		}
		rewrite(t, path, ls)
		li = 0
	}
}

// TestVerifyFindsEveryTamperKind: each of the ten kinds of tampering the
// issue names, and a seal forged with the intruder's key (systemd #28885),
// on a sealed store, is reported, the first problem naming the first bad
// record.
func TestVerifyFindsEveryTamperKind(t *testing.T) {
	type where struct {
		kind audit.VerifyProblemKind
		file int // index in files
		line uint64
		also audit.VerifyProblemKind // a later problem there must be too
	}
	f, files, heads := tamperStore(t)
	cases := []struct {
		name   string
		heads  bool // verify with the heads
		tamper func(t *testing.T, dir, state string, files []string) where
	}{
		{"one byte of one line edited", false, func(t *testing.T, dir, _ string, files []string) where {
			path := filepath.Join(dir, files[1])
			ls := fileLines(t, path)
			i := 2
			for !bytes.Contains(ls[i], []byte(`"host":"h1"`)) {
				i++
			}
			ls[i] = bytes.Replace(ls[i], []byte(`"host":"h1"`), []byte(`"host":"h2"`), 1)
			rewrite(t, path, ls)
			return where{audit.VerifyChainMismatch, 1, uint64(i + 1), ""}
		}},
		{"one line deleted", false, func(t *testing.T, dir, _ string, files []string) where {
			path := filepath.Join(dir, files[1])
			ls := fileLines(t, path)
			rewrite(t, path, append(ls[:4], ls[5:]...))
			return where{audit.VerifyChainMismatch, 1, 5, ""}
		}},
		{"one line replayed", false, func(t *testing.T, dir, _ string, files []string) where {
			path := filepath.Join(dir, files[2])
			ls := fileLines(t, path)
			rewrite(t, path, append(ls[:4], append([][]byte{ls[3]}, ls[4:]...)...))
			return where{audit.VerifyRecordReplayed, 2, 5, ""}
		}},
		{"two lines swapped", false, func(t *testing.T, dir, _ string, files []string) where {
			path := filepath.Join(dir, files[0])
			ls := fileLines(t, path)
			ls[3], ls[4] = ls[4], ls[3]
			rewrite(t, path, ls)
			return where{audit.VerifyChainMismatch, 0, 4, ""}
		}},
		{"a forged line inserted, the chain recomputed with the key read now", false, func(t *testing.T, dir, state string, files []string) where {
			b, _ := os.ReadFile(filepath.Join(state, audit.SealKeyFileName))
			_, key := audit.ReadSealKeyFile(b)
			rechainFrom(t, dir, files, 1, 3, key, mustMarshal(t, intent("forged")))
			return where{audit.VerifyChainMismatch, 1, 4, ""}
		}},
		{"the tail truncated", true, func(t *testing.T, dir, _ string, files []string) where {
			last := len(files) - 1
			path := filepath.Join(dir, files[last])
			ls := fileLines(t, path)
			rewrite(t, path, ls[:len(ls)-3])
			return where{audit.VerifyTruncated, last, uint64(len(ls) - 3), ""}
		}},
		{"the newest generation deleted", true, func(t *testing.T, dir, _ string, files []string) where {
			os.Remove(filepath.Join(dir, files[len(files)-2]))
			// The active file now takes the deleted one's number, and its
			// own heads name a generation that is gone.
			return where{audit.VerifyChainMismatch, len(files) - 1, 1, audit.VerifyGenerationMissing}
		}},
		{"the last line's end cut", true, func(t *testing.T, dir, _ string, files []string) where {
			// What a torn write leaves, but the daemon logged the line
			// whole: not a crash's.
			last := len(files) - 1
			path := filepath.Join(dir, files[last])
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, b[:len(b)-1], 0o600); err != nil {
				t.Fatal(err)
			}
			return where{audit.VerifyHeadMismatch, last, uint64(len(fileLines(t, path)) + 1), ""}
		}},
		{"a middle generation deleted", false, func(t *testing.T, dir, _ string, files []string) where {
			os.Remove(filepath.Join(dir, files[1]))
			return where{audit.VerifyChainMismatch, 2, 1, ""}
		}},
		{"a whole generation rewritten consistently with a later key", true, func(t *testing.T, dir, state string, files []string) where {
			b, _ := os.ReadFile(filepath.Join(state, audit.SealKeyFileName))
			_, key := audit.ReadSealKeyFile(b)
			rechainFrom(t, dir, files, 1, 0, key, nil)
			return where{audit.VerifyChainMismatch, 1, 1, ""}
		}},
		{"a seal forged with the key read at the attack, the chain recomputed after it", false, func(t *testing.T, dir, state string, files []string) where {
			// The intruder claims his own epoch for a seal put in the
			// past, and chains what follows with the key after his: a
			// verifier that took a seal's epoch from the seal would accept
			// it (systemd #28885).
			b, _ := os.ReadFile(filepath.Join(state, audit.SealKeyFileName))
			epoch, key := audit.ReadSealKeyFile(b)
			seal := mustMarshal(t, &audit.Record{Phase: audit.PhaseAdmin, TS: t0, CallerIdentity: audit.DaemonIdentity,
				Admin: &audit.Admin{Action: audit.ActionSealed, Sealed: audit.Sealed{Epoch: epoch, Reason: audit.SealReasonInterval, KeyID: audit.KeyID(&f.vkey)}}})
			path := filepath.Join(dir, files[1])
			ls := fileLines(t, path)
			forged, _ := audit.Rechain(key, audit.ChainOf(ls[3]), seal)
			rewrite(t, path, append(ls[:4], append([][]byte{forged}, ls[4:]...)...))
			rechainFrom(t, dir, files, 1, 5, audit.DeriveKeys(key, 2)[1], nil)
			return where{audit.VerifyChainMismatch, 1, 5, ""}
		}},
		{"an epoch's seal removed", false, func(t *testing.T, dir, _ string, files []string) where {
			path := filepath.Join(dir, files[1])
			ls := fileLines(t, path)
			i := sealLineIndex(t, ls)
			rewrite(t, path, append(ls[:i], ls[i+1:]...))
			return where{audit.VerifyChainMismatch, 1, uint64(i + 1), ""}
		}},
	}
	if rep := f.mustVerify(heads); rep.Seal.HeadsChecked < 4 {
		t.Fatalf("the untouched store: %d heads checked, want one per file", rep.Seal.HeadsChecked)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, state := snapshot(t, f.dir), snapshot(t, f.stateDir)
			want := tc.tamper(t, dir, state, files)
			opts := audit.VerifyOptions{Dir: dir, Key: &f.vkey}
			if tc.heads {
				opts.Heads = heads
			}
			rep, err := audit.Verify(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatalf("not detected: %+v", rep.Seal)
			}
			got := rep.Problems[0]
			if got.Kind != want.kind || got.File != files[want.file] || got.Line != want.line {
				t.Fatalf("first problem %s at %s:%d (%s), want %s at %s:%d; all: %+v", got.Kind, got.File, got.Line, got.Detail, want.kind, files[want.file], want.line, rep.Problems)
			}
			if want.also != "" && !slices.ContainsFunc(rep.Problems, func(p audit.VerifyProblem) bool { return p.Kind == want.also }) {
				t.Fatalf("no %s among %+v", want.also, rep.Problems)
			}
		})
	}
}

// TestAForgedLineFailsWhereverItIsInsertedBeforeTheAttack: an intruder
// who read the key file at the end holds the last epoch's key; a line
// forged with it and inserted anywhere in the store before that epoch,
// the chain recomputed after it, is found exactly there.
func TestAForgedLineFailsWhereverItIsInsertedBeforeTheAttack(t *testing.T) {
	f, files, _ := tamperStore(t)
	b, _ := os.ReadFile(filepath.Join(f.stateDir, audit.SealKeyFileName))
	_, key := audit.ReadSealKeyFile(b)
	forged := mustMarshal(t, intent("forged"))
	checked := 0
	for fi, name := range files {
		n := len(fileLines(t, filepath.Join(f.dir, name)))
		for li := 0; li < n; li++ {
			dir := snapshot(t, f.dir)
			rechainFrom(t, dir, files, fi, li, key, forged)
			rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: dir, Key: &f.vkey})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || rep.Problems[0].File != name || rep.Problems[0].Line != uint64(li+1) {
				t.Fatalf("a line forged at %s:%d: first problem %+v", name, li+1, rep.Problems)
			}
			checked++
		}
	}
	t.Logf("%d positions checked", checked)
}

// TestTruncationNeedsTheHeads documents the limit the heads are for: a
// tail cut at a line boundary leaves a chain that verifies by itself.
func TestTruncationNeedsTheHeads(t *testing.T) {
	f, files, heads := tamperStore(t)
	path := filepath.Join(f.dir, files[len(files)-1])
	ls := fileLines(t, path)
	rewrite(t, path, ls[:len(ls)-3])
	if rep := f.verify(nil); !rep.OK() {
		t.Fatalf("without the heads: %+v", rep.Problems)
	}
	if rep := f.verify(heads); rep.OK() || !strings.Contains(rep.Problems[0].Detail, "tail was cut") {
		t.Fatalf("with the heads: %+v", rep.Problems)
	}
}
