package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/registrar-otel/registrar-otel/registrar"
)

func openTest(t *testing.T) *Backend {
	t.Helper()
	b, err := Open(filepath.Join(t.TempDir(), "state"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// inc is an operation adding one to the counter stored under key, so a
// repeated effect would show as a count above one.
func inc(key string) planFunc {
	return func(bindings, _ *bolt.Bucket) ([]mutation, error) {
		var n uint64
		if raw := bindings.Get([]byte(key)); raw != nil {
			n = binary.BigEndian.Uint64(raw)
		}
		return []mutation{{bk: bindings, key: []byte(key), val: binary.BigEndian.AppendUint64(nil, n+1)}}, nil
	}
}

func counter(t *testing.T, b *Backend, key string) uint64 {
	t.Helper()
	var n uint64
	if err := b.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket([]byte(bucketBindings)).Get([]byte(key))
		switch len(raw) {
		case 0:
		case 8:
			n = binary.BigEndian.Uint64(raw)
		default:
			n = 1 << 63 // a half-applied write: never a valid count
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// runGroup holds the leader inside its transaction until every op of rest
// is queued behind it, then lets it go: rest is committed as one group.
// It returns each op's error.
func runGroup(t *testing.T, b *Backend, rest []planFunc) []error {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.update(func(bindings, identities *bolt.Bucket) ([]mutation, error) {
			close(entered)
			<-release
			return inc("leader")(bindings, identities)
		}); err != nil {
			t.Errorf("leader: %v", err)
		}
	})
	<-entered
	errs := make([]error, len(rest))
	for i, p := range rest {
		wg.Go(func() { errs[i] = b.update(p) })
	}
	for {
		if n := b.group.Queued(); n == len(rest) {
			break
		}
		runtime.Gosched() // let the callers reach the queue
	}
	close(release)
	wg.Wait()
	return errs
}

func TestConcurrentOperationsShareOneWriteTransaction(t *testing.T) {
	b := openTest(t)
	var rest []planFunc
	for i := range 40 {
		rest = append(rest, inc(fmt.Sprintf("k%d", i)))
	}
	for _, err := range runGroup(t, b, rest) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c := b.commits.Load(); c != 2 {
		t.Fatalf("41 operations took %d commits, want 2 (the leader's, then one for the 40 queued behind it)", c)
	}
	for i := range 40 {
		if n := counter(t, b, fmt.Sprintf("k%d", i)); n != 1 {
			t.Fatalf("k%d = %d, want 1", i, n)
		}
	}
}

func TestALoneCallerCommitsAtOnce(t *testing.T) {
	b := openTest(t)
	for i := range 3 {
		if err := b.update(inc("solo")); err != nil {
			t.Fatal(err)
		}
		if c := b.commits.Load(); c != uint64(i+1) {
			t.Fatalf("after %d lone operations, %d commits: a lone caller waited for company", i+1, c)
		}
	}
}

func TestAFailingOperationNeitherFailsNorRepeatsAnother(t *testing.T) {
	errPlan := errors.New("planned refusal")
	bad := []struct {
		name string
		plan planFunc
		want func(error) bool
	}{
		{"plan error", func(*bolt.Bucket, *bolt.Bucket) ([]mutation, error) { return nil, errPlan },
			func(err error) bool { return errors.Is(err, errPlan) }},
		{"plan panics", func(*bolt.Bucket, *bolt.Bucket) ([]mutation, error) { panic("a bug in one operation") },
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "a bug in one operation") }},
		// A write bbolt refuses half-way: the first put applies, the
		// second (an empty key) fails, so the transaction must be thrown
		// away and the others re-run.
		{"write fails half-way", func(bindings, _ *bolt.Bucket) ([]mutation, error) {
			return []mutation{{bk: bindings, key: []byte("partial"), val: []byte{1}}, {bk: bindings, key: nil, val: []byte{1}}}, nil
		}, func(err error) bool { return err != nil }},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			b := openTest(t)
			errs := runGroup(t, b, []planFunc{inc("a"), inc("b"), tc.plan, inc("c"), inc("a")})
			if errs[0] != nil || errs[1] != nil || errs[3] != nil || errs[4] != nil || !tc.want(errs[2]) {
				t.Fatalf("errors %v: want only the third to fail", errs)
			}
			for k, want := range map[string]uint64{"a": 2, "b": 1, "c": 1, "leader": 1, "partial": 0} {
				if n := counter(t, b, k); n != want {
					t.Fatalf("%s = %d, want %d: an effect was lost, repeated or left half-done", k, n, want)
				}
			}
		})
	}
}

// TestGroupedMintsAreDurableWhenAnswered: every answered mint of a
// concurrent wave is in the database when it is opened again. (That the
// commit is fsynced before the answer is bbolt's Update contract; the
// daemon's kill -9 test checks it through a real crash.)
func TestGroupedMintsAreDurableWhenAnswered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			op := registrar.MintOp{RegistrationID: fmt.Sprintf("h%d-review-001", i), Host: fmt.Sprintf("h%d", i),
				Spec: registrar.Spec{Component: "review", ServiceName: "review"}, WrapTTL: time.Minute, Now: time.Now()}
			if st, _, err := b.Mint(context.Background(), op); err != nil || st != registrar.MintCreated {
				t.Errorf("mint %d: %v %v", i, st, err)
			}
		})
	}
	wg.Wait()
	b.Close()
	b2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	for i := range n {
		if _, ok, err := b2.Binding(fmt.Sprintf("h%d-review-001", i)); err != nil || !ok {
			t.Fatalf("mint %d answered but not in the reopened database: %v %v", i, ok, err)
		}
	}
}

// ConcurrentFirstMints runs b.N first mints of distinct ids (op with
// RegistrationID web-collector-<n>) by callers concurrent callers of mint,
// and reports mints/s. The mint benchmarks of the external tests use it
// too.
func ConcurrentFirstMints(b *testing.B, callers int, op registrar.MintOp, mint func(registrar.MintOp) (registrar.MintStatus, error)) {
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				op := op
				op.RegistrationID = fmt.Sprintf("web-collector-%d", n)
				if st, err := mint(op); err != nil || st != registrar.MintCreated {
					b.Errorf("Mint: got %d, %v", st, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "mints/s")
}

// BenchmarkGroupCommit runs the same workload, first mints of distinct ids
// (Mint's own plan) by concurrent callers, each returning after the fsync
// covering its writes on the test's disk, through the group commit
// (update) and through bbolt's own DB.Batch with its defaults (up to 1000
// calls or 10 ms per transaction). Run it with -count so the two
// interleave, and read them as a ratio: the figure beside group.go.
func BenchmarkGroupCommit(b *testing.B) {
	viaBatch := func(be *Backend, plan planFunc) error {
		return be.db.Batch(func(tx *bolt.Tx) error {
			bindings, identities, err := buckets(tx)
			if err != nil {
				return err
			}
			muts, err := runPlan(plan, bindings, identities)
			if err != nil {
				return err
			}
			return apply(muts)
		})
	}
	for _, c := range []int{8, 64} {
		for _, path := range []struct {
			name   string
			commit func(*Backend, planFunc) error
		}{{"group", (*Backend).update}, {"bbolt-Batch", viaBatch}} {
			b.Run(fmt.Sprintf("c=%d/commit=%s", c, path.name), func(b *testing.B) {
				be, err := Open(filepath.Join(b.TempDir(), "state"), Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer be.Close()
				op := registrar.MintOp{Host: "web-1", Spec: registrar.Spec{Component: "collector", ServiceName: "web", Reload: "sighup"},
					WrapTTL: time.Minute, Now: time.Unix(1_800_000_000, 0)}
				ConcurrentFirstMints(b, c, op, func(op registrar.MintOp) (registrar.MintStatus, error) {
					var (
						st  registrar.MintStatus
						mat registrar.Material
					)
					err := path.commit(be, be.mintPlan(op, &st, &mat))
					return st, err
				})
			})
		}
	}
}
