package groupcommit_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/registrar-otel/registrar-otel/internal/groupcommit"
)

// recorder is a commit function that records the batches it is given and
// answers each operation with an error naming its item.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	hold    chan struct{} // when not nil, the first commit waits for it
	entered chan struct{}
}

func (r *recorder) commit(batch []*groupcommit.Op[int]) {
	r.mu.Lock()
	first := len(r.batches) == 0
	items := make([]int, len(batch))
	for i, op := range batch {
		items[i] = op.Item
		op.Err = fmt.Errorf("item %d", op.Item)
	}
	r.batches = append(r.batches, items)
	r.mu.Unlock()
	if first && r.hold != nil {
		close(r.entered)
		<-r.hold
	}
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n []int
	for _, b := range r.batches {
		n = append(n, len(b))
	}
	return n
}

func checkAnswer(t *testing.T, op *groupcommit.Op[int]) {
	t.Helper()
	if want := fmt.Sprintf("item %d", op.Item); op.Err == nil || op.Err.Error() != want {
		t.Errorf("op %d: got %v, want %q", op.Item, op.Err, want)
	}
}

func TestALoneCallerCommitsAtOnce(t *testing.T) {
	r := &recorder{}
	q := groupcommit.New(0, r.commit)
	for i := range 3 {
		op := groupcommit.NewOp(i)
		if !q.Do(op) {
			t.Fatal("Do on an open queue: got false")
		}
		checkAnswer(t, op)
	}
	if got := r.sizes(); len(got) != 3 {
		t.Fatalf("three lone calls took commits %v, want three of one", got)
	}
}

// held runs a leader whose commit blocks until every one of rest is queued
// behind it, then releases it, and returns rest's operations once all are
// answered.
func held(t *testing.T, max, rest int) (*recorder, []*groupcommit.Op[int]) {
	t.Helper()
	r := &recorder{hold: make(chan struct{}), entered: make(chan struct{})}
	q := groupcommit.New(max, r.commit)
	var wg sync.WaitGroup
	leader := groupcommit.NewOp(-1)
	wg.Go(func() { q.Do(leader) })
	<-r.entered
	ops := make([]*groupcommit.Op[int], rest)
	for i := range ops {
		ops[i] = groupcommit.NewOp(i)
		wg.Go(func() { q.Do(ops[i]) })
	}
	for q.Queued() != rest {
		runtime.Gosched() // let the callers reach the queue
	}
	close(r.hold)
	wg.Wait()
	checkAnswer(t, leader)
	for _, op := range ops {
		checkAnswer(t, op)
	}
	return r, ops
}

func TestCallersQueuedBehindALeaderShareTheNextCommit(t *testing.T) {
	r, _ := held(t, 0, 40)
	if got := r.sizes(); len(got) != 2 || got[0] != 1 || got[1] != 40 {
		t.Fatalf("commits of %v, want [1 40] (the leader's, then one for the 40 queued behind it)", got)
	}
}

func TestTheBoundSplitsAQueueIntoCommits(t *testing.T) {
	r, _ := held(t, 16, 40)
	if got := fmt.Sprint(r.sizes()); got != "[1 16 16 8]" {
		t.Fatalf("commits of %s, want [1 16 16 8]", got)
	}
	seen := make(map[int]int)
	for _, b := range r.batches[1:] {
		for _, item := range b {
			seen[item]++
		}
	}
	for i := range 40 {
		if seen[i] != 1 {
			t.Fatalf("op %d committed %d times, want once", i, seen[i])
		}
	}
}

func TestOpsQueuedTogetherAreAnsweredTogether(t *testing.T) {
	for _, max := range []int{0, 3} {
		t.Run(fmt.Sprintf("max=%d", max), func(t *testing.T) {
			r := &recorder{}
			q := groupcommit.New(max, r.commit)
			ops := make([]*groupcommit.Op[int], 8)
			for i := range ops {
				ops[i] = groupcommit.NewOp(i)
			}
			if !q.Do(ops...) {
				t.Fatal("Do on an open queue: got false")
			}
			for _, op := range ops {
				checkAnswer(t, op)
			}
			want := "[8]"
			if max == 3 {
				want = "[3 3 2]"
			}
			if got := fmt.Sprint(r.sizes()); got != want {
				t.Fatalf("commits of %s, want %s", got, want)
			}
		})
	}
}

func TestAfterCloseNothingIsQueued(t *testing.T) {
	r := &recorder{}
	q := groupcommit.New(0, r.commit)
	if q.Close() {
		t.Fatal("first Close: got already closed")
	}
	if !q.Close() {
		t.Fatal("second Close: got not already closed")
	}
	op := groupcommit.NewOp(1)
	if q.Do(op) {
		t.Fatal("Do after Close: got true")
	}
	if op.Err != nil || len(r.sizes()) != 0 {
		t.Fatalf("Do after Close committed: err %v, commits %v", op.Err, r.sizes())
	}
}

func TestCloseWaitsForTheCommitInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		committed := errors.New("committed")
		q := groupcommit.New(0, func(batch []*groupcommit.Op[int]) {
			<-release
			batch[0].Err = committed
		})
		op := groupcommit.NewOp(1)
		done := make(chan struct{})
		go func() { q.Do(op); close(done) }()
		synctest.Wait() // the leader is inside its commit
		closed := make(chan struct{})
		go func() { q.Close(); close(closed) }()
		synctest.Wait() // Close is waiting, or has returned
		select {
		case <-closed:
			t.Fatal("Close returned while a commit was in progress")
		default:
		}
		close(release)
		<-closed
		<-done
		if op.Err != committed {
			t.Fatalf("the op in progress: got %v, want its commit's answer", op.Err)
		}
	})
}

func TestIdleRunsBetweenCommits(t *testing.T) {
	var inCommit bool
	q := groupcommit.New(0, func(batch []*groupcommit.Op[int]) {
		inCommit = true
		runtime.Gosched()
		inCommit = false
	})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { q.Do(groupcommit.NewOp(i)) })
	}
	for range 8 {
		q.Idle(func() {
			if inCommit {
				t.Error("Idle ran during a commit")
			}
		})
	}
	wg.Wait()
}
