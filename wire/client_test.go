package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// A call that cannot reach the daemon names the socket it tried, keeps the
// cause inspectable, and shows no placeholder URL.
func TestClientErrorNamesTheSocketNotAPlaceholderURL(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "absent.sock")
	_, err := NewUnixClient(sock).Mint(context.Background(), MintRequest{})
	if err == nil {
		t.Fatal("mint on a missing socket succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "POST /v1/mint on unix socket "+sock) || strings.Contains(msg, "http://") {
		t.Errorf("error %q: want the socket named and no URL", msg)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q does not wrap fs.ErrNotExist", msg)
	}
}

// fakeRegistrar serves handler on a unix socket of its own (the client's
// side of the protocol tested without the server package) and returns
// a client of it.
func fakeRegistrar(t *testing.T, handler http.HandlerFunc, opts ...ClientOption) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "r.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := NewUnixClient(sock, opts...)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// answer serves body with status (and Retry-After, RateLimit-Policy and
// RateLimit when set, each line of them) to any request, keeping the last
// request's method, path, content type and body.
type answer struct {
	status      int
	retryAfter  string
	policy      []string
	limit       []string
	body        []byte
	method      string
	path        string
	ctype       string
	traceparent string
	got         []byte
}

func (a *answer) serve(w http.ResponseWriter, r *http.Request) {
	a.method, a.path, a.ctype, a.traceparent = r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("traceparent")
	a.got, _ = io.ReadAll(r.Body)
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	// Set as the draft spells the names (net/http writes map keys as they are).
	if a.policy != nil {
		w.Header()[HeaderRateLimitPolicy] = a.policy
	}
	if a.limit != nil {
		w.Header()[HeaderRateLimit] = a.limit
	}
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// The client decodes every member of each answer shape as the goldens
// spell it, sends protocol_version 1 for a zero one, and calls each verb
// on its path with its method.
func TestClientDecodesTheGoldenAnswers(t *testing.T) {
	ctx := context.Background()
	wantHealth := func(t *testing.T, r *Response) {
		t.Helper()
		if r.Health.Limiter.LimitedAdmission != 5 || r.Health.Limiter.LimitedPredecisionRefusal != 3 || len(r.RawHealth) == 0 {
			t.Errorf("registrar_health decoded as %+v (raw %q)", r.Health.Limiter, r.RawHealth)
		}
	}

	a := &answer{status: 200, body: golden(t, "response_mint_first_mint.json")}
	c := fakeRegistrar(t, a.serve)
	r, err := c.Mint(ctx, MintRequest{ServiceName: "review", Host: "h1", Component: "review"})
	if err != nil {
		t.Fatal(err)
	}
	if a.method != http.MethodPost || a.path != PathMint || a.ctype != "application/json" || !bytes.HasPrefix(a.got, []byte(`{"protocol_version":1,`)) {
		t.Errorf("mint sent %s %s (%s) %s", a.method, a.path, a.ctype, a.got)
	}
	if !r.OK() || r.Retryable() || r.Outcome != "first_mint" || r.RegistrationID != "h1-review-007" || r.RequestID != "AAAAAAAAAAAA.1" ||
		r.Material == nil || r.Material.RoleID != "role-h1-review-007" || r.Material.WrappedSecretID != "wsid-0123456789abcdef" || r.ProtocolVersion != 1 {
		t.Errorf("first_mint decoded as %+v", r)
	}
	wantHealth(t, r)

	a.status, a.body = 429, golden(t, "response_RegistrarBusy.json")
	a.retryAfter = "7"
	r, err = c.Deregister(ctx, DeregisterRequest{ServiceName: "review", Host: "h1", Component: "review"})
	if err != nil {
		t.Fatal(err)
	}
	if a.path != PathDeregister || !bytes.HasPrefix(a.got, []byte(`{"protocol_version":1,`)) {
		t.Errorf("deregister sent %s %s", a.path, a.got)
	}
	if r.OK() || !r.Retryable() || r.ErrorID != RegistrarBusy || r.Class != Retryable || r.RetryAfter != 7 || r.RetryAfterHeader != "7" || r.StatusCode != 429 {
		t.Errorf("RegistrarBusy decoded as %+v", r)
	}
	wantHealth(t, r)

	a.status, a.body, a.retryAfter = 400, golden(t, "response_RequestMalformed.json"), ""
	if r, err = c.Mint(ctx, MintRequest{}); err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.Retryable() || r.ErrorID != RequestMalformed || r.Class != Permanent || r.Detail != "instance: must not be null (omit the member instead)" {
		t.Errorf("RequestMalformed decoded as %+v", r)
	}

	a.status, a.body = 403, golden(t, "response_CallerNotPermitted_out_of_scope.json")
	if r, err = c.Mint(ctx, MintRequest{}); err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.Retryable() || r.ErrorID != CallerNotPermitted || r.Class != Permanent || r.Reason != "out_of_scope" || r.Scope != "service" {
		t.Errorf("CallerNotPermitted decoded as %+v", r)
	}
	a.status, a.body = 409, golden(t, "response_InstanceCeilingReached.json")
	if r, err = c.Mint(ctx, MintRequest{}); err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.ErrorID != InstanceCeilingReached || r.Ceiling != "max_instances_per_host" || r.Limit != 8 || r.RegistrationID != "h1-review-007" {
		t.Errorf("InstanceCeilingReached decoded as %+v", r)
	}

	// A refusal's status with a 200: not OK, because an error id is set.
	a.status = 200
	if r, err = c.Mint(ctx, MintRequest{}); err != nil || r.OK() {
		t.Errorf("a 200 carrying an error: OK %v, err %v; want not OK", r != nil && r.OK(), err)
	}

	a.status, a.body = 200, golden(t, "response_health.json")
	if r, err = c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if a.method != http.MethodGet || a.path != PathHealth || !r.OK() {
		t.Errorf("health: %s %s, OK %v", a.method, a.path, r.OK())
	}
	wantHealth(t, r)
}

// What is not a protocol answer is an error naming why, with the answer
// kept; an answer of exactly MaxResponseBytes is read whole, one byte more
// is refused.
func TestClientRefusesWhatIsNotAProtocolAnswer(t *testing.T) {
	health := string(golden(t, "response_health.json"))
	pad := func(n int) []byte { return []byte(health[:len(health)-1] + strings.Repeat(" ", n-len(health)) + "}") }
	for _, tc := range []struct {
		name   string
		status int
		body   []byte
		want   string // "" = accepted
	}{
		{"not JSON", 200, []byte("<html>"), "not a protocol response"},
		{"another protocol version", 200, []byte(strings.Replace(health, `"protocol_version":1`, `"protocol_version":2`, 1)), "protocol_version 2, want 1"},
		{"a refusal without an error member", 500, []byte(health), "HTTP 500: a refusal without an error member"},
		{"no registrar_health", 200, []byte(`{"protocol_version":1,"outcome":"removed"}`), "no registrar_health"},
		{"registrar_health not an object", 200, []byte(`{"protocol_version":1,"registrar_health":[1]}`), "registrar_health: "},
		{"exactly MaxResponseBytes", 200, pad(MaxResponseBytes), ""},
		{"one byte over MaxResponseBytes", 200, pad(MaxResponseBytes + 1), "response exceeds 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answer{status: tc.status, body: tc.body}
			r, err := fakeRegistrar(t, a.serve).Health(context.Background())
			if tc.want == "" {
				if err != nil || !r.OK() || len(r.Body) != len(tc.body) {
					t.Fatalf("got %v (body %d bytes), want accepted whole", err, len(r.Body))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "GET /v1/health") {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if r == nil || r.StatusCode != tc.status {
				t.Errorf("the answer is not kept beside the error: %+v", r)
			}
		})
	}
}

// The client sends the call's trace context by default, nothing with a
// nil propagator, and takes a nil option as none.
func TestClientPropagatesTheTraceContext(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	a := &answer{status: 200, body: golden(t, "response_health.json")}
	if _, err := fakeRegistrar(t, a.serve, nil).Health(ctx); err != nil {
		t.Fatal(err)
	}
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; a.traceparent != want {
		t.Errorf("traceparent %q, want %q", a.traceparent, want)
	}
	if _, err := fakeRegistrar(t, a.serve, WithPropagator(nil)).Health(ctx); err != nil {
		t.Fatal(err)
	}
	if a.traceparent != "" {
		t.Errorf("WithPropagator(nil) sent traceparent %q", a.traceparent)
	}
}

// The TLS client speaks TLS 1.3 at the least unless told otherwise, never
// changes the configuration it was given, and names its address.
func TestTLSClientDefaultsToTLS13AndNamesItsAddress(t *testing.T) {
	a := &answer{status: 200, body: golden(t, "response_health.json")}
	srv := httptest.NewTLSServer(http.HandlerFunc(a.serve))
	defer srv.Close()
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	addr := strings.TrimPrefix(srv.URL, "https://")

	given := &tls.Config{RootCAs: roots}
	c := NewTLSClient(addr, given)
	defer c.CloseIdleConnections()
	if r, err := c.Health(context.Background()); err != nil || !r.OK() {
		t.Fatalf("health over TLS: %v", err)
	}
	minVersion := func(c *Client) uint16 { return c.hc.Transport.(*http.Transport).TLSClientConfig.MinVersion }
	if given.MinVersion != 0 || minVersion(c) != tls.VersionTLS13 {
		t.Errorf("MinVersion: given config now %x, client's %x; want 0 and TLS 1.3", given.MinVersion, minVersion(c))
	}
	if v := minVersion(NewTLSClient(addr, &tls.Config{MinVersion: tls.VersionTLS12})); v != tls.VersionTLS12 {
		t.Errorf("a configured MinVersion became %x", v)
	}
	if v := minVersion(NewTLSClient(addr, nil)); v != tls.VersionTLS13 {
		t.Errorf("no configuration: MinVersion %x, want TLS 1.3", v)
	}

	srv.Close()
	_, err := NewTLSClient(addr, given).Health(context.Background())
	if err == nil || !strings.Contains(err.Error(), "GET /v1/health on "+addr+" (TLS)") {
		t.Errorf("a closed server: %v, want the address named", err)
	}
}

// An administrative refusal is an *AdminError with its status; an answer
// that is not one says so; a reload's result is decoded applied or refused;
// a backup checks its length against the daemon's trailer.
func TestAdminAnswers(t *testing.T) {
	ctx := context.Background()
	forbidden := []byte(`{"error":"AdminForbidden","detail":"only the daemon's uid or root"}`)
	for _, tc := range []struct {
		status int
		body   []byte
		want   string
	}{
		{403, forbidden, "AdminForbidden: only the daemon's uid or root"},
		{403, []byte("<html>"), `answered HTTP 403 to a reload, not an administrative answer: "<html>"`},
		{200, []byte("<html>"), `answered HTTP 200 to a reload, not a reload result`},
	} {
		a := &answer{status: tc.status, body: tc.body}
		_, err := fakeRegistrar(t, a.serve).Reload(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reload answered %d %s: %v, want %q", tc.status, tc.body, err, tc.want)
		}
		var ae *AdminError
		if isAdmin := errors.As(err, &ae); isAdmin != (tc.want == "AdminForbidden: only the daemon's uid or root") || isAdmin && ae.StatusCode != 403 {
			t.Errorf("reload answered %d %s: %#v", tc.status, tc.body, err)
		}
	}
	for _, tc := range []struct {
		status  int
		applied bool
	}{{200, true}, {422, false}} {
		a := &answer{status: tc.status, body: []byte(`{"applied":` + strconv.FormatBool(tc.applied) + `,"changes":[{"key":"k","old":"1","new":"2"}],"errors":["e"]}`)}
		res, err := fakeRegistrar(t, a.serve).Reload(ctx)
		if err != nil || res.Applied != tc.applied || len(res.Changes) != 1 || res.Changes[0].New != "2" || len(res.Errors) != 1 || a.method != http.MethodPost || a.path != PathReload {
			t.Errorf("reload answered %d: %+v, %v", tc.status, res, err)
		}
	}

	var sent string
	backup := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != PathBackup {
			w.WriteHeader(404)
			return
		}
		w.Header().Set("Trailer", "X-Backup-Bytes")
		io.WriteString(w, "snapshot")
		w.Header().Set("X-Backup-Bytes", sent)
	}
	for _, tc := range []struct {
		trailer string
		want    string
	}{{"8", ""}, {"9", `cut short: 8 bytes received, the daemon reported "9"`}, {"", `the daemon reported ""`}} {
		sent = tc.trailer
		var buf bytes.Buffer
		n, err := fakeRegistrar(t, backup).Backup(ctx, &buf)
		if tc.want == "" && (err != nil || n != 8 || buf.String() != "snapshot") || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("backup with trailer %q: %d, %v", tc.trailer, n, err)
		}
	}
	a := &answer{status: 403, body: forbidden}
	var buf bytes.Buffer
	var ae *AdminError
	if _, err := fakeRegistrar(t, a.serve).Backup(ctx, &buf); !errors.As(err, &ae) || ae.StatusCode != 403 || ae.ID != "AdminForbidden" {
		t.Errorf("a refused backup: %v", err)
	}
}

func TestRequestIDsArePrefixedAndCounted(t *testing.T) {
	a, err := NewRequestIDs()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewRequestIDs()
	first, second := a.Next(), a.Next()
	prefix, ok := strings.CutSuffix(first, ".1")
	if !ok || !strings.HasPrefix(prefix, "wire.") || len(prefix) != len("wire.")+12 || second != prefix+".2" {
		t.Errorf("ids %q, %q: want wire.<12 characters>.1 and .2", first, second)
	}
	if strings.HasPrefix(b.Next(), prefix+".") {
		t.Errorf("two servers drew the same prefix %q", prefix)
	}
}

func TestBoundDetailCutsOnARuneBoundary(t *testing.T) {
	if got := BoundDetail(""); got != "malformed request" {
		t.Errorf("empty: %q", got)
	}
	exact := strings.Repeat("a", MaxDetailBytes)
	if got := BoundDetail(exact); got != exact {
		t.Errorf("a detail of exactly MaxDetailBytes was cut to %d bytes", len(got))
	}
	// A two-byte rune straddles the cut: it goes whole.
	long := strings.Repeat("a", MaxDetailBytes-len("…")-1) + "é" + strings.Repeat("b", 10)
	got := BoundDetail(long)
	if want := strings.Repeat("a", MaxDetailBytes-len("…")-1) + "…"; got != want {
		t.Errorf("got %q (%d bytes), want %q", got, len(got), want)
	}
	if got := BoundDetail(exact + "a"); len(got) != MaxDetailBytes || !strings.HasSuffix(got, "…") {
		t.Errorf("one byte over: %d bytes %q", len(got), got[len(got)-8:])
	}
}

// The client exposes an answer's RateLimit-Policy and RateLimit fields
// parsed, on a success and on a 429 alike, whatever the case of the names
// and however many field lines carry them; nil when absent.
func TestClientReadsTheRateLimitFields(t *testing.T) {
	ctx := context.Background()
	a := &answer{status: 200, body: golden(t, "response_mint_first_mint.json"),
		policy: []string{`"control-plane";q=1600;w=160`}, limit: []string{`"control-plane";r=1599;t=1`}}
	c := fakeRegistrar(t, a.serve)
	r, err := c.Mint(ctx, MintRequest{})
	if err != nil || !r.OK() {
		t.Fatalf("mint: %v", err)
	}
	wantPolicy := &RateLimitPolicy{Policies: []QuotaPolicy{{Name: "control-plane", Quota: 1600, Window: 160}}}
	wantLimit := &RateLimit{Limits: []ServiceLimit{{Name: "control-plane", Remaining: 1599, EffectiveWindow: 1, HasEffectiveWindow: true}}}
	if !reflect.DeepEqual(r.RateLimitPolicy, wantPolicy) || !reflect.DeepEqual(r.RateLimit, wantLimit) || r.RateLimitError != nil {
		t.Errorf("success: policy %+v, limit %+v, error %v", r.RateLimitPolicy, r.RateLimit, r.RateLimitError)
	}

	a.status, a.body, a.retryAfter = 429, golden(t, "response_RegistrarBusy.json"), "7"
	a.policy, a.limit = []string{`"default";q=8;w=4`}, []string{`"default";r=0;t=7`}
	if r, err = c.Deregister(ctx, DeregisterRequest{}); err != nil || !r.Retryable() {
		t.Fatalf("deregister: %v", err)
	}
	if l := r.RateLimit; l == nil || len(l.Limits) != 1 || l.Limits[0].Remaining != 0 || l.Limits[0].EffectiveWindow != 7 || r.RetryAfterHeader != "7" {
		t.Errorf("429: limit %+v, Retry-After %q", r.RateLimit, r.RetryAfterHeader)
	}
	if p := r.RateLimitPolicy; p == nil || p.Policies[0].Quota != 8 || p.Policies[0].Window != 4 {
		t.Errorf("429: policy %+v", r.RateLimitPolicy)
	}

	// Two field lines are one List; lowercase names are the same fields.
	two := func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["ratelimit-policy"] = []string{`"a";q=1`, `"b";q=2;w=3`}
		w.Header()["ratelimit"] = []string{`"a";r=0`, `"b";r=1;t=2`}
		w.Write(golden(t, "response_health.json"))
	}
	if r, err = fakeRegistrar(t, two).Health(ctx); err != nil {
		t.Fatal(err)
	}
	if p := r.RateLimitPolicy; p == nil || len(p.Policies) != 2 || p.Policies[1].Window != 3 {
		t.Errorf("two lines: policy %+v, %v", p, r.RateLimitError)
	}
	if l := r.RateLimit; l == nil || len(l.Limits) != 2 || l.Limits[1].Remaining != 1 {
		t.Errorf("two lines: limit %+v, %v", l, r.RateLimitError)
	}

	a.policy, a.limit = nil, nil
	if r, err = c.Mint(ctx, MintRequest{}); err != nil || r.RateLimitPolicy != nil || r.RateLimit != nil || r.RateLimitError != nil {
		t.Errorf("no fields: policy %+v, limit %+v, error %v, call error %v", r.RateLimitPolicy, r.RateLimit, r.RateLimitError, err)
	}
}

// A malformed field is ignored, as the draft requires, and said why in
// RateLimitError; it never fails the call, and the other field is kept.
func TestClientIgnoresAMalformedRateLimitFieldAndSaysWhy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		policy, limit []string
		want          []string // the fields named in RateLimitError
	}{
		{"RateLimit malformed", []string{`"a";q=8;w=4`}, []string{`"a";r=-1`}, []string{HeaderRateLimit}},
		{"RateLimit-Policy malformed", []string{`"a";q=8;w=0`}, []string{`"a";r=1;t=1`}, []string{HeaderRateLimitPolicy}},
		{"both malformed", []string{`a;q=8`}, []string{`"a";r=1,`}, []string{HeaderRateLimitPolicy, HeaderRateLimit}},
		{"empty", []string{""}, []string{`"a";r=1`}, []string{HeaderRateLimitPolicy}},
		{"a line that breaks the List", []string{`"a";q=8`}, []string{`"a";r=1`, `"b`}, []string{HeaderRateLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answer{status: 200, body: golden(t, "response_mint_first_mint.json"), policy: tc.policy, limit: tc.limit}
			r, err := fakeRegistrar(t, a.serve).Mint(ctx, MintRequest{})
			if err != nil || !r.OK() || r.Outcome != "first_mint" {
				t.Fatalf("the call failed: %v", err)
			}
			// One malformed field is its *RateLimitFieldError, two are joined.
			errs := []error{r.RateLimitError}
			if joined, ok := r.RateLimitError.(interface{ Unwrap() []error }); ok {
				errs = joined.Unwrap()
			}
			var named []string
			for _, e := range errs {
				if fe, ok := e.(*RateLimitFieldError); ok {
					named = append(named, fe.Field)
				}
			}
			if !reflect.DeepEqual(named, tc.want) {
				t.Fatalf("RateLimitError %v names %v, want %v", r.RateLimitError, named, tc.want)
			}
			if bad := slices.Contains(tc.want, HeaderRateLimitPolicy); bad != (r.RateLimitPolicy == nil) {
				t.Errorf("RateLimit-Policy %+v with the field malformed: %v", r.RateLimitPolicy, bad)
			}
			if bad := slices.Contains(tc.want, HeaderRateLimit); bad != (r.RateLimit == nil) {
				t.Errorf("RateLimit %+v with the field malformed: %v", r.RateLimit, bad)
			}
		})
	}
}

// A refused server's error says why in both of its forms: the uid and the
// uids trusted besides root, or, for the overflow uid of an unmapped
// server, that the client's user namespace cannot tell who it is and
// where to run the command instead (the real refusal needs root and a
// user namespace, and its message is checked there in a child process).
func TestServerNotTrustedErrorSaysWhy(t *testing.T) {
	foreign := (&ServerNotTrustedError{Socket: "/run/r.sock", UID: 1001, Trusted: []uint32{998, 999}}).Error()
	for _, want := range []string{"unix socket /run/r.sock", "runs as uid 1001", "not as root or uid 998 or uid 999"} {
		if !strings.Contains(foreign, want) {
			t.Errorf("%q does not say %q", foreign, want)
		}
	}
	unmapped := (&ServerNotTrustedError{Socket: "/run/r.sock", UID: 65534, Trusted: []uint32{998}, Unmapped: true}).Error()
	for _, want := range []string{"unix socket /run/r.sock", "does not map", "reports it as 65534", "outside the user namespace"} {
		if !strings.Contains(unmapped, want) {
			t.Errorf("%q does not say %q", unmapped, want)
		}
	}
	if strings.Contains(unmapped, "uid 998") {
		t.Errorf("%q names the trusted uids, which an unmapped server is not compared with", unmapped)
	}
}

// dropListener closes the first drop connections it accepts once their
// request is read whole, before a byte of an answer, as a server does to
// a connection it evicts; the later ones are served. requests counts the
// requests read, dropped or served.
type dropListener struct {
	net.Listener
	drop     int
	requests *atomic.Int32
}

// Accept is called by the one goroutine of http.Server.Serve.
func (l *dropListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.drop == 0 {
			return c, err
		}
		l.drop--
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound, not a wait
		if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.Copy(io.Discard, req.Body)
			l.requests.Add(1)
		}
		c.Close()
	}
}

// droppingRegistrar is fakeRegistrar behind a dropListener.
func droppingRegistrar(t *testing.T, drop int, a *answer) (*Client, *atomic.Int32) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "r.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	requests := new(atomic.Int32)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		a.serve(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(&dropListener{Listener: l, drop: drop, requests: requests})
	t.Cleanup(func() { srv.Close() })
	c := NewUnixClient(sock)
	t.Cleanup(c.CloseIdleConnections)
	return c, requests
}

// A verb whose fresh connection the server closes before answering (an
// eviction at a connection cap) is sent once more on a new one, and only
// once: the verbs are idempotent, but a server that keeps dropping the
// call gets two requests, not a loop. A health call is not resent.
func TestAVerbOnALostFreshConnectionIsSentOnceMore(t *testing.T) {
	ctx := context.Background()
	a := &answer{status: 200, body: golden(t, "response_mint_first_mint.json")}
	c, requests := droppingRegistrar(t, 1, a)
	r, err := c.Mint(ctx, MintRequest{ServiceName: "review", Host: "h1", Component: "review"})
	if err != nil || !r.OK() || r.Outcome != "first_mint" {
		t.Fatalf("a mint whose first connection was dropped: %v, want answered on the second", err)
	}
	if got := requests.Load(); got != 2 {
		t.Errorf("the server read %d requests, want 2 (the dropped one, sent once more)", got)
	}

	a.body = golden(t, "response_deregister_removed.json")
	c, requests = droppingRegistrar(t, 3, a)
	if _, err := c.Deregister(ctx, DeregisterRequest{ServiceName: "review", Host: "h1", Component: "review"}); err == nil {
		t.Error("a deregister whose every connection is dropped succeeded")
	}
	if got := requests.Load(); got != 2 {
		t.Errorf("a server dropping every connection read %d requests, want 2: resent once, never more", got)
	}

	a.body = golden(t, "response_health.json")
	c, requests = droppingRegistrar(t, 1, a)
	if _, err := c.Health(ctx); err == nil {
		t.Error("a health call whose connection was dropped succeeded")
	}
	if got := requests.Load(); got != 1 {
		t.Errorf("a dropped health call reached the server %d times, want once", got)
	}
}

// Each client gives up an idle kept-alive connection before the server
// would close it (wire.DefaultIdleTimeout), so it never sends a request
// on a connection the server is closing as idle.
func TestClientsCloseIdleConnectionsBeforeTheServerDoes(t *testing.T) {
	for name, c := range map[string]*Client{
		"unix": NewUnixClient(filepath.Join(t.TempDir(), "r.sock")),
		"TLS":  NewTLSClient("127.0.0.1:1", nil),
	} {
		if d := c.hc.Transport.(*http.Transport).IdleConnTimeout; d <= 0 || d >= DefaultIdleTimeout {
			t.Errorf("%s client: IdleConnTimeout %v, want above 0 and below the server's %v", name, d, DefaultIdleTimeout)
		}
	}
}
