//go:build unix

package audit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/limiter"
)

func limitedN(n int) []*audit.Record {
	recs := make([]*audit.Record, n)
	for i := range recs {
		r := limited(limiter.Bucket(i%2), uint64(1+i))
		r.CallerIdentity = fmt.Sprintf("spiffe://fleet/host-%04d", i)
		recs[i] = r
	}
	return recs
}

func TestAppendBatchIsOneWriteAndOneFsync(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	f.reset()
	errs := s.AppendBatch(context.Background(), limitedN(256))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if f.writes != 1 || f.syncs != 1 {
		t.Fatalf("256 records cost %d writes and %d fsyncs, want 1 and 1", f.writes, f.syncs)
	}
	ls := lines(readActive(t, dir))
	if len(ls) != 256 {
		t.Fatalf("%d lines, want 256", len(ls))
	}
	for i, l := range ls {
		if !strings.HasSuffix(l, "}\n") || !strings.Contains(l, fmt.Sprintf(`"caller_identity":"spiffe://fleet/host-%04d"`, i)) {
			t.Fatalf("line %d is %q, want record %d whole", i, l, i)
		}
	}
}

func TestAppendBatchBoundsEachRecordAndRefusesOnlyTheBadOne(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	recs := limitedN(3)
	recs[0].CallerIdentity = strings.Repeat("é", 400) // 800 bytes: cut to 512
	bad := *recs[1]
	bad.Count = 0 // a counted record must count at least one
	recs[1] = &bad
	errs := s.AppendBatch(context.Background(), append(recs, nil))
	var pe *audit.PhaseError
	var fe *audit.FieldError
	if errs[0] != nil || errs[2] != nil || !(errors.As(errs[1], &pe) || errors.As(errs[1], &fe)) || !errors.As(errs[3], &fe) {
		t.Fatalf("errors %v, want nil, a validation error, nil, a nil-record error", errs)
	}
	ls := lines(readActive(t, dir))
	if len(ls) != 2 || !strings.Contains(ls[0], `"truncated":{"caller_identity"`) || !strings.Contains(ls[1], "host-0002") {
		t.Fatalf("lines %q, want the bounded record 0 and record 2", ls)
	}
}

func TestAppendBatchFailureFailsEveryRecordAndLeavesWholeLines(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	appendOK(t, s, intent("q1"))
	before := readActive(t, dir)
	f.set(func(f *faults) { f.failSync = true })
	errs := s.AppendBatch(context.Background(), limitedN(10))
	for i, err := range errs {
		var we *audit.WriteError
		if !errors.As(err, &we) || !errors.Is(err, errInjected) {
			t.Fatalf("record %d: %v, want the batch's WriteError", i, err)
		}
	}
	if got := readActive(t, dir); string(got) != string(before) {
		t.Fatalf("after a failed batch the file holds %q, want %q", got, before)
	}
	// The capacity probe sees what Append's failures show it: each record
	// counted, the store unwritable until a write succeeds again.
	if st := s.Stats(); !st.LastAppendFailed || st.AppendFailures != 10 {
		t.Fatalf("after a failed batch of 10: stats %+v, want 10 failures and the last failed", st)
	}
	f.reset()
	if errs := s.AppendBatch(context.Background(), limitedN(2)); errs[0] != nil || errs[1] != nil {
		t.Fatalf("batch after recovery: %v", errs)
	}
	if st := s.Stats(); st.LastAppendFailed || st.AppendFailures != 10 {
		t.Fatalf("after a good batch: stats %+v, want the unwritable state cleared", st)
	}
	if n := len(lines(readActive(t, dir))); n != 3 {
		t.Fatalf("%d lines, want 3", n)
	}
}

func TestAppendBatchAcrossARotationCostsTwoFsyncs(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{MaxFileBytes: 16 << 10}, audit.TestHooks{WrapFile: f.hooks().WrapFile, MinFileBytes: 1 << 10})
	line := len(mustMarshal(t, limitedN(1)[0]))
	n := (16<<10)/line + 10 // more than one file holds
	f.reset()
	for i, err := range s.AppendBatch(context.Background(), limitedN(n)) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if f.syncs != 2 {
		t.Fatalf("a batch crossing one rotation cost %d fsyncs, want 2", f.syncs)
	}
	gens, _ := filepath.Glob(filepath.Join(dir, "registrar-audit-*.jsonl"))
	if len(gens) != 1 {
		t.Fatalf("generations %v, want one", gens)
	}
}

func TestAppendBatchAfterCloseIsErrClosed(t *testing.T) {
	s, _ := openStore(t, audit.Options{}, audit.TestHooks{})
	s.Close()
	for _, err := range s.AppendBatch(context.Background(), limitedN(2)) {
		if !errors.Is(err, audit.ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", err)
		}
	}
	if errs := s.AppendBatch(context.Background(), nil); errs != nil {
		t.Fatalf("empty batch: %v", errs)
	}
}

type countingObserver struct {
	mu sync.Mutex
	n  map[audit.Phase]int
}

func (o *countingObserver) Appended(p audit.Phase, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.n[p]++
	}
}

func TestAppendBatchConcurrentWithAppendsLosesNothing(t *testing.T) {
	obs := &countingObserver{n: map[audit.Phase]int{}}
	s, dir := openStore(t, audit.Options{Observer: obs}, audit.TestHooks{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20 {
				appendOK(t, s, intent(fmt.Sprintf("g%d.%d", g, i)))
			}
		})
		wg.Go(func() {
			for range 5 {
				for _, err := range s.AppendBatch(context.Background(), limitedN(7)) {
					if err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	ls := lines(readActive(t, dir))
	if len(ls) != 4*20+4*5*7 {
		t.Fatalf("%d lines, want %d", len(ls), 4*20+4*5*7)
	}
	for _, l := range ls {
		if !strings.HasPrefix(l, `{"record_version":1,`) || !strings.HasSuffix(l, "}\n") {
			t.Fatalf("line %q is not whole", l)
		}
	}
	if obs.n[audit.PhaseIntent] != 80 || obs.n[audit.PhaseLimited] != 140 {
		t.Fatalf("observer saw %v, want 80 intents and 140 limited", obs.n)
	}
}

// A batch is written only where the configured path names the active file:
// after the file is renamed away (a logrotate rule), the batch goes to a
// fresh active file and the renamed one keeps only what it had.
func TestAppendBatchAfterTheActiveFileIsRenamedGoesToAFreshOne(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	appendOK(t, s, intent("before"))
	moved := filepath.Join(dir, "moved.jsonl")
	must(t, os.Rename(filepath.Join(dir, audit.ActiveFileName), moved))
	for i, err := range s.AppendBatch(context.Background(), limitedN(3)) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if n := len(lines(readActive(t, dir))); n != 3 {
		t.Fatalf("the fresh active file holds %d lines, want the batch's 3", n)
	}
	b, err := os.ReadFile(moved)
	must(t, err)
	if n := len(lines(b)); n != 1 {
		t.Fatalf("the renamed file holds %d lines, want only the record before the rename", n)
	}
	if got := s.Stats().Reopens[audit.ReopenFileRenamed]; got != 1 {
		t.Fatalf("reopens for a rename: %d, want 1", got)
	}
}
