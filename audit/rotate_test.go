//go:build unix

package audit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
)

// TestRotationAndRetention appends with a small cap and checks every
// invariant: files within the cap, names sorted oldest first, at most
// MaxRetainedFiles generations, whole lines, and the newest records kept in
// order with none lost inside the retained span; every deleted generation
// left its rotated record.
func TestRotationAndRetention(t *testing.T) {
	const maxFile, retained, total = 4096, 3, 120
	clock := &fixedClock{t: t0}
	var logs logBuffer
	s, dir := openStore(t, audit.Options{
		MaxFileBytes: maxFile, MaxRetainedFiles: retained, Now: clock.Now, Logger: newLogger(&logs),
	}, audit.TestHooks{MinFileBytes: maxFile})
	for i := range total {
		clock.Set(t0.Add(time.Duration(i) * 400 * time.Millisecond)) // several rotations per second
		appendOK(t, s, intent(fmt.Sprintf("q%03d", i)))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var gens []string
	for _, e := range entries {
		if e.Name() != audit.ActiveFileName {
			gens = append(gens, e.Name())
		}
	}
	if len(gens) != retained {
		t.Fatalf("got generations %v, want %d", gens, retained)
	}
	var ids []string
	var rotations []uint64
	for _, name := range append(gens, audit.ActiveFileName) {
		content, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(content) > maxFile {
			t.Errorf("%s is %d bytes, over the %d cap", name, len(content), maxFile)
		}
		if got := mode(t, filepath.Join(dir, name)); got != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", name, got)
		}
		for _, l := range lines(content) {
			r, err := audit.Unmarshal([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if r.Phase == audit.PhaseAdmin {
				rotations = append(rotations, r.Admin.Rotation)
				continue
			}
			ids = append(ids, r.RequestID)
		}
	}
	if st := s.Stats(); st.RotatedRecords == 0 || len(rotations) == 0 || rotations[len(rotations)-1] != st.RotatedRecords {
		t.Errorf("rotated records kept %v, %d written: want the newest numbered as many as were written", rotations, st.RotatedRecords)
	}
	// Oldest first across the files, contiguous, ending with the newest.
	if !slices.IsSorted(ids) || ids[len(ids)-1] != fmt.Sprintf("q%03d", total-1) {
		t.Errorf("records out of order or newest missing: %v", ids)
	}
	first := 0
	fmt.Sscanf(ids[0], "q%d", &first)
	if len(ids) != total-first {
		t.Errorf("got %d records from q%03d on, want %d (none lost inside the retained span)", len(ids), first, total-first)
	}
	if !strings.Contains(logs.String(), "rotated") {
		t.Errorf("no rotation logged: %s", logs.String())
	}
}

func TestGenerationNamesSortAcrossRestartsAndClockSteps(t *testing.T) {
	clock := &fixedClock{t: t0}
	dir := filepath.Join(t.TempDir(), "audit")
	opts := audit.Options{Dir: dir, MaxFileBytes: 512, MaxRetainedFiles: 100, Now: clock.Now}
	th := audit.TestHooks{MinFileBytes: 512}
	next := 0
	write := func(n int) {
		s, err := audit.OpenWithHooks(opts, th)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			appendOK(t, s, intent(fmt.Sprintf("q%02d", next)))
			next++
		}
		s.Close()
	}
	write(6)                           // several rotations inside one second
	clock.Set(t0.Add(-time.Hour))      // the clock steps back,
	write(6)                           // after a restart;
	clock.Set(t0.Add(2 * time.Second)) // then forward again
	write(6)

	names, err := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	stamps := map[string]int{}
	for _, n := range append(names, filepath.Join(dir, audit.ActiveFileName)) {
		base := filepath.Base(n)
		if base != audit.ActiveFileName {
			stamps[base[len("registrar-audit-"):len("registrar-audit-")+16]]++
		}
		content, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines(content) {
			r, err := audit.Unmarshal([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.RequestID)
		}
	}
	if len(ids) != next || !slices.IsSorted(ids) {
		t.Errorf("reading generations in name order then the active file gives %v; want q00..q%02d in order", ids, next-1)
	}
	// The step back reused the last stamp rather than going backwards.
	if stamps["20260823T113456Z"] != 0 || stamps["20260823T123456Z"] < 4 || stamps["20260823T123458Z"] < 1 {
		t.Errorf("got stamps %v; want none at 11:34:56, several sharing 12:34:56, then 12:34:58", stamps)
	}
}

func TestTrimFailureIsLoggedNeverFatal(t *testing.T) {
	var logs logBuffer
	th := audit.TestHooks{MinFileBytes: 2048, Remove: func(string) error { return errInjected }}
	s, dir := openStore(t, audit.Options{MaxFileBytes: 2048, MaxRetainedFiles: 1, Logger: newLogger(&logs)}, th)
	for range 40 {
		appendOK(t, s, intent("q"))
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), errInjected.Error()) {
		t.Errorf("got logs %q, want an error carrying the removal error", logs.String())
	}
	if st := s.Stats(); st.RetentionFailures == 0 || st.RotatedRecords != 1 {
		t.Errorf("stats %+v: want retention failures counted and one rotated record (the retries of its file write no other)", st)
	}
	gens, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(gens) < 2 {
		t.Errorf("got %d generations, want the untrimmed ones kept", len(gens))
	}
}

func TestFailedRotationFailsTheAppendOnly(t *testing.T) {
	var fail bool
	var mu sync.Mutex
	th := audit.TestHooks{MinFileBytes: 512, Rename: func(a, b string) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errInjected
		}
		return os.Rename(a, b)
	}}
	s, dir := openStore(t, audit.Options{MaxFileBytes: 512}, th)
	appendOK(t, s, intent("q1"))
	appendOK(t, s, intent("q2"))
	mu.Lock()
	fail = true
	mu.Unlock()
	err := s.Append(context.Background(), intent("q3"))
	var we *audit.WriteError
	if !errors.As(err, &we) || we.Op != "rotate" {
		t.Fatalf("got %v, want a WriteError at rotate", err)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	appendOK(t, s, intent("q4"))
	gens, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(gens) != 1 || len(lines(readActive(t, dir))) != 1 {
		t.Errorf("got %d generations and active %q, want 1 and q4 alone", len(gens), readActive(t, dir))
	}
}
