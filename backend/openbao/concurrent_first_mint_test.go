package openbao_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/backend/openbao"
	"github.com/registrar-otel/registrar-otel/registrar"
)

// AppRole decides between creating and updating a role before it locks
// the role, and every create draws a new role id: two role writes of one
// id in flight at once can both create it, and one caller is answered with
// a role id the server no longer keeps (seen as "got 2 distinct role ids,
// want 1" in the contract suite under load). The backend therefore keeps
// one mint of an id in flight at a time. The server's window is too narrow
// to hit on demand, so the proxy widens it: it holds the first role write
// of each id until a second role write of that id arrives (the race) or
// holdFor passes, and the test counts the second writes that arrived while
// the first was held. 8 callers mint each of 16 ids at once.
func TestConcurrentMintsOfOneIDNeverHaveTwoRoleWritesInFlight(t *testing.T) {
	e := newEnv(t, envOptions{})
	const ids, callers = 16, 8
	const holdFor = 300 * time.Millisecond

	var mu sync.Mutex
	held := map[string]chan struct{}{} // role path → open while its first write is held
	overlaps := map[string]int{}
	e.px.setHook(func(_ int, r *http.Request) (action, <-chan struct{}) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/auth/approle/role/")
		if !ok || strings.Contains(rest, "/") || (r.Method != http.MethodPut && r.Method != http.MethodPost) {
			return forward, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if ch, seen := held[rest]; seen {
			select {
			case <-ch:
			default:
				overlaps[rest]++
				close(ch)
			}
			return forward, nil
		}
		ch := make(chan struct{})
		held[rest] = ch
		time.AfterFunc(holdFor, func() {
			mu.Lock()
			defer mu.Unlock()
			select {
			case <-ch:
			default:
				close(ch)
			}
		})
		return forwardAfter, ch
	})
	go func() { // the proxy announces each held request; nobody else reads them
		for range e.px.holding {
		}
	}()

	type answer struct {
		status registrar.MintStatus
		roleID string
		err    error
	}
	answers := make([][]answer, ids)
	var wg sync.WaitGroup
	for i := range ids {
		answers[i] = make([]answer, callers)
		id := fmt.Sprintf("race-%02d", i)
		for c := range callers {
			wg.Go(func() {
				st, mat, err := e.b.Mint(context.Background(), mintOp(id, "host-a", "review"))
				answers[i][c] = answer{st, mat.RoleID, err}
			})
		}
	}
	wg.Wait()
	e.px.setHook(nil)

	mu.Lock()
	for name, n := range overlaps {
		t.Errorf("%s: %d role writes reached the server while the first was still in flight, want 0", name, n)
	}
	mu.Unlock()
	for i := range ids {
		id := fmt.Sprintf("race-%02d", i)
		if _, ok := held[openbao.RoleName(id)]; !ok {
			t.Errorf("%s: the proxy saw no role write (has the role path changed?)", id)
		}
		kept := e.state(t, id).roleID
		first := 0
		for c, a := range answers[i] {
			if a.err != nil {
				t.Errorf("%s caller %d: %v", id, c, a.err)
				continue
			}
			if a.status == registrar.MintCreated {
				first++
			}
			if a.roleID != kept {
				t.Errorf("%s caller %d (%v): answered role id %q, the server keeps %q", id, c, a.status, a.roleID, kept)
			}
		}
		if first != 1 {
			t.Errorf("%s: %d first mints among %d concurrent callers, want 1", id, first, callers)
		}
	}
}
