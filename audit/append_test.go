//go:build unix

package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func TestAppendWritesAndSyncsOneWholeLine(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	r := intent("q1")
	appendOK(t, s, r)
	if got, want := readActive(t, dir), mustMarshal(t, r); !bytes.Equal(got, want) {
		t.Errorf("file holds %q, want %q", got, want)
	}
	if got := strings.Join(f.ops, ","); got != "write,sync" {
		t.Errorf("got file operations %s, want write,sync", got)
	}
}

func TestAppendStampsAndCanonicalisesTS(t *testing.T) {
	clock := &fixedClock{t: time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.FixedZone("X", 3600))}
	s, dir := openStore(t, audit.Options{Now: clock.Now}, audit.TestHooks{})
	r := intent("q1")
	r.TS = time.Time{}
	appendOK(t, s, r)
	if !r.TS.IsZero() {
		t.Error("Append stamped the caller's record; want it untouched")
	}
	if got := string(readActive(t, dir)); !strings.Contains(got, `"ts":"2026-03-04T04:06:07.891Z"`) {
		t.Errorf("got %s, want ts 2026-03-04T04:06:07.891Z", got)
	}
}

func TestAppendAppliesTheBoundWithoutMutating(t *testing.T) {
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	r := limited(vocab.PredecisionRefusal, 5)
	r.CallerIdentity = overLimitedCaller
	appendOK(t, s, r)
	if r.CallerIdentity != overLimitedCaller || r.Truncated != nil {
		t.Fatal("Append mutated the caller's record")
	}
	got, err := audit.Unmarshal(readActive(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.CallerIdentity) != 511 || got.Truncated[audit.PathCallerIdentity].FullBytes != uint64(len(overLimitedCaller)) {
		t.Errorf("got a %d-byte identity and %+v; want 511 bytes and the original's length %d",
			len(got.CallerIdentity), got.Truncated, len(overLimitedCaller))
	}
}

func TestAppendRefusesInvalidRecordsBeforeTouchingTheFile(t *testing.T) {
	var f faults
	var obs recordingObserver
	s, dir := openStore(t, audit.Options{Observer: &obs}, f.hooks())
	r := outcome("q1", audit.Outcome{Class: vocab.ClassRefused}) // no reason
	err := s.Append(context.Background(), r)
	var pe *audit.PhaseError
	if !errors.As(err, &pe) || pe.Field != "outcome.reason" || !errors.Is(err, audit.ErrInvalidRecord) {
		t.Fatalf("got %v, want a PhaseError on outcome.reason", err)
	}
	if err := s.Append(context.Background(), nil); !errors.Is(err, audit.ErrInvalidRecord) {
		t.Errorf("Append(nil) = %v, want ErrInvalidRecord", err)
	}
	if f.writes != 0 || len(readActive(t, dir)) != 0 {
		t.Errorf("got %d writes, want none", f.writes)
	}
	if len(obs.calls) != 2 || obs.calls[0].phase != audit.PhaseOutcome || obs.calls[0].err == nil {
		t.Errorf("observer got %+v, want two failed calls, the first for phase outcome", obs.calls)
	}
}

type recordingObserver struct {
	mu    sync.Mutex
	calls []observed
}

func (o *recordingObserver) Appended(p audit.Phase, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		panic("negative duration")
	}
	o.calls = append(o.calls, observed{p, err})
}

func TestObserverSeesEveryAppend(t *testing.T) {
	var obs recordingObserver
	s, _ := openStore(t, audit.Options{Observer: &obs}, audit.TestHooks{})
	appendOK(t, s, intent("q1"))
	appendOK(t, s, limited(vocab.Admission, 1))
	want := []observed{{audit.PhaseIntent, nil}, {audit.PhaseLimited, nil}}
	if !slices.Equal(obs.calls, want) {
		t.Errorf("got %+v, want %+v", obs.calls, want)
	}
}

func TestConcurrentAppendsWriteOnlyWholeLines(t *testing.T) {
	const writers, each = 32, 40
	s, dir := openStore(t, audit.Options{}, audit.TestHooks{})
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r := intent(fmt.Sprintf("w%d.%d", w, i))
				r.CallerIdentity = strings.Repeat("x", w*20) // lines of different lengths
				if err := s.Append(context.Background(), r); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	seen := map[string]bool{}
	for i, l := range lines(readActive(t, dir)) {
		r, err := audit.Unmarshal([]byte(l))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if seen[r.RequestID] {
			t.Fatalf("line %d: request_id %s written twice", i+1, r.RequestID)
		}
		seen[r.RequestID] = true
	}
	if len(seen) != writers*each {
		t.Errorf("got %d records, want %d", len(seen), writers*each)
	}
}

func TestFailedWriteLeavesNoPartialLine(t *testing.T) {
	cases := []struct {
		name   string
		inject func(f *faults)
		op     string
	}{
		{"short write", func(f *faults) { f.failWrite, f.partial = true, 37 }, "write"},
		{"write fails before any byte", func(f *faults) { f.failWrite, f.partial = true, 0 }, "write"},
		{"fsync fails", func(f *faults) { f.failSync = true }, "sync"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f faults
			s, dir := openStore(t, audit.Options{}, f.hooks())
			appendOK(t, s, intent("q1"))
			before := readActive(t, dir)

			f.set(tc.inject)
			err := s.Append(context.Background(), intent("q2"))
			var we *audit.WriteError
			if !errors.As(err, &we) || we.Op != tc.op || !errors.Is(err, errInjected) {
				t.Fatalf("got %v, want a WriteError at %s wrapping the fault", err, tc.op)
			}
			if got := readActive(t, dir); !bytes.Equal(got, before) {
				t.Fatalf("after a failed append the file holds %q, want %q", got, before)
			}

			f.reset()
			appendOK(t, s, intent("q3"))
			ls := lines(readActive(t, dir))
			if len(ls) != 2 || !strings.Contains(ls[1], `"request_id":"q3"`) {
				t.Errorf("got lines %q, want q1 then q3", ls)
			}
		})
	}
}

func TestFailedRollbackRefusesFurtherAppends(t *testing.T) {
	var f faults
	s, dir := openStore(t, audit.Options{}, f.hooks())
	appendOK(t, s, intent("q1"))
	f.set(func(f *faults) { f.failWrite, f.partial, f.failTruncate = true, 20, true })
	if err := s.Append(context.Background(), intent("q2")); !errors.Is(err, audit.ErrBroken) || !errors.Is(err, errInjected) {
		t.Fatalf("got %v, want ErrBroken wrapping the fault", err)
	}
	f.reset()
	if err := s.Append(context.Background(), intent("q3")); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("after a failed rollback Append = %v, want ErrBroken (sticky)", err)
	}
	if f.writes != 0 {
		t.Errorf("a broken store wrote %d times, want 0", f.writes)
	}
	s.Close()

	// A restart terminates the torn line and appends after it; the scan
	// reports exactly that line.
	s2, err := audit.Open(audit.Options{Dir: dir, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	appendOK(t, s2, intent("q4"))
	ls := lines(readActive(t, dir))
	if len(ls) != 3 || !strings.HasSuffix(ls[1], "\n") {
		t.Fatalf("got lines %q, want q1, the torn line, q4", ls)
	}
	rep, err := audit.Scan(context.Background(), audit.ScanOptions{Dir: dir, Now: t0.Add(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MalformedRecords != 1 || rep.Malformed[0].Line != 2 {
		t.Errorf("got %d malformed %+v, want 1 at line 2", rep.MalformedRecords, rep.Malformed)
	}
}

func TestTooLargeLineRefusedBeforeTouchingTheFile(t *testing.T) {
	var f faults
	th := f.hooks()
	th.MinFileBytes = 256
	s, dir := openStore(t, audit.Options{MaxFileBytes: 256}, th)
	r := intent("q1")
	r.CallerIdentity = strings.Repeat("x", 400)
	err := s.Append(context.Background(), r)
	var tl *audit.TooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, audit.ErrRecordTooLarge) || tl.MaxFileBytes != 256 || tl.LineBytes <= 256 {
		t.Fatalf("got %v, want a TooLargeError against 256 bytes", err)
	}
	if f.writes != 0 || len(readActive(t, dir)) != 0 {
		t.Errorf("got %d writes, want the file untouched", f.writes)
	}
}

type observed struct {
	phase audit.Phase
	err   error
}

// BenchmarkAppend measures durable appends (write + fsync each) on the
// test's temporary directory, with one writer and with 16 concurrent
// writers (whose lines the store commits in shared fsyncs).
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := openBenchStore(b)
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			var appends atomic.Int64
			if writers == 1 {
				r := intent("bench.1")
				for b.Loop() {
					if err := s.Append(ctx, r); err != nil {
						b.Fatal(err)
					}
					appends.Add(1)
				}
			} else {
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range writers {
					r := intent(fmt.Sprintf("bench.%d", w))
					wg.Go(func() {
						for appends.Add(1) <= int64(b.N) {
							if err := s.Append(ctx, r); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				appends.Store(int64(b.N))
			}
			b.ReportMetric(float64(appends.Load())/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
