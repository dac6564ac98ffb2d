package openbao

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNode is a loopback HTTP server standing for one cluster node: it
// answers with whatever its current behaviour says and records each
// request's method, path and body.
type fakeNode struct {
	srv *httptest.Server
	url *url.URL

	mu     sync.Mutex
	answer func(w http.ResponseWriter, r *http.Request)
	got    []string
}

func newFakeNode(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeNode {
	t.Helper()
	n := &fakeNode{answer: answer}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n.mu.Lock()
		n.got = append(n.got, r.Method+" "+r.URL.Path+" "+string(body))
		a := n.answer
		n.mu.Unlock()
		a(w, r)
	}))
	t.Cleanup(n.srv.Close)
	n.url, _ = url.Parse(n.srv.URL)
	return n
}

func (n *fakeNode) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

func (n *fakeNode) set(answer func(w http.ResponseWriter, r *http.Request)) {
	n.mu.Lock()
	n.answer = answer
	n.mu.Unlock()
}

// ok answers as KV v2 answers a read or a write.
func ok(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"data":{"data":{"state":"active"},"metadata":{"version":1}}}`)
}

func status(code int, msg string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"errors":["`+msg+`"]}`)
	}
}

func redirectTo(loc string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loc+r.URL.Path, http.StatusTemporaryRedirect)
	}
}

// refusedURL is a loopback address nobody listens on: connecting to it is
// refused at once, as a SIGKILLed node's port is.
func refusedURL(t *testing.T) *url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &url.URL{Scheme: "http", Host: l.Addr().String()}
	l.Close()
	return u
}

// testNodeSet is a nodeSet over urls whose clock is the returned
// pointer's value.
func testNodeSet(urls ...*url.URL) (*nodeSet, *time.Time) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	n := newNodeSet(urls, tr, idempotentRequest("approle"), slog.New(slog.DiscardHandler))
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n.now = func() time.Time { return clock }
	return n, &clock
}

func send(t *testing.T, n *nodeSet, ctx context.Context, method, path, body string) (*http.Response, error) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://configured.invalid"+path, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := n.RoundTrip(req)
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

const (
	kvWrite   = "/v1/secret/data/registrar-otel/bindings/r1"
	roleWrite = "/v1/auth/approle/role/bootroot-service-r1"
	secretID  = "/v1/auth/approle/role/bootroot-service-r1/secret-id"
)

func TestARequestToARefusedNodeGoesToTheNextAndLaterRequestsStartThere(t *testing.T) {
	good := newFakeNode(t, ok)
	n, _ := testNodeSet(refusedURL(t), good.url)
	// A binding write is not idempotent, but a refused connection carried
	// nothing: it goes to the next node.
	resp, err := send(t, n, context.Background(), http.MethodPut, kvWrite, `{"data":{"state":"claimed"},"options":{"cas":0}}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %v, %v; want 200 from the second node", resp, err)
	}
	if _, err := send(t, n, context.Background(), http.MethodGet, kvWrite, ""); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PUT " + kvWrite + ` {"data":{"state":"claimed"},"options":{"cas":0}}`,
		"GET " + kvWrite + " ",
	}
	if got := good.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the good node got %q, want %q (the body sent again whole)", got, want)
	}
	if got := n.cur.Load(); got != 1 {
		t.Fatalf("the node tried first is %d, want 1 (the one that answered)", got)
	}
	if r := n.reachability(); !r.FailingSince.IsZero() {
		t.Fatalf("reachability after an answer: failing since %v, want zero", r.FailingSince)
	}
}

func TestTheNodeThatAnsweredIsTriedFirstEvenAfterAnotherRequestMovedOn(t *testing.T) {
	var n *nodeSet
	third := newFakeNode(t, status(503, "Vault is sealed"))
	good := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		// Meanwhile a concurrent request failed here and moved on.
		n.cur.Store(2)
		ok(w, r)
	})
	n, _ = testNodeSet(refusedURL(t), good.url, third.url)
	if _, err := send(t, n, context.Background(), http.MethodGet, kvWrite, ""); err != nil {
		t.Fatal(err)
	}
	if got := n.cur.Load(); got != 1 {
		t.Fatalf("the node tried first is %d, want 1 (the last one that answered)", got)
	}
}

func TestASealedOrLeaderlessNodeHandsEveryRequestToTheNext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request)
	}{
		{"sealed (503)", status(503, "Vault is sealed")},
		{"standby without an active node (500)", status(500, msgNoActive)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := newFakeNode(t, tc.answer)
			good := newFakeNode(t, ok)
			n, _ := testNodeSet(bad.url, good.url)
			resp, err := send(t, n, context.Background(), http.MethodPut, secretID, `{}`)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("got %v, %v; want 200 from the second node", resp, err)
			}
			if len(bad.requests()) != 1 || len(good.requests()) != 1 {
				t.Fatalf("requests: bad node %d, good node %d; want 1 each", len(bad.requests()), len(good.requests()))
			}
		})
	}
}

func TestARequestNoNodeTakesTriesEachNodeOnceAndReturnsTheLastFailure(t *testing.T) {
	a := newFakeNode(t, status(500, msgNoActive))
	b := newFakeNode(t, status(503, "Vault is sealed"))
	n, _ := testNodeSet(a.url, b.url)
	resp, err := send(t, n, context.Background(), http.MethodPut, kvWrite, `{"data":{}}`)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the last node's 503", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "Vault is sealed") {
		t.Fatalf("body %q, want the server's own error list, readable", body)
	}
	if len(a.requests()) != 1 || len(b.requests()) != 1 {
		t.Fatalf("requests: %d and %d, want one to each node", len(a.requests()), len(b.requests()))
	}
	if got := n.cur.Load(); got != 0 {
		t.Fatalf("the node tried first is now %d, want 0 (the one after the last that failed)", got)
	}
	// During an election every node says so; once one answers, the next
	// request is answered.
	a.set(ok)
	if resp, err := send(t, n, context.Background(), http.MethodPut, kvWrite, `{"data":{}}`); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the election: %v, %v; want 200", resp, err)
	}
}

func TestAFailureThatMayHaveBeenAppliedIsSentAgainOnlyWhenIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		answer             func(http.ResponseWriter, *http.Request)
		again              bool
	}{
		{"a binding write redirected by a standby", http.MethodPut, kvWrite, redirectTo("http://127.0.0.1:1"), false},
		{"a secret id's generation through a 502", http.MethodPut, secretID, status(502, "bad gateway"), false},
		{"a role write redirected by a standby", http.MethodPut, roleWrite, redirectTo("http://127.0.0.1:1"), true},
		{"a binding read through a 504", http.MethodGet, kvWrite, status(504, "gateway timeout"), true},
		{"a role delete redirected", http.MethodDelete, roleWrite, redirectTo("http://127.0.0.1:1"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := newFakeNode(t, tc.answer)
			good := newFakeNode(t, ok)
			n, _ := testNodeSet(bad.url, good.url)
			resp, err := send(t, n, context.Background(), tc.method, tc.path, `{}`)
			if got := len(good.requests()); got != map[bool]int{true: 1, false: 0}[tc.again] {
				t.Fatalf("the next node got %d requests, want sent again: %v", got, tc.again)
			}
			if tc.again {
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("got %v, %v; want the next node's 200", resp, err)
				}
				return
			}
			if got := n.cur.Load(); got != 1 {
				t.Fatalf("the node tried first is %d after a failure there, want 1 (the next)", got)
			}
			if resp != nil && resp.StatusCode < 400 {
				t.Fatalf("got HTTP %d, want a failure (a redirect must never pass for an answer)", resp.StatusCode)
			}
			if tc.answer != nil && strings.Contains(tc.name, "redirect") {
				var re *RedirectError
				if !errors.As(err, &re) || re.Location != "http://127.0.0.1:1" {
					t.Fatalf("got error %v, want a *RedirectError to http://127.0.0.1:1", err)
				}
			}
		})
	}
}

func TestAnAnswerThatIsNotAboutReachingTheClusterIsReturnedAsItIs(t *testing.T) {
	for _, code := range []int{400, 403, 404, 412, 500} {
		bad := newFakeNode(t, status(code, "permission denied"))
		good := newFakeNode(t, ok)
		n, _ := testNodeSet(bad.url, good.url)
		resp, err := send(t, n, context.Background(), http.MethodGet, kvWrite, "")
		if err != nil || resp.StatusCode != code {
			t.Fatalf("HTTP %d: got %v, %v; want the same status back", code, resp, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "permission denied") {
			t.Fatalf("HTTP %d: body %q, want the server's error list", code, body)
		}
		if len(good.requests()) != 0 {
			t.Fatalf("HTTP %d: the next node got %d requests, want 0", code, len(good.requests()))
		}
	}
}

func TestARequestWhoseDeadlinePassedIsNotSentToTheNextNode(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	a := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	b := newFakeNode(t, ok)
	n, _ := testNodeSet(a.url, b.url)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := send(t, n, ctx, http.MethodGet, kvWrite, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	if len(b.requests()) != 0 {
		t.Fatalf("the next node got %d requests after the deadline, want 0", len(b.requests()))
	}
	if r := n.reachability(); r.FailingSince.IsZero() || !strings.Contains(r.LastFailure, "no answer") {
		t.Fatalf("reachability %+v: want failing, no answer from the hanging node", r)
	}
}

func TestReadinessTurnsAfterTheGraceAndBackOnTheFirstAnswer(t *testing.T) {
	node := newFakeNode(t, status(503, "Vault is sealed"))
	n, clock := testNodeSet(node.url)
	b := &Backend{nodes: n, grace: 10 * time.Second}
	start := *clock
	if err := b.Ready(start); err != nil {
		t.Fatalf("ready before any request: %v, want nil", err)
	}
	_, _ = send(t, n, context.Background(), http.MethodGet, kvWrite, "")
	if err := b.Ready(start.Add(9 * time.Second)); err != nil {
		t.Fatalf("9 s into the failures: %v, want ready (within the grace)", err)
	}
	err := b.Ready(start.Add(10 * time.Second))
	var nr *NotReadyError
	if !errors.As(err, &nr) || nr.For != 10*time.Second || !strings.Contains(err.Error(), "Vault is sealed") || !strings.Contains(err.Error(), node.url.Host) {
		t.Fatalf("10 s into the failures: %v; want a *NotReadyError naming the node and why", err)
	}
	node.set(ok)
	if _, err := send(t, n, context.Background(), http.MethodGet, kvWrite, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(start.Add(11 * time.Second)); err != nil {
		t.Fatalf("after an answer: %v, want ready", err)
	}
}

func TestACallerThatGivesUpSaysNothingAboutTheCluster(t *testing.T) {
	node := newFakeNode(t, ok)
	n, _ := testNodeSet(node.url)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := send(t, n, ctx, http.MethodGet, kvWrite, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if r := n.reachability(); !r.FailingSince.IsZero() {
		t.Fatalf("failing since %v after a cancelled request, want zero", r.FailingSince)
	}
}

func TestIdempotentRequestsAreReadsDeletesRoleWritesAndDestroys(t *testing.T) {
	is := idempotentRequest("registrar-otel-approle")
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/v1/secret/data/registrar-otel/bindings/x", true},
		{"LIST", "/v1/secret/metadata/registrar-otel/bindings/", true},
		{"DELETE", "/v1/secret/metadata/registrar-otel/bindings/x", true},
		{"DELETE", "/v1/auth/registrar-otel-approle/role/bootroot-service-x", true},
		{"PUT", "/v1/auth/registrar-otel-approle/role/bootroot-service-x", true},
		{"POST", "/v1/auth/registrar-otel-approle/role/bootroot-service-x/secret-id-accessor/destroy", true},
		{"PUT", "/v1/auth/token/renew-self", true},
		{"GET", "/v1/auth/token/lookup-self", true},
		{"POST", "/v1/sys/capabilities-self", true},
		{"PUT", "/v1/secret/data/registrar-otel/bindings/x", false},
		{"PUT", "/v1/auth/registrar-otel-approle/role/bootroot-service-x/secret-id", false},
		{"PUT", "/v1/auth/registrar-otel-approle/role/bootroot-service-x/custom-secret-id", false},
		{"PUT", "/v1/auth/registrar-otel-approle/role/", false},
		{"PUT", "/v1/auth/approle/role/bootroot-service-x", false}, // another mount
		{"PATCH", "/v1/auth/registrar-otel-approle/role/bootroot-service-x", false},
	} {
		if got := is(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s: idempotent %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestParseAddressesNamesTheBadElement(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, "no address"},
		{[]string{"https://a:8200", "ftp://b"}, `address 2 of 2 "ftp://b" is not an http:// or https:// URL`},
		{[]string{"https://a:8200", "https://A:8200"}, `address 2 of 2 "https://A:8200" repeats address 1`},
		{[]string{"https://user:pw@a:8200/"}, ``},
		{[]string{"https://a:8200", "::"}, `address 2 of 2 "::"`},
	} {
		_, err := ParseAddresses(tc.in)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v, want nil", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: %v carries the password", tc.in, err)
		}
	}
}

func TestTheBackendsClientFailsOverAndNeverFollowsARedirect(t *testing.T) {
	standby := newFakeNode(t, redirectTo("http://127.0.0.1:1"))
	good := newFakeNode(t, ok)
	b, err := New(Options{Addresses: []string{refusedURL(t).String(), standby.url.String(), good.url.String()}, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A binding read goes round the refused node and the standby that
	// cannot forward, and is answered by the third.
	if _, err := b.kv.Get(context.Background(), "registrar-otel/bindings/r1"); err != nil {
		t.Fatalf("binding read: %v", err)
	}
	// A binding write through the standby is not sent again and is not
	// taken for a success.
	b.nodes.cur.Store(1)
	_, err = b.kv.Put(context.Background(), "registrar-otel/bindings/r1", map[string]any{"state": "claimed"})
	var re *RedirectError
	if !errors.As(err, &re) {
		t.Fatalf("binding write through a redirecting standby: %v, want a *RedirectError", err)
	}
	if got := len(good.requests()); got != 1 {
		t.Fatalf("the good node got %d requests, want 1 (the read only)", got)
	}
}

func TestProbeAsksTheClusterOnlyWhenTheViewIsStale(t *testing.T) {
	asked := make(chan string, 4)
	node := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		asked <- r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":{"ttl":3600,"creation_ttl":3600,"renewable":true}}`)
	})
	b, err := New(Options{Address: node.url.String(), Token: "t", ReadinessGrace: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b.nodes.now = func() time.Time { return clock }
	wait := func() string {
		select {
		case p := <-asked:
			return p
		case <-time.After(5 * time.Second):
			t.Fatal("no probe request within 5 s")
			return ""
		}
	}
	b.Probe(clock) // no contact yet: asks
	if p := wait(); p != "/v1/auth/token/lookup-self" {
		t.Fatalf("the probe asked %s, want the token's lookup-self", p)
	}
	for b.probing.Load() { // the probe's goroutine notes its answer, then ends
		runtime.Gosched()
	}
	b.Probe(clock.Add(1999 * time.Millisecond)) // fresher than a quarter of the grace: no request
	if b.probing.Load() {
		t.Fatal("a probe started although the view is 1.999 s old, under a quarter of the 8 s grace")
	}
	b.Probe(clock.Add(2 * time.Second)) // a quarter of the grace old: asks
	if p := wait(); p != "/v1/auth/token/lookup-self" {
		t.Fatalf("the second probe asked %s, want lookup-self", p)
	}
	select {
	case p := <-asked:
		t.Fatalf("an extra request %s: the fresh view must not be probed", p)
	default:
	}
	for b.probing.Load() {
		runtime.Gosched()
	}
	// The probe's answer is the token's lookup: its stats are known
	// (make mutate showed readiness.go's err == nil made != live).
	if st := b.TokenStats(); !st.Known || !st.Renewable || st.Expiry.IsZero() {
		t.Errorf("after a probe the token's stats are %+v, want known, renewable, with an expiry", st)
	}
}

// With a short grace the probe still waits at least 250 ms between two
// lookups, not a quarter of the grace (make mutate showed readiness.go's
// 250*time.Millisecond made 250/time.Millisecond live), and the not-ready
// error gives its duration to the tenth of a second (its 100*time.Millisecond
// made 100/time.Millisecond live).
func TestProbeWaitsAtLeastAQuarterSecondAndNotReadySaysTheTenth(t *testing.T) {
	b, err := New(Options{Address: "http://127.0.0.1:1", Token: "t", ReadinessGrace: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.probeEvery(); got != 250*time.Millisecond {
		t.Errorf("probeEvery with a 400 ms grace is %v, want the 250 ms floor", got)
	}
	e := &NotReadyError{For: 2345 * time.Millisecond, Grace: 2 * time.Second, LastFailure: "x"}
	if want := "openbao cluster unreachable for 2.3s (readiness grace 2s): last failure: x"; e.Error() != want {
		t.Errorf("NotReadyError says %q, want %q", e.Error(), want)
	}
}
