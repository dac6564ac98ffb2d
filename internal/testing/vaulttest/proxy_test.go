package vaulttest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/registrar-otel/registrar-otel/internal/testing/vaulttest"
)

// target is a loopback server that counts what reaches it and answers
// 200 "ok <path>".
type target struct {
	mu   sync.Mutex
	seen []string
}

func newTarget(t *testing.T) (*target, string) {
	tg := &target{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.seen = append(tg.seen, r.Method+" "+r.URL.Path)
		tg.mu.Unlock()
		io.WriteString(w, "ok "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return tg, srv.URL
}

func (tg *target) reached() []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return slices.Clone(tg.seen)
}

// do sends one request through c and returns the status (0 with the error
// when there was no answer) and the body.
func do(t *testing.T, c *http.Client, method, url string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func TestTheProxyPassesAndRecordsWhatNoRuleSelects(t *testing.T) {
	tg, url := newTarget(t)
	p := vaulttest.NewProxy(t, url)
	for _, path := range []string{"/v1/a", "/v1/b"} {
		if code, body, err := do(t, http.DefaultClient, "GET", p.URL+path); err != nil || code != 200 || body != "ok "+path {
			t.Errorf("GET %s: %d %q %v, want 200 from the target", path, code, body, err)
		}
	}
	want := []vaulttest.Request{{Method: "GET", Path: "/v1/a"}, {Method: "GET", Path: "/v1/b"}}
	if got := p.Requests(); !slices.Equal(got, want) || p.Count() != 2 {
		t.Errorf("recorded %v, want %v", got, want)
	}
	if got := tg.reached(); len(got) != 2 {
		t.Errorf("the target saw %v, want both", got)
	}
}

// Nth selects only the nth request matching method and path pattern; 500
// without forwarding never reaches the target, 500 after forwarding does.
func TestTheProxyFailsTheNthMatchingRequestWith500AppliedOrNot(t *testing.T) {
	tg, url := newTarget(t)
	p := vaulttest.NewProxy(t, url)
	in := p.Add(vaulttest.Rule{Method: "PUT", Path: "/v1/kv/*", Nth: 2, Fault: vaulttest.Fail500})
	var codes []int
	for _, r := range [][2]string{{"PUT", "/v1/kv/x"}, {"GET", "/v1/kv/x"}, {"PUT", "/v1/other"}, {"PUT", "/v1/kv/y"}, {"PUT", "/v1/kv/z"}} {
		code, _, err := do(t, http.DefaultClient, r[0], p.URL+r[1])
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	if want := []int{200, 200, 200, 500, 200}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v (only the second PUT under /v1/kv/ fails)", codes, want)
	}
	if got := <-in.Fired(); got != (vaulttest.Request{Method: "PUT", Path: "/v1/kv/y"}) {
		t.Errorf("fired on %v, want PUT /v1/kv/y", got)
	}
	if got := tg.reached(); slices.Contains(got, "PUT /v1/kv/y") || len(got) != 4 {
		t.Errorf("the target saw %v: the failed request must not reach it", got)
	}

	p.Reset()
	p.Add(vaulttest.Rule{Path: "/v1/applied", Fault: vaulttest.Fail500Applied})
	if code, _, _ := do(t, http.DefaultClient, "PUT", p.URL+"/v1/applied"); code != 500 {
		t.Errorf("applied 500: status %d", code)
	}
	if got := tg.reached(); !slices.Contains(got, "PUT /v1/applied") {
		t.Errorf("the target saw %v: an applied 500 must reach it", got)
	}
}

// A held answer ends when the client gives up (its timeout), and the
// request was applied; Release sends a held answer at once.
func TestTheProxyHoldsAnAnswerUntilTheClientGivesUpOrItIsReleased(t *testing.T) {
	tg, url := newTarget(t)
	p := vaulttest.NewProxy(t, url)
	in := p.Add(vaulttest.Rule{Path: "/v1/slow", Fault: vaulttest.Delay})
	c := &http.Client{Timeout: 50 * time.Millisecond}
	_, _, err := do(t, c, "PUT", p.URL+"/v1/slow")
	if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Errorf("a held answer: %v, want the client's timeout", err)
	}
	<-in.Fired()
	if !slices.Contains(tg.reached(), "PUT /v1/slow") {
		t.Errorf("the held request was not applied: %v", tg.reached())
	}

	done := make(chan int, 1)
	go func() {
		code, _, _ := do(t, http.DefaultClient, "GET", p.URL+"/v1/slow")
		done <- code
	}()
	<-in.Fired() // forwarded and held
	in.Release()
	if code := <-done; code != 200 {
		t.Errorf("released answer: status %d, want 200", code)
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// Drop applies the request and closes the connection without an answer.
func TestTheProxyDropsTheConnectionAfterApplyingTheRequest(t *testing.T) {
	tg, url := newTarget(t)
	p := vaulttest.NewProxy(t, url)
	p.Add(vaulttest.Rule{Method: "PUT", Fault: vaulttest.Drop})
	if code, _, err := do(t, http.DefaultClient, "PUT", p.URL+"/v1/x"); err == nil {
		t.Errorf("a dropped request answered %d", code)
	}
	if !slices.Contains(tg.reached(), "PUT /v1/x") {
		t.Errorf("the dropped request was not applied: %v", tg.reached())
	}
}

// A dead target looks like a dead server: no answer.
func TestTheProxyDropsWhenTheTargetIsGone(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := vaulttest.NewProxy(t, url)
	if code, _, err := do(t, http.DefaultClient, "PUT", p.URL+"/v1/x"); err == nil {
		t.Errorf("a request to a dead target answered %d", code)
	}
}
