package openbao

import (
	"context"
	"sync"
)

// idLocks serialises this process's mints and deregisters of one
// registration id. AppRole decides between creating and updating a role
// before it locks the role, and a create always draws a new role id: two
// concurrent first writes of one role both create it, and the second
// replaces the role id the first may already have answered with. The
// verbs above already serialise per id; this makes the backend hold the
// rule itself for any caller (the contract suite calls it directly, 64 at
// a time). Two registrars sharing one AppRole mount are not supported (the
// mount must be the registrar's alone, docs/en/openbao.md), so a
// process-local lock is the whole rule.
//
// An entry lives while someone holds or waits for it; a waiter gives up
// when its context ends. Waiting holds no bulkhead slot.
type idLocks struct {
	mu sync.Mutex
	m  map[string]*idLock
}

type idLock struct {
	held chan struct{} // a token while held; cap 1
	refs int           // holders and waiters; guarded by idLocks.mu
}

// lock waits until id is free or ctx ends, and returns the unlock.
func (l *idLocks) lock(ctx context.Context, id string) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*idLock)
	}
	e := l.m[id]
	if e == nil {
		e = &idLock{held: make(chan struct{}, 1)}
		l.m[id] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.held <- struct{}{}:
		return func() { <-e.held; l.drop(id, e) }, nil
	case <-ctx.Done():
		l.drop(id, e)
		return nil, ctx.Err()
	}
}

func (l *idLocks) drop(id string, e *idLock) {
	l.mu.Lock()
	e.refs--
	if e.refs == 0 {
		delete(l.m, id)
	}
	l.mu.Unlock()
}

// size is the number of ids held or waited for (for tests).
func (l *idLocks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
