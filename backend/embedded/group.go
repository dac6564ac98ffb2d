package embedded

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/registrar-otel/registrar-otel/internal/groupcommit"
)

// maxGroup bounds how many operations one write transaction carries, so a
// leader's commit (and the wait of those behind it) stays bounded however
// many callers are in flight.
const maxGroup = 256

// mutation is one write an operation asks for: a Put of val under key in
// bk, or a Delete when val is nil.
type mutation struct {
	bk  *bolt.Bucket
	key []byte
	val []byte
}

// planFunc decides one operation inside the shared write transaction. It
// only reads (it sees the writes of the operations applied before it in
// the same transaction) and returns the writes it wants; its answer goes
// to variables it closes over. An error is that operation's own answer and
// none of its writes is applied. It may be run more than once (see
// commitGroup); only the run that commits is answered.
type planFunc func(bindings, identities *bolt.Bucket) ([]mutation, error)

// groupOp is one caller's operation in the commit queue.
type groupOp = groupcommit.Op[planFunc]

// errApply aborts a transaction whose operation failed half-way through
// applying its writes; commitGroup then re-runs the others without it.
var errApply = errors.New("embedded: applying an operation's writes failed")

// errNoWrites rolls back a transaction in which no operation wrote.
var errNoWrites = errors.New("embedded: no writes")

// The figure that justifies a group commit of our own rather than bbolt's
// DB.Batch (which also shares one transaction among concurrent callers,
// but waits up to 10 ms for company, and re-runs a failed call alone where
// commitGroup re-runs the others): BenchmarkGroupCommit runs Mint's own
// plan for first mints of distinct ids through both, real fsync on the
// test's temporary directory, concurrent callers. Issue 34, eight
// interleaved rounds of -benchtime=1000x on a shared, loaded 2-core
// machine, medians of the per-round ratios (spread in brackets):
//
//   - 8 callers: 1.71x DB.Batch's mints/s (1.15x to 3.41x), 672 against
//     412 mints/s;
//   - 64 callers: 1.38x (0.55x to 3.0x), 3,830 against 2,984 mints/s.
//
// Re-measure with go test -run '^$' -bench GroupCommit -count 1 (repeated,
// so the two interleave) ./backend/embedded/ before changing either.

// update runs plan in a write transaction shared with the other operations
// in flight (group commit, leader/follower, no timer: internal/groupcommit):
// a caller arriving while a commit is in progress queues; when that commit
// ends, the first queued caller leads the next one, carrying everyone queued
// meanwhile, up to maxGroup. A lone caller commits at once. update returns
// after the commit covering plan's writes has been fsynced by bbolt, or with
// plan's own error, or with the transaction's error if the commit failed
// (then none of its operations took effect). b.mu is held shared by the
// caller, so Close waits for every update and the queue is never closed.
func (b *Backend) update(plan planFunc) error {
	op := groupcommit.NewOp(plan)
	b.group.Do(op)
	return op.Err
}

// commitGroup runs every operation of group, in order, in one write
// transaction and sets each one's err. Each operation's outcome is its own:
// a plan error leaves its writes unapplied and touches no other operation;
// a write that fails half-way aborts the transaction (so nothing partial
// survives), fails that operation alone, and the transaction is re-run
// from scratch with the others (nothing of the aborted run was committed
// or answered, so nothing is repeated). A failed commit fails every
// operation it carried: none of them took effect.
func (b *Backend) commitGroup(group []*groupOp) {
	live := group
	for len(live) > 0 {
		failed := -1
		err := b.db.Update(func(tx *bolt.Tx) error {
			bindings, identities, err := buckets(tx)
			if err != nil {
				return err
			}
			wrote := false
			for i, op := range live {
				muts, err := runPlan(op.Item, bindings, identities)
				op.Err = err
				if err != nil || len(muts) == 0 {
					continue
				}
				if err := apply(muts); err != nil {
					op.Err, failed = err, i
					return errApply
				}
				wrote = true
			}
			if !wrote {
				// Every answer was read from committed state: roll back
				// rather than commit (and fsync) an empty transaction.
				return errNoWrites
			}
			return nil
		})
		if errors.Is(err, errNoWrites) {
			return
		}
		if failed >= 0 {
			rest := make([]*groupOp, 0, len(live)-1)
			rest = append(rest, live[:failed]...)
			live = append(rest, live[failed+1:]...)
			continue
		}
		if err != nil {
			for _, op := range live {
				if op.Err == nil {
					op.Err = err
				}
			}
			return
		}
		b.commits.Add(1)
		return
	}
}

func apply(muts []mutation) error {
	for _, m := range muts {
		var err error
		if m.val == nil {
			err = m.bk.Delete(m.key)
		} else {
			err = m.bk.Put(m.key, m.val)
		}
		if err != nil {
			return fmt.Errorf("writing %q: %w", m.key, err)
		}
	}
	return nil
}

// runPlan runs plan, turning a panic into that operation's error: a bug
// in one operation must not take the leader down with everyone queued
// behind it.
func runPlan(plan planFunc, bindings, identities *bolt.Bucket) (muts []mutation, err error) {
	defer func() {
		if r := recover(); r != nil {
			muts, err = nil, fmt.Errorf("embedded: operation panicked: %v", r)
		}
	}()
	return plan(bindings, identities)
}
