// Package groupcommit is the leader/follower group commit shared by the
// audit store (one write and one fsync for the lines of concurrent
// appenders) and the embedded backend (one bbolt write transaction for
// concurrent operations).
//
// There is no timer: a caller arriving while a commit is in progress
// queues; when that commit ends, the first queued caller leads the next
// one, carrying everyone queued meanwhile (up to a bound). A lone caller
// commits at once. Every caller returns only after the commit that carried
// its operation.
package groupcommit

import "sync"

// Op is one caller's operation in the queue: Item is what the commit
// function carries, and Err is the result it sets for this operation. An
// Op is used for one Do.
type Op[T any] struct {
	Item T
	Err  error
	done chan verdict
}

// verdict is what a waiting caller receives: its result (already in its
// Op's Err), or the order to lead the next commit.
type verdict struct {
	lead bool
}

// NewOp returns an operation carrying item, ready for Do.
func NewOp[T any](item T) *Op[T] {
	return &Op[T]{Item: item, done: make(chan verdict, 1)}
}

// Queue is a group commit queue. It is safe for concurrent use; the
// commit function is only ever run by one leader at a time.
type Queue[T any] struct {
	commit func(batch []*Op[T])
	max    int

	mu      sync.Mutex
	idle    sync.Cond // broadcast when leading turns false
	queue   []*Op[T]  // operations waiting for the next commit
	spare   []*Op[T]
	leading bool // a leader is committing
	closed  bool
}

// New returns a queue whose leaders call commit with the operations they
// carry, in queue order; commit must set each one's Err. max bounds how
// many operations one commit carries (the rest wait for the next one); 0
// means no bound.
func New[T any](max int, commit func(batch []*Op[T])) *Queue[T] {
	q := &Queue[T]{commit: commit, max: max}
	q.idle.L = &q.mu
	return q
}

// Do queues ops together, so that they are carried by as few commits as
// the bound allows, and returns once each has its Err set. It leads the
// commit itself when no leader is active, or when leadership is handed to
// one of ops. After Close it queues nothing and returns false.
func (q *Queue[T]) Do(ops ...*Op[T]) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.queue = append(q.queue, ops...)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if lead {
		// Ours are at the head of the queue: the commit we lead carries
		// the first of them, and any the bound leaves are handed on.
		q.lead(ops[0])
		for _, op := range ops[1:] {
			if v := <-op.done; v.lead {
				q.lead(op)
			}
		}
		return true
	}
	for _, op := range ops {
		if v := <-op.done; v.lead {
			// Leadership passes to the first queued operation; ours were
			// queued together, so this commit covers every one of ops not
			// yet answered (the bound permitting).
			q.lead(op)
		}
	}
	return true
}

// lead commits up to max queued operations (self first among them),
// answers the others, and hands leadership to the first one still queued.
func (q *Queue[T]) lead(self *Op[T]) {
	q.mu.Lock()
	var batch []*Op[T]
	if n := len(q.queue); q.max == 0 || n <= q.max {
		batch = q.queue
		q.queue = q.spare[:0]
	} else {
		batch = append(q.spare[:0], q.queue[:q.max]...)
		q.queue = append(q.queue[:0], q.queue[q.max:]...)
	}
	q.mu.Unlock()

	q.commit(batch)

	q.mu.Lock()
	for _, op := range batch {
		if op != self {
			op.done <- verdict{}
		}
	}
	clear(batch)
	q.spare = batch[:0]
	if len(q.queue) > 0 {
		q.queue[0].done <- verdict{lead: true}
	} else {
		q.leading = false
		q.idle.Broadcast()
	}
	q.mu.Unlock()
}

// Close makes every later Do return false and waits for the commit in
// progress, if any, and those queued behind it. It reports whether the
// queue was already closed.
func (q *Queue[T]) Close() (already bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return true
	}
	q.closed = true
	for q.leading {
		q.idle.Wait()
	}
	return false
}

// Idle runs f once no commit is in progress, with new commits held off
// until it returns.
func (q *Queue[T]) Idle(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.leading {
		q.idle.Wait()
	}
	f()
}

// Queued returns how many operations wait for the next commit.
func (q *Queue[T]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
