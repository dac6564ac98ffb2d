//go:build unix

package audit_test

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/registrar-otel/registrar-otel/audit"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// The arithmetic with the defaults (8 MiB files, 16 retained: a 136 MiB
// budget; a 256 MiB reserve) and an operator's own numbers.
func TestClassifyAppliesTheDocumentedArithmetic(t *testing.T) {
	budget := audit.BudgetBytes(8*mib, 16)
	if budget != 136*mib {
		t.Fatalf("budget %d, want 136 MiB", budget)
	}
	for _, c := range []struct {
		name                         string
		free, store, budget, reserve uint64
		maxFile                      uint64
		failed                       bool
		want                         audit.CapacityState
		wantNeeded                   uint64
	}{
		{"empty store, plenty free", 10 * gib, 0, budget, 256 * mib, 8 * mib, false, audit.CapacityOK, 392 * mib},
		{"exactly what ok needs", 392 * mib, 0, budget, 256 * mib, 8 * mib, false, audit.CapacityOK, 392 * mib},
		{"one byte short", 392*mib - 1, 0, budget, 256 * mib, 8 * mib, false, audit.CapacityLow, 392 * mib},
		{"a grown store needs less", 300 * mib, 100 * mib, budget, 256 * mib, 8 * mib, false, audit.CapacityOK, 292 * mib},
		{"store at its budget: the reserve alone", 256 * mib, budget, budget, 256 * mib, 8 * mib, false, audit.CapacityOK, 256 * mib},
		{"store beyond its budget (logrotate leftovers are not counted; shrunk config)", 256 * mib, 200 * mib, budget, 256 * mib, 8 * mib, false, audit.CapacityOK, 256 * mib},
		{"no reserve", 136 * mib, 0, budget, 0, 8 * mib, false, audit.CapacityOK, 136 * mib},
		{"no reserve, short", 100 * mib, 0, budget, 0, 8 * mib, false, audit.CapacityLow, 136 * mib},
		{"below one file", 8*mib - 1, 0, budget, 0, 8 * mib, false, audit.CapacityCritical, 136 * mib},
		{"one file exactly is low, not critical", 8 * mib, 0, budget, 0, 8 * mib, false, audit.CapacityLow, 136 * mib},
		{"nothing free", 0, 0, budget, 0, 8 * mib, false, audit.CapacityCritical, 136 * mib},
		{"last append failed, whatever is free", 10 * gib, 0, budget, 0, 8 * mib, true, audit.CapacityUnwritable, 136 * mib},
		{"saturating sums", math.MaxUint64, 0, math.MaxUint64, math.MaxUint64, 8 * mib, false, audit.CapacityOK, math.MaxUint64},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, needed := audit.Classify(c.free, c.store, c.budget, c.reserve, c.maxFile, c.failed)
			if got != c.want || needed != c.wantNeeded {
				t.Errorf("Classify = %s, needs %d; want %s, %d", got, needed, c.want, c.wantNeeded)
			}
		})
	}
	if got := audit.BudgetBytes(math.MaxUint64/2, 16); got != math.MaxUint64 {
		t.Errorf("budget overflow gave %d, want saturation", got)
	}
	for s, want := range map[audit.CapacityState]string{audit.CapacityOK: "ok", audit.CapacityLow: "low", audit.CapacityCritical: "critical", audit.CapacityUnwritable: "unwritable"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s, want)
		}
	}
}

func TestProbeMeasuresTheStoresOwnFilesAndTheFileSystem(t *testing.T) {
	clock := &fixedClock{t: t0}
	s, dir := openStore(t, audit.Options{MaxFileBytes: 64 * kib, MaxRetainedFiles: 3, Now: clock.Now}, audit.TestHooks{})
	appendOK(t, s, intent("a"))
	must(t, os.WriteFile(filepath.Join(dir, audit.ActiveFileName+".1"), make([]byte, 10000), 0o600)) // not the store's
	gen := "registrar-audit-20260101T000000Z-000001.jsonl"
	must(t, os.WriteFile(filepath.Join(dir, gen), make([]byte, 5000), 0o600))

	free := uint64(10 * mib)
	var paths []string
	p, err := audit.NewCapacityProbe(s, 32*kib)
	must(t, err)
	audit.SetStatfs(p, func(path string) (uint64, error) {
		paths = append(paths, path)
		if _, err := os.Stat(path); err != nil {
			return 0, &fs.PathError{Op: "statfs", Path: path, Err: err}
		}
		return free, nil
	})
	c, err := p.Probe()
	must(t, err)
	activeSize := uint64(len(readActive(t, dir)))
	want := audit.Capacity{State: audit.CapacityOK, FreeBytes: free, StoreBytes: activeSize + 5000, BudgetBytes: 4 * 64 * kib,
		ReserveBytes: 32 * kib, NeededBytes: 4*64*kib - (activeSize + 5000) + 32*kib, MaxFileBytes: 64 * kib}
	if c != want || p.Last() != want {
		t.Fatalf("probe %+v\nwant  %+v", c, want)
	}
	// Low, critical, from the file system's figure alone.
	free = 100 * kib
	if c, _ := p.Probe(); c.State != audit.CapacityLow {
		t.Errorf("100 KiB free: %s, want low", c.State)
	}
	free = 10 * kib
	if c, _ := p.Probe(); c.State != audit.CapacityCritical {
		t.Errorf("10 KiB free: %s, want critical", c.State)
	}
	// The directory removed: statfs of its parent, no store bytes.
	free = 10 * mib
	must(t, os.RemoveAll(dir))
	paths = nil
	c, err = p.Probe()
	if err != nil || c.StoreBytes != 0 || c.FreeBytes != free || len(paths) != 2 || paths[1] != filepath.Dir(dir) {
		t.Errorf("probe of a removed directory: %+v, %v, statfs of %q", c, err, paths)
	}
	// A failing statfs keeps the last free figure and says so.
	audit.SetStatfs(p, func(string) (uint64, error) { return 0, errors.New("EIO") })
	c, err = p.Probe()
	if err == nil || c.FreeBytes != free {
		t.Errorf("failing statfs: %+v, %v, want the last free figure and an error", c, err)
	}
}

func TestProbeSeesTheLastAppendFail(t *testing.T) {
	f := &faults{}
	s, _ := openStore(t, audit.Options{}, f.hooks())
	p, err := audit.NewCapacityProbe(s, 0)
	must(t, err)
	audit.SetStatfs(p, func(string) (uint64, error) { return 100 * gib, nil })
	f.set(func(f *faults) { f.failWrite = true })
	if err := s.Append(context.Background(), intent("a")); err == nil {
		t.Fatal("injected write failure did not fail the append")
	}
	if c, _ := p.Probe(); c.State != audit.CapacityUnwritable || c.AppendFailures != 1 {
		t.Fatalf("after a failed append: %+v, want unwritable with 1 failure", c)
	}
	f.reset()
	appendOK(t, s, intent("b"))
	if c, _ := p.Probe(); c.State != audit.CapacityOK || c.AppendFailures != 1 {
		t.Fatalf("after a successful append: %+v, want ok, still 1 failure since start", c)
	}
}

func TestProbeOfARealFileSystem(t *testing.T) {
	s, _ := openStore(t, audit.Options{}, audit.TestHooks{})
	p, err := audit.NewCapacityProbe(s, 0)
	if err != nil || p.Last().FreeBytes == 0 || p.Last().BudgetBytes != 17*8*mib {
		t.Fatalf("real statfs: %+v, %v", p.Last(), err)
	}
	if _, err := audit.NewCapacityProbe(nil, 0); err == nil {
		t.Error("a nil store was accepted")
	}
}
