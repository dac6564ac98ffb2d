package openbao

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestAnIDLockExcludesOnlyItsOwnID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l idLocks
		ctx := context.Background()
		unlockA, err := l.lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		// Another id is not held up.
		unlockB, err := l.lock(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		unlockB()

		got := make(chan struct{})
		go func() {
			u, err := l.lock(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			close(got)
			u()
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a second lock of one id was granted while the first was held")
		default:
		}
		unlockA()
		synctest.Wait()
		select {
		case <-got:
		default:
			t.Fatal("the waiter did not get the lock once it was released")
		}
		if n := l.size(); n != 0 {
			t.Fatalf("%d entries left after every holder unlocked, want 0", n)
		}
	})
}

func TestAWaiterForAnIDLockGivesUpWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l idLocks
		unlock, err := l.lock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := l.lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lock while held = %v, want the context's deadline", err)
		}
		if n := l.size(); n != 1 {
			t.Fatalf("%d entries while one holder remains, want 1", n)
		}
		unlock()
		if n := l.size(); n != 0 {
			t.Fatalf("%d entries after the holder unlocked, want 0 (a given-up waiter must not pin its entry)", n)
		}
	})
}
