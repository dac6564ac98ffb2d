package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/vocab"
	"github.com/registrar-otel/registrar-otel/wire"
)

// limitsHooks are fake Options.Limits and Options.LimitsReset: they keep
// what they were asked and answer what the test set.
type limitsHooks struct {
	calls     atomic.Int32
	showReq   wire.LimitsRequest
	show      wire.LimitsAnswer
	resetReq  wire.LimitsResetRequest
	caller    string
	cancelled bool // the reset's context could be cancelled
	reset     wire.LimitsResetAnswer
	err       error
}

func (h *limitsHooks) limits(_ context.Context, req wire.LimitsRequest) (wire.LimitsAnswer, error) {
	h.calls.Add(1)
	h.showReq = req
	return h.show, h.err
}

func (h *limitsHooks) limitsReset(ctx context.Context, caller string, req wire.LimitsResetRequest) (wire.LimitsResetAnswer, error) {
	h.calls.Add(1)
	h.caller, h.resetReq, h.cancelled = caller, req, ctx.Done() != nil
	return h.reset, h.err
}

// limitsServer serves h's hooks (none when h is nil) on a unix socket
// with the uid policy allowed, and returns the socket.
func limitsServer(t *testing.T, allowed func(uint32) bool, h *limitsHooks) string {
	t.Helper()
	o := server.Options{Verbs: unreachableVerbs(t), Health: fixedHolder(t, 0, 0), AdminAllowed: allowed}
	if h != nil {
		o.Limits, o.LimitsReset = h.limits, h.limitsReset
	}
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return serveUnix(t, s)
}

// identityLimits is an identity's four keys, all absent under the default
// sizes.
func identityLimits(id string) wire.IdentityLimits {
	il := wire.IdentityLimits{Identity: id, Policy: "default", Pool: wire.PoolLocal}
	for v := range vocab.Verb(vocab.NumVerbs) {
		for b := range vocab.Bucket(vocab.NumBuckets) {
			il.Buckets = append(il.Buckets, wire.KeyLimits{Verb: v, Bucket: b, BucketLimits: wire.BucketLimits{State: wire.KeyAbsent, Burst: 8, RefillIntervalMS: 500, Tokens: 8}})
		}
	}
	return il
}

func wantAdminError(t *testing.T, what string, err error, id string, status int, detail string) {
	t.Helper()
	var ae *wire.AdminError
	if !errors.As(err, &ae) || ae.ID != id || ae.StatusCode != status || !strings.Contains(ae.Detail, detail) {
		t.Fatalf("%s: %v, want %s (%d) with a detail containing %q", what, err, id, status, detail)
	}
}

func TestLimitsShowAnswersTheHookSortedToTheDaemonsUID(t *testing.T) {
	h := &limitsHooks{show: wire.LimitsAnswer{Identities: []wire.IdentityLimits{identityLimits("unix-peer:uid=7"), identityLimits("registrar-client:dns:b"), identityLimits("registrar-client:dns:a")}}}
	c := wire.NewUnixClient(limitsServer(t, nil, h)) // the default policy: this process is the daemon's uid
	defer c.CloseIdleConnections()
	ans, err := c.Limits(context.Background(), wire.LimitsRequest{})
	if err != nil {
		t.Fatalf("show by the daemon's uid %d: %v", os.Geteuid(), err)
	}
	var got []string
	for _, il := range ans.Identities {
		got = append(got, il.Identity)
	}
	if strings.Join(got, " ") != "registrar-client:dns:a registrar-client:dns:b unix-peer:uid=7" || h.showReq != (wire.LimitsRequest{}) {
		t.Errorf("identities %q (the hook was asked %+v), want them sorted, every identity asked", got, h.showReq)
	}
	if ans.Overflow == nil || len(ans.Identities[0].Buckets) != 4 || ans.Identities[0].Buckets[3].State != wire.KeyAbsent {
		t.Errorf("answer %+v: want the hook's buckets and overflow [] (never null)", ans)
	}

	// One identity: the hook is asked for it, and its answer passes.
	h.show = wire.LimitsAnswer{Identities: []wire.IdentityLimits{identityLimits("registrar-client:uri:spiffe://x/a b")}}
	ans, err = c.Limits(context.Background(), wire.LimitsRequest{Identity: "registrar-client:uri:spiffe://x/a b"})
	if err != nil || h.showReq.Identity != "registrar-client:uri:spiffe://x/a b" || len(ans.Identities) != 1 {
		t.Fatalf("show one identity: %+v, %v (the hook was asked %+v)", ans, err, h.showReq)
	}
}

func TestLimitsResetRunsTheHookAsTheCallerAndIsNotCancelledWithIt(t *testing.T) {
	id := "registrar-client:uri:spiffe://example.org/agent/7"
	tokens := uint32(4)
	h := &limitsHooks{reset: wire.LimitsResetAnswer{Identity: id, Policy: "agents", Pool: wire.PoolRemote, Recorded: true,
		Reset: []wire.KeyReset{{Verb: vocab.Mint, Bucket: vocab.Admission, Before: wire.KeyEntry, TokensBefore: 0, Tokens: 8, ShadowTokens: &tokens}}}}
	c := wire.NewUnixClient(limitsServer(t, nil, h))
	defer c.CloseIdleConnections()
	verb, bucket := vocab.Mint, vocab.Admission
	ans, err := c.LimitsReset(context.Background(), wire.LimitsResetRequest{Identity: id, Verb: &verb, Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	if h.caller != server.UnixIdentity(uint32(os.Geteuid())) || h.resetReq.Identity != id || *h.resetReq.Verb != verb || *h.resetReq.Bucket != bucket {
		t.Errorf("the hook ran for caller %q with %+v; want %q resetting mint admission of %s", h.caller, h.resetReq, server.UnixIdentity(uint32(os.Geteuid())), id)
	}
	if h.cancelled {
		t.Errorf("the reset's context can be cancelled: a caller hanging up would cut the reset from its audit record")
	}
	if !ans.Recorded || len(ans.Reset) != 1 || ans.Reset[0].Tokens != 8 || *ans.Reset[0].ShadowTokens != 4 || ans.Policy != "agents" {
		t.Errorf("answer %+v, want the hook's", ans)
	}

	// Every bucket: neither verb nor bucket reaches the hook.
	h.reset = wire.LimitsResetAnswer{Identity: id}
	ans, err = c.LimitsReset(context.Background(), wire.LimitsResetRequest{Identity: id})
	if err != nil || h.resetReq.Verb != nil || h.resetReq.Bucket != nil || ans.Reset == nil {
		t.Errorf("reset of every bucket: %+v, %v (the hook was asked %+v); want reset [] (never null)", ans, err, h.resetReq)
	}
}

func TestLimitsByAnotherUIDAreForbidden(t *testing.T) {
	h := &limitsHooks{}
	c := wire.NewUnixClient(limitsServer(t, func(uint32) bool { return false }, h))
	defer c.CloseIdleConnections()
	_, err := c.Limits(context.Background(), wire.LimitsRequest{})
	wantAdminError(t, "show by a refused uid", err, wire.AdminForbidden, http.StatusForbidden, "limits show is allowed only for the daemon's uid")
	_, err = c.LimitsReset(context.Background(), wire.LimitsResetRequest{Identity: "unix-peer:uid=0"})
	wantAdminError(t, "reset by a refused uid", err, wire.AdminForbidden, http.StatusForbidden, "limits reset is allowed only for the daemon's uid")
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("the hooks ran %d times for a forbidden caller", n)
	}
}

// A certificate caller is never an administrator, whatever its identity.
func TestLimitsOverTLSAreForbidden(t *testing.T) {
	pki := newTestPKI(t)
	h := &limitsHooks{}
	s, err := server.New(server.Options{Verbs: unreachableVerbs(t), Health: fixedHolder(t, 0, 0), AdminAllowed: func(uint32) bool { return true },
		Limits: h.limits, LimitsReset: h.limitsReset})
	if err != nil {
		t.Fatal(err)
	}
	l, err := server.ListenTLS("127.0.0.1:0", pki.certFile, pki.keyFile, pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, s, l)
	cert := pki.Client(t, "spiffe://registrar.test/control-plane")
	c := wire.NewTLSClient(l.Addr().String(), &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{cert}})
	defer c.CloseIdleConnections()
	_, err = c.Limits(context.Background(), wire.LimitsRequest{})
	wantAdminError(t, "show over TLS", err, wire.AdminForbidden, http.StatusForbidden, "unix socket only")
	_, err = c.LimitsReset(context.Background(), wire.LimitsResetRequest{Identity: "unix-peer:uid=0"})
	wantAdminError(t, "reset over TLS", err, wire.AdminForbidden, http.StatusForbidden, "unix socket only")
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("the hooks ran %d times for a TLS caller", n)
	}
}

func TestLimitsWithoutHooksAreUnsupported(t *testing.T) {
	c := wire.NewUnixClient(limitsServer(t, nil, nil))
	defer c.CloseIdleConnections()
	_, err := c.Limits(context.Background(), wire.LimitsRequest{})
	wantAdminError(t, "show without a hook", err, wire.AdminUnsupported, http.StatusNotImplemented, "no limiter to inspect")
	_, err = c.LimitsReset(context.Background(), wire.LimitsResetRequest{Identity: "unix-peer:uid=0"})
	wantAdminError(t, "reset without a hook", err, wire.AdminUnsupported, http.StatusNotImplemented, "no limiter to reset")
}

func TestLimitsHookFailuresAreAdminFailed(t *testing.T) {
	h := &limitsHooks{err: errors.New("audit store unwritable")}
	c := wire.NewUnixClient(limitsServer(t, nil, h))
	defer c.CloseIdleConnections()
	ctx := context.Background()
	_, err := c.Limits(ctx, wire.LimitsRequest{})
	wantAdminError(t, "a failing show hook", err, wire.AdminFailed, http.StatusInternalServerError, "audit store unwritable")
	_, err = c.LimitsReset(ctx, wire.LimitsResetRequest{Identity: "a"})
	wantAdminError(t, "a failing reset hook", err, wire.AdminFailed, http.StatusInternalServerError, "audit store unwritable")

	// An answer that is not about the identity asked is not passed on.
	h.err = nil
	h.show = wire.LimitsAnswer{Identities: []wire.IdentityLimits{identityLimits("b")}}
	_, err = c.Limits(ctx, wire.LimitsRequest{Identity: "a"})
	wantAdminError(t, "a show answer about another identity", err, wire.AdminFailed, http.StatusInternalServerError, "not the one asked for")
	h.show = wire.LimitsAnswer{}
	_, err = c.Limits(ctx, wire.LimitsRequest{Identity: "a"})
	wantAdminError(t, "a show answer without the identity", err, wire.AdminFailed, http.StatusInternalServerError, "holds 0 identities")
	h.reset = wire.LimitsResetAnswer{Identity: "b"}
	_, err = c.LimitsReset(ctx, wire.LimitsResetRequest{Identity: "a"})
	wantAdminError(t, "a reset answer about another identity", err, wire.AdminFailed, http.StatusInternalServerError, "another identity")
	// A verb out of range cannot be encoded: AdminFailed, not a made-up spelling.
	bad := identityLimits("a")
	bad.Buckets[0].Verb = vocab.Verb(9)
	h.show = wire.LimitsAnswer{Identities: []wire.IdentityLimits{bad}}
	_, err = c.Limits(ctx, wire.LimitsRequest{Identity: "a"})
	wantAdminError(t, "a show answer with an invalid verb", err, wire.AdminFailed, http.StatusInternalServerError, "invalid verb 9")

	// An answer over the client's bound is refused by the server, saying
	// what to do.
	h.show = wire.LimitsAnswer{}
	for i := range 4000 {
		h.show.Identities = append(h.show.Identities, identityLimits(strings.Repeat("x", wire.MaxIdentityBytes-4)+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676))))
	}
	_, err = c.Limits(ctx, wire.LimitsRequest{})
	wantAdminError(t, "an answer over the bound", err, wire.AdminFailed, http.StatusInternalServerError, "ask for one identity")
}

// adminAnswer is a raw administrative answer.
type adminAnswer struct {
	status int
	body   wire.AdminError
}

func rawAdmin(t *testing.T, hc *http.Client, method, path, ctype string, body io.Reader) adminAnswer {
	t.Helper()
	req, err := http.NewRequest(method, "http://registrar"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a adminAnswer
	a.status = resp.StatusCode
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: %d %q is not an administrative answer", method, path, resp.StatusCode, raw)
	}
	return a
}

// Requests the wire.Client never sends are refused as AdminBadRequest,
// naming what is wrong, and never reach the hooks.
func TestLimitsBadRequestsAreNamed(t *testing.T) {
	h := &limitsHooks{}
	hc := rawUnixClient(t, limitsServer(t, nil, h))
	const js = "application/json"
	for _, tc := range []struct {
		name, method, path, ctype string
		body                      io.Reader
		detail                    string
	}{
		{"an unknown parameter", "GET", wire.PathLimits + "?verb=mint", "", nil, `query: unknown parameter "verb"`},
		{"an empty identity", "GET", wire.PathLimits + "?identity=", "", nil, "identity: empty: omit it"},
		{"an identity twice", "GET", wire.PathLimits + "?identity=a&identity=b", "", nil, "identity: given more than once"},
		{"an identity too long", "GET", wire.PathLimits + "?identity=" + strings.Repeat("a", wire.MaxIdentityBytes+1), "", nil, "identity: 513 bytes, longer than the 512"},
		{"a query that does not parse", "GET", wire.PathLimits + "?identity=%zz", "", nil, "query: not a query string"},
		{"a GET with a body", "GET", wire.PathLimits, js, strings.NewReader(`{"identity":"a"}`), "takes no body"},
		{"a GET with a chunked body", "GET", wire.PathLimits, js, chunked{strings.NewReader(`x`)}, "takes no body"},
		{"no content type", "POST", wire.PathLimitsReset, "", strings.NewReader(`{"identity":"a"}`), "Content-Type: required"},
		{"another content type", "POST", wire.PathLimitsReset, "text/plain", strings.NewReader(`{"identity":"a"}`), "Content-Type: want application/json"},
		{"a body over the bound", "POST", wire.PathLimitsReset, js, strings.NewReader(`{"identity":"a"}` + strings.Repeat(" ", wire.MaxLimitsResetBodyBytes)), "body: more than 8192 bytes"},
		{"a chunked body over the bound", "POST", wire.PathLimitsReset, js, chunked{strings.NewReader(`{"identity":"a"}` + strings.Repeat(" ", wire.MaxLimitsResetBodyBytes))}, "body: more than 8192 bytes"},
		{"no identity", "POST", wire.PathLimitsReset, js, strings.NewReader(`{"verb":"mint"}`), "identity: required"},
		{"an unknown verb", "POST", wire.PathLimitsReset, js, strings.NewReader(`{"identity":"a","verb":"mnit"}`), `verb: unknown verb "mnit" (want "mint" or "deregister")`},
		{"an unknown bucket", "POST", wire.PathLimitsReset, js, strings.NewReader(`{"identity":"a","bucket":"all"}`), `bucket: unknown bucket "all"`},
		{"a misspelt member", "POST", wire.PathLimitsReset, js, strings.NewReader(`{"identity":"a","bukcet":"admission"}`), `"bukcet": unknown member`},
		{"not JSON", "POST", wire.PathLimitsReset, js, strings.NewReader(`identity=a`), "body: not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := rawAdmin(t, hc, tc.method, tc.path, tc.ctype, tc.body)
			if a.status != http.StatusBadRequest || a.body.ID != wire.AdminBadRequest || !strings.Contains(a.body.Detail, tc.detail) {
				t.Errorf("got %d %+v, want 400 AdminBadRequest with a detail containing %q", a.status, a.body, tc.detail)
			}
		})
	}
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("the hooks ran %d times for bad requests", n)
	}
}
