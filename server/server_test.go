package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/registrar-otel/registrar-otel/health"
	"github.com/registrar-otel/registrar-otel/registrar"
	"github.com/registrar-otel/registrar-otel/server"
	"github.com/registrar-otel/registrar-otel/wire"
	"go.opentelemetry.io/otel/trace"
)

// rawUnixClient is a plain HTTP client over the socket, for requests the
// wire.Client would never send.
func rawUnixClient(t *testing.T, path string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

type refusal struct {
	RequestID string          `json:"request_id"`
	Class     wire.Class      `json:"class"`
	Error     *wire.ErrorBody `json:"error"`
	Health    json.RawMessage `json:"registrar_health"`
}

// chunked hides a reader's length, so the server cannot refuse a body on
// its Content-Length and must count while reading.
type chunked struct{ io.Reader }

func TestMalformedRequestsNeverReachTheVerbs(t *testing.T) {
	holder := fixedHolder(t, 1, 2)
	s := newServer(t, unreachableVerbs(t), holder)
	hc := rawUnixClient(t, serveUnix(t, s))
	huge := replaceMember(mintBody, `"wrap_ttl":300`, `"wrap_ttl":300,"pad":"`+strings.Repeat("p", wire.MaxBodyBytes)+`"`)

	for _, tc := range []struct {
		name        string
		method      string
		path        string
		contentType string
		body        io.Reader
		wantStatus  int
		wantDetail  string
	}{
		{"bad JSON", "POST", wire.PathMint, "application/json", strings.NewReader(`{"protocol_version":1,`), 400, "not valid JSON"},
		{"wrong protocol_version", "POST", wire.PathMint, "application/json", strings.NewReader(replaceMember(mintBody, `"protocol_version":1`, `"protocol_version":3`)), 400, "protocol_version: must be 1"},
		{"null instance", "POST", wire.PathMint, "application/json", strings.NewReader(replaceMember(mintBody, `"instance":7`, `"instance":null`)), 400, "instance: must not be null"},
		{"negative instance", "POST", wire.PathDeregister, "application/json", strings.NewReader(replaceMember(deregisterBody, `"instance":7`, `"instance":-7`)), 400, "instance: must be a non-negative integer"},
		{"string wrap_ttl", "POST", wire.PathMint, "application/json", strings.NewReader(replaceMember(mintBody, `"wrap_ttl":300`, `"wrap_ttl":"300"`)), 400, "wrap_ttl: must be a non-negative integer, got a string"},
		{"missing service_name", "POST", wire.PathDeregister, "application/json", strings.NewReader(replaceMember(deregisterBody, `"service_name":"review",`, ``)), 400, "service_name: required"},
		{"oversize body with its length", "POST", wire.PathMint, "application/json", strings.NewReader(huge), 400, "exceeds 65536 bytes"},
		{"oversize body without its length", "POST", wire.PathMint, "application/json", chunked{strings.NewReader(huge)}, 400, "exceeds 65536 bytes"},
		{"missing Content-Type", "POST", wire.PathMint, "", strings.NewReader(mintBody), 400, "Content-Type: required"},
		{"form Content-Type", "POST", wire.PathMint, "application/x-www-form-urlencoded", strings.NewReader(mintBody), 400, "Content-Type: want application/json"},
		{"latin-1 charset", "POST", wire.PathDeregister, "application/json; charset=latin1", strings.NewReader(deregisterBody), 400, "charset must be utf-8"},
		{"GET on mint", "GET", wire.PathMint, "", nil, 400, "accepts POST only"},
		{"PUT on deregister", "PUT", wire.PathDeregister, "application/json", strings.NewReader(deregisterBody), 400, "accepts POST only"},
		{"POST on health", "POST", wire.PathHealth, "application/json", strings.NewReader(`{}`), 400, "accepts GET only"},
		{"unknown path", "POST", "/v1/mint/", "application/json", strings.NewReader(mintBody), 400, "unknown path"},
		{"unknown version path", "POST", "/v2/mint", "application/json", strings.NewReader(mintBody), 400, "unknown path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://registrar"+tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.wantStatus {
				t.Errorf("status got %d, want %d (%s)", res.StatusCode, tc.wantStatus, body)
			}
			var r refusal
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if r.Error == nil || r.Error.ID != wire.RequestMalformed || r.Class != wire.Permanent {
				t.Fatalf("got %s, want a permanent RequestMalformed", body)
			}
			if !strings.Contains(r.Error.Detail, tc.wantDetail) {
				t.Errorf("detail got %q, want it to contain %q", r.Error.Detail, tc.wantDetail)
			}
			if !strings.HasPrefix(r.RequestID, "wire.") {
				t.Errorf("request_id got %q, want a wire-level id", r.RequestID)
			}
			if string(r.Health) != string(holder.Current().JSON) {
				t.Errorf("registrar_health got %s, want %s", r.Health, holder.Current().JSON)
			}
			if strings.Contains(tc.wantDetail, "accepts") && res.Header.Get("Allow") == "" {
				t.Errorf("a wrong method answered without an Allow header")
			}
		})
	}
}

func TestARequestWithoutAnIdentityNeverReachesTheVerbs(t *testing.T) {
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	req, err := http.NewRequest("POST", wire.PathMint, strings.NewReader(mintBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	var r refusal
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 400 || r.Error == nil || r.Error.ID != wire.RequestMalformed || !strings.Contains(r.Error.Detail, "identity") {
		t.Fatalf("got %d %s, want 400 RequestMalformed naming the identity", rec.Code, rec.Body)
	}
}

func TestAcceptedContentTypes(t *testing.T) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"} {
		t.Run(ct, func(t *testing.T) {
			v := &fakeVerbs{t: t, deregister: deregisterAnswer(registrar.DeregisterResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.Removed}, nil)}
			s := newServer(t, v, fixedHolder(t, 0, 0))
			rec := do(s, "POST", wire.PathDeregister, deregisterBody, http.Header{"Content-Type": {ct}})
			if rec.Code != 200 || v.calls.Load() != 1 {
				t.Fatalf("got %d %s after %d verb calls, want 200 after one", rec.Code, rec.Body, v.calls.Load())
			}
		})
	}
}

func TestWireRequestIDsAreApartFromTheVerbs(t *testing.T) {
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	a, b := server.NextWireID(s), server.NextWireID(s)
	re := regexp.MustCompile(`^wire\.[A-Za-z0-9_-]{12}\.[0-9]+$`)
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Fatalf("got %q and %q, want two distinct ids matching %s", a, b, re)
	}
}

func TestNewServerRefusesIncompleteOptions(t *testing.T) {
	h := fixedHolder(t, 0, 0)
	for _, tc := range []struct {
		name string
		o    server.Options
		want string
	}{
		{"no verbs", server.Options{Health: h}, "nil Verbs"},
		{"no health", server.Options{Verbs: unreachableVerbs(t)}, "nil Health"},
		{"negative cap", server.Options{Verbs: unreachableVerbs(t), Health: h, UnixMaxConns: -1}, "UnixMaxConns"},
		{"negative identity cap", server.Options{Verbs: unreachableVerbs(t), Health: h, MaxConnsPerIdentity: -1}, "MaxConnsPerIdentity"},
		{"negative timeout", server.Options{Verbs: unreachableVerbs(t), Health: h, IdleTimeout: -1}, "IdleTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := server.New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestRegistrarHealthIsTheSharedSnapshot: every response shape carries the
// holder's snapshot, and the served value changes on Refresh only.
func TestRegistrarHealthIsTheSharedSnapshot(t *testing.T) {
	var pr, adm atomic.Uint64
	holder, err := health.NewHolder(func(c *health.Container) {
		c.Limiter = health.LimiterMember{LimitedPredecisionRefusal: pr.Load(), LimitedAdmission: adm.Load()}
	})
	if err != nil {
		t.Fatal(err)
	}
	v := &fakeVerbs{t: t,
		mint: func(_ context.Context, req registrar.MintRequest) (registrar.MintResult, error) {
			if req.ServiceName == "refuse" {
				return registrar.MintResult{}, &registrar.ThrottledError{RequestID: "r.2", RetryAfterSeconds: 2}
			}
			return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint, Material: goldenMaterial}, nil
		},
		deregister: deregisterAnswer(registrar.DeregisterResult{RequestID: "r.3", RegistrationID: "h1-review-007", Outcome: registrar.AlreadyAbsent}, nil),
	}
	s := newServer(t, v, holder)
	path := serveUnix(t, s)
	c := wire.NewUnixClient(path)
	defer c.CloseIdleConnections()
	hc := rawUnixClient(t, path)
	ctx := context.Background()
	refused := goodMint()
	refused.ServiceName = "refuse"
	malformed := goodDeregister()
	malformed.ProtocolVersion = 2

	shapes := []struct {
		name string
		call func() (*wire.Response, error)
	}{
		{"mint success", func() (*wire.Response, error) { return c.Mint(ctx, goodMint()) }},
		{"deregister success", func() (*wire.Response, error) { return c.Deregister(ctx, goodDeregister()) }},
		{"refusal", func() (*wire.Response, error) { return c.Mint(ctx, refused) }},
		{"malformed", func() (*wire.Response, error) { return c.Deregister(ctx, malformed) }},
		{"health", func() (*wire.Response, error) { return c.Health(ctx) }},
		{"400 unknown path", func() (*wire.Response, error) { return rawGet(hc, "/nope") }},
		{"400 wrong method", func() (*wire.Response, error) { return rawGet(hc, wire.PathDeregister) }},
	}
	check := func(t *testing.T, want health.LimiterMember) {
		t.Helper()
		for _, sh := range shapes {
			res, err := sh.call()
			if err != nil {
				t.Fatalf("%s: %v", sh.name, err)
			}
			if res.Health.Limiter != want {
				t.Errorf("%s: registrar_health.limiter got %+v, want %+v", sh.name, res.Health.Limiter, want)
			}
			if string(res.RawHealth) != string(holder.Current().JSON) {
				t.Errorf("%s: registrar_health got %s, want the holder's %s", sh.name, res.RawHealth, holder.Current().JSON)
			}
		}
	}
	check(t, health.LimiterMember{})
	pr.Store(4)
	adm.Store(9)
	check(t, health.LimiterMember{}) // moved without a refresh: unchanged
	if err := holder.Refresh(); err != nil {
		t.Fatal(err)
	}
	check(t, health.LimiterMember{LimitedPredecisionRefusal: 4, LimitedAdmission: 9})
}

// rawGet sends a GET and decodes the answer like the client does.
func rawGet(hc *http.Client, path string) (*wire.Response, error) {
	res, err := hc.Get("http://registrar" + path)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	var u struct {
		Health json.RawMessage `json:"registrar_health"`
	}
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, err
	}
	out := &wire.Response{StatusCode: res.StatusCode, RawHealth: u.Health, Body: body}
	if err := json.Unmarshal(u.Health, &out.Health); err != nil {
		return nil, err
	}
	return out, nil
}

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
)

func TestTraceparentIsTheVerbsRemoteParent(t *testing.T) {
	var got trace.SpanContext
	v := &fakeVerbs{t: t, mint: func(ctx context.Context, _ registrar.MintRequest) (registrar.MintResult, error) {
		got = trace.SpanContextFromContext(ctx)
		return registrar.MintResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.FirstMint, Material: goldenMaterial}, nil
	}}
	s := newServer(t, v, fixedHolder(t, 0, 0))
	rec := do(s, "POST", wire.PathMint, mintBody, http.Header{
		"Traceparent": {"00-" + testTraceID + "-" + testSpanID + "-01"},
		"Tracestate":  {"vendor=opaque"},
	})
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got.TraceID().String() != testTraceID || got.SpanID().String() != testSpanID || !got.IsRemote() || !got.IsSampled() {
		t.Fatalf("verbs' span context got trace %s span %s remote %v sampled %v, want %s %s remote sampled",
			got.TraceID(), got.SpanID(), got.IsRemote(), got.IsSampled(), testTraceID, testSpanID)
	}
	if got.TraceState().Get("vendor") != "opaque" {
		t.Errorf("tracestate got %q, want vendor=opaque", got.TraceState().String())
	}
}

func TestClientPropagatesItsCallersSpan(t *testing.T) {
	var got trace.SpanContext
	v := &fakeVerbs{t: t, deregister: func(ctx context.Context, _ registrar.DeregisterRequest) (registrar.DeregisterResult, error) {
		got = trace.SpanContextFromContext(ctx)
		return registrar.DeregisterResult{RequestID: "r.1", RegistrationID: "h1-review-007", Outcome: registrar.Removed}, nil
	}}
	s := newServer(t, v, fixedHolder(t, 0, 0))
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	tid, _ := trace.TraceIDFromHex(testTraceID)
	sid, _ := trace.SpanIDFromHex(testSpanID)
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	res, err := c.Deregister(ctx, goodDeregister())
	if err != nil || !res.OK() {
		t.Fatalf("got %+v, %v, want a success", res, err)
	}
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsRemote() {
		t.Fatalf("verbs' span context got trace %s span %s remote %v, want %s %s remote", got.TraceID(), got.SpanID(), got.IsRemote(), tid, sid)
	}
}

func TestClientWithoutPropagatorSendsNoTraceparent(t *testing.T) {
	cap := &captured{}
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	server.SetHandler(s, cap.handler())
	c := wire.NewUnixClient(serveUnix(t, s), wire.WithPropagator(nil))
	defer c.CloseIdleConnections()
	tid, _ := trace.TraceIDFromHex(testTraceID)
	sid, _ := trace.SpanIDFromHex(testSpanID)
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if _, hdr := cap.last(); hdr.Get("Traceparent") != "" {
		t.Fatalf("traceparent %q sent, want none", hdr.Get("Traceparent"))
	}
}

func TestClientReportsANonProtocolAnswer(t *testing.T) {
	s := newServer(t, unreachableVerbs(t), fixedHolder(t, 0, 0))
	server.SetHandler(s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "proxy says no", http.StatusBadGateway)
	}))
	c := wire.NewUnixClient(serveUnix(t, s))
	defer c.CloseIdleConnections()
	res, err := c.Health(context.Background())
	if err == nil {
		t.Fatalf("got %+v, want an error", res)
	}
	if res == nil || res.StatusCode != http.StatusBadGateway || !strings.Contains(string(res.Body), "proxy says no") {
		t.Fatalf("got %+v, want the status and body kept", res)
	}
}

func TestClientDialFailureIsAnError(t *testing.T) {
	c := wire.NewUnixClient(t.TempDir() + "/absent.sock")
	if _, err := c.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "/v1/health") {
		t.Fatalf("got %v, want an error naming the call", err)
	}
}
