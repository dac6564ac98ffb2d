//go:build unix

package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/audit"
	"github.com/registrar-otel/registrar-otel/coalesce"
	"github.com/registrar-otel/registrar-otel/internal/testing/registrartest"
	"github.com/registrar-otel/registrar-otel/limiter"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/vocab"
)

func limitedN(n int) []*audit.Record {
	recs := make([]*audit.Record, n)
	for i := range recs {
		r := limited(vocab.Bucket(i%2), uint64(1+i))
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

// countedFailing fails every write that carries a counted ("limited")
// record while on is set, and passes every other write through.
type countedFailing struct {
	audit.File
	on     *atomic.Bool
	failed *atomic.Int64
}

func (f countedFailing) Write(p []byte) (int, error) {
	if f.on.Load() && bytes.Contains(p, []byte(`"phase":"limited"`)) {
		f.failed.Add(1)
		return 0, errors.New("injected: counted write fails")
	}
	return f.File.Write(p)
}

// TestAFailedCountedWriteRefusesNoInvocation runs the verbs on one real
// store, as the daemon does (intent and outcome records by Append, counted
// records by the coalescer's AppendBatch), while every counted write
// fails: each failed tick drops its counted records and is logged, and
// no invocation is refused for it. The flood's answers stay the real
// refusals, and well-formed mints and deregisters between the failing
// ticks are admitted and recorded.
func TestAFailedCountedWriteRefusesNoInvocation(t *testing.T) {
	var on atomic.Bool
	var failed atomic.Int64
	store, err := audit.OpenWithHooks(audit.Options{Dir: filepath.Join(t.TempDir(), "audit")}, audit.TestHooks{
		WrapFile: func(inner audit.File) audit.File { return countedFailing{inner, &on, &failed} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	co, err := coalesce.New(coalesce.Options{Store: store, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{
		PredecisionRefusal: limiter.BucketConfig{Burst: 2, RefillInterval: time.Hour},
		Admission:          limiter.BucketConfig{Burst: 100, RefillInterval: time.Hour},
	}, co)
	if err != nil {
		t.Fatal(err)
	}
	v, err := registrar.New(registrar.Config{
		Components:        map[string]vocab.Multiplicity{"review": vocab.ManyPerHost},
		MaxWrapTTLSeconds: 1800,
	}, registrar.Deps{Limiter: lim, Audit: store, Backend: registrartest.NewBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	on.Store(true)
	ctx := context.Background()
	mint := func(service string, instance uint32) (registrar.MintResult, error) {
		return v.Mint(ctx, registrar.MintRequest{
			CallerIdentity: "unix-peer:uid=1000", ServiceName: service, Host: "h1", Instance: instance,
			Component: "review", WrapTTLSeconds: 300,
			Spec: registrar.Spec{Component: "review", ServiceName: service, Reload: "systemctl reload review"},
		})
	}
	tick := time.Now()
	for round := range 5 {
		for range 20 {
			_, err := mint("BAD", 1)
			var ref *registrar.RefusedError
			if !errors.As(err, &ref) {
				t.Fatalf("round %d: flood mint answered %v, want its real refusal", round, err)
			}
		}
		res, err := mint("review", uint32(10+round))
		if err != nil || res.Outcome != registrar.FirstMint {
			t.Fatalf("round %d, after %d failed counted writes: mint %+v, %v; want first_mint", round, failed.Load(), res, err)
		}
		if _, err := v.Deregister(ctx, registrar.DeregisterRequest{
			CallerIdentity: "unix-peer:uid=1000", ServiceName: "review", Host: "h1", Instance: uint32(10 + round), Component: "review",
		}); err != nil {
			t.Fatalf("round %d, after %d failed counted writes: deregister %v, want removed", round, failed.Load(), err)
		}
		tick = tick.Add(2 * time.Second)
		co.Tick(ctx, tick) // the counted write fails
	}
	if failed.Load() < 5 {
		t.Fatalf("%d counted writes failed, want one per tick (the fault was not exercised)", failed.Load())
	}
}

// floodWindows opens n windows in s, one per identity, at clk.
func floodWindows(s *coalesce.Sink, n int) {
	for i := range n {
		s.Limited(context.Background(), limiter.Event{Identity: fmt.Sprintf("spiffe://fleet/host-%05d", i), Verb: vocab.Verb(i % 2), Bucket: vocab.Bucket(i / 2 % 2)})
	}
}

// TestTickOf256DueWindowsCostsOneFsync counts fsyncs through the store's
// file seam: the tick closing 256 due windows, and the shutdown flush of
// 256 open ones, each cost one fsync (two when the batch crosses a
// rotation), not 256.
func TestTickOf256DueWindowsCostsOneFsync(t *testing.T) {
	for _, close := range []string{"tick", "shutdown flush"} {
		t.Run(close, func(t *testing.T) {
			var f faults
			store, dir := openStore(t, audit.Options{}, f.hooks())
			start := time.Now()
			s, err := coalesce.New(coalesce.Options{Store: store, Window: time.Minute, Now: func() time.Time { return start }})
			if err != nil {
				t.Fatal(err)
			}
			floodWindows(s, 256)
			f.reset()
			if close == "tick" {
				s.Tick(context.Background(), start.Add(time.Minute))
			} else {
				s.Flush(context.Background(), start.Add(time.Second))
			}
			if f.syncs > 2 || f.syncs < 1 {
				t.Fatalf("%s of 256 windows cost %d fsyncs, want at most 2", close, f.syncs)
			}
			if n := len(lines(readActive(t, dir))); n != 256 {
				t.Fatalf("%d lines, want 256", n)
			}
			if st := s.Stats(); st.Records[0]+st.Records[1] != 256 || st.WriteFailures != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// BenchmarkTickOf256DueWindows measures closing 256 due windows into a
// real store on the test's disk: the batch the tick now writes, against
// the previous behaviour of one durable Append per window, in the same run.
func BenchmarkTickOf256DueWindows(b *testing.B) {
	b.Run("batch", func(b *testing.B) {
		store := openBenchStore(b)
		defer store.Close()
		start := time.Now()
		s, err := coalesce.New(coalesce.Options{Store: store, Window: time.Minute, Now: func() time.Time { return start }})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			floodWindows(s, 256)
			b.StartTimer()
			s.Tick(context.Background(), start.Add(time.Minute))
		}
	})
	b.Run("append-each", func(b *testing.B) {
		store := openBenchStore(b)
		defer store.Close()
		recs := limitedN(256)
		b.ReportAllocs()
		for b.Loop() {
			for _, r := range recs {
				if err := store.Append(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
