//go:build unix

package audit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

// fuzzSealed is a small sealed store, built once per process: its files
// (oldest first, the active file last), the verification key and the heads
// logged while it was written.
var fuzzSealed = sync.OnceValues(func() (*sealedFixture, error) { return buildSealedFixture() })

type sealedFixture struct {
	names []string
	files map[string][]byte
	key   [audit.SealKeyBytes]byte
	heads []byte
}

// buildSealedFixture writes a sealed store of three files or more (4 KiB
// files, seals at each start, rotation and stop and an interval one), with
// a deterministic key.
func buildSealedFixture() (*sealedFixture, error) {
	root, err := os.MkdirTemp("", "seal-fuzz-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	state := filepath.Join(root, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		return nil, err
	}
	d, err := os.Open(state)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	seed := sha256.Sum256([]byte("seal fuzz"))
	v, _, err := audit.CreateSealKey(d, bytes.NewReader(seed[:]))
	if err != nil {
		return nil, err
	}
	fx := &sealedFixture{files: map[string][]byte{}}
	if fx.key, err = audit.ParseVerificationKey(v); err != nil {
		return nil, err
	}
	key, err := audit.OpenSealKey(d)
	if err != nil {
		return nil, err
	}
	clock := &fixedClock{t: t0}
	dir := filepath.Join(root, "audit")
	s, err := audit.OpenWithHooks(audit.Options{Dir: dir, Seal: key, Now: clock.Now, MaxFileBytes: 4096, MaxRetainedFiles: 20}, audit.TestHooks{MinFileBytes: 4096})
	if err != nil {
		return nil, err
	}
	var logs bytes.Buffer
	var last audit.SealHead
	head := func() {
		if h, ok := s.SealHead(); ok && h != last {
			last = h
			slog.New(slog.NewTextHandler(&logs, nil)).LogAttrs(context.Background(), slog.LevelInfo, audit.HeadMessage, h.HeadAttrs()...)
		}
	}
	for i := range 30 {
		r := intent(fmt.Sprintf("fz.%d", i))
		if i%3 == 2 {
			r = limited(vocab.Admission, uint64(i))
		}
		if err := s.Append(context.Background(), r); err != nil {
			return nil, err
		}
		if i == 12 {
			clock.Set(clock.Now().Add(audit.SealInterval))
			if err := s.SealTick(clock.Now()); err != nil {
				return nil, err
			}
		}
		head()
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	head()
	fx.heads = logs.Bytes()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		fx.files[e.Name()] = b
		if e.Name() != audit.ActiveFileName {
			fx.names = append(fx.names, e.Name())
		}
	}
	fx.names = append(fx.names, audit.ActiveFileName)
	if len(fx.names) < 3 {
		return nil, fmt.Errorf("the fixture has %d files, want three or more", len(fx.names))
	}
	return fx, nil
}

// FuzzVerifySealedStore: audit verify with the key and the heads never
// panics on a sealed store with bytes cut out of or put into one of its
// files, and never reports such a store clean, unless the only change is
// an unterminated last line added to the active file (what a crash
// cutting a write short leaves, counted as a torn write).
func FuzzVerifySealedStore(f *testing.F) {
	fx, err := fuzzSealed()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), uint32(100), uint16(1), []byte{})
	f.Add(uint8(1), uint32(0), uint16(0), []byte("{}\n"))
	f.Add(uint8(2), uint32(1<<31), uint16(40), []byte{})
	f.Add(uint8(1), uint32(500), uint16(0), []byte("x"))
	f.Add(uint8(2), uint32(1<<31), uint16(0), []byte("partial"))
	f.Add(uint8(0), uint32(1<<31), uint16(3000), []byte{})
	f.Add(uint8(2), uint32(7), uint16(2), []byte("\n"))
	f.Fuzz(func(t *testing.T, fi uint8, off uint32, del uint16, ins []byte) {
		name := fx.names[int(fi)%len(fx.names)]
		old := fx.files[name]
		at := int(off) % (len(old) + 1)
		cut := min(int(del)%4096, len(old)-at)
		mutated := append(append(bytes.Clone(old[:at]), ins...), old[at+cut:]...)
		if bytes.Equal(mutated, old) {
			return
		}
		excused := name == audit.ActiveFileName && bytes.HasPrefix(mutated, old) && !bytes.Contains(mutated[len(old):], []byte("\n"))
		dir := filepath.Join(t.TempDir(), "audit")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for n, b := range fx.files {
			if n == name {
				b = mutated
			}
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		heads, err := audit.ReadHeads(bytes.NewReader(fx.heads))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := audit.Verify(context.Background(), audit.VerifyOptions{Dir: dir, Key: &fx.key, Heads: heads})
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if rep.OK() && !excused {
			t.Fatalf("%s changed (%d bytes cut at %d, %q put in) and verify says clean: %+v", name, cut, at, ins, rep.Seal)
		}
		if !rep.OK() && excused {
			t.Fatalf("an unterminated line added to the active file (a torn write) is reported: %+v", rep.Problems)
		}
	})
}
